"""The simulated Slurm that reconcile actions run on (``sim/sim_port.py``), driven by the live
interpreter (``actuate.interpret``): a resize of a running job holds it (stopped, its work
kept, out of the queue), places it anew while held, and its release puts it back in the queue;
a pending job is resized where it waits; a move of a job not running is left out, as live."""

from __future__ import annotations

import pytest

from slurm_plugin.actuate import interpret
from slurm_plugin.model import Action
from slurm_plugin.policy import get_policy
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.sim_port import SimPort
from slurm_plugin.sim.state import PENDING, RUNNING
from slurm_plugin.sim.trace import read_trace

T0 = 1_700_000_000


class Watched(SimPort):
    """The job as ``observe`` shows it after each step."""

    __slots__ = ("seen",)

    def __init__(self, sim, action):
        super().__init__(sim, action)
        self.seen = []

    def _saw(self, step, job_id):
        self.seen.append((step, self.observe(job_id)))

    def requeue_hold(self, job_id):
        super().requeue_hold(job_id)
        self._saw("requeue_hold", job_id)

    def set_gpus(self, job_id, gpus, num_nodes=None):
        super().set_gpus(job_id, gpus, num_nodes)
        self._saw("set_gpus", job_id)

    def whole_gpus(self, job_id):
        super().whole_gpus(job_id)
        self._saw("whole_gpus", job_id)

    def release(self, job_id):
        super().release(job_id)
        self._saw("release", job_id)

    def start_now(self, job_id):
        super().start_now(job_id)
        self._saw("start_now", job_id)


@pytest.fixture
def sim(tmp_path):
    """Job a running on 2 of the 4 GPUs for 600 s, b (4 GPUs) waiting behind it."""
    p = tmp_path / "t.csv"
    p.write_text("job_id,submit_s,duration_s,num_gpus,user,app\n"
                 f"a,{T0},3600,2,u,resnet18\nb,{T0},3600,4,u,resnet18\n")
    jobs = read_trace(p, "canonical")
    s = Simulator(jobs, ClusterSpec(nodes=1, gpus_per_node=4, restart_cost_s=90.0),
                  get_policy("slurm-default"))
    for t in jobs:
        s._submit(t)
        s._schedule()
    s._advance(T0 + 600.0)
    assert s.by_id["a"].state == RUNNING and s.by_id["b"].state == PENDING
    return s


def test_a_resized_running_job_is_held_then_pending_after_its_release(sim):
    a = sim.by_id["a"]
    port = Watched(sim, Action("resize", "a", "t", gpus=1, why="t"))
    view = port.observe("a")
    assert view.running and not view.held
    interpret(port, port.action)
    assert [step for step, _ in port.seen] == ["requeue_hold", "set_gpus", "release",
                                               "start_now"]
    held, placed, released, _ = (v for _, v in port.seen)
    assert held.pending and held.held
    assert placed.pending and placed.held
    assert released.pending and not released.held
    assert a in sim.pending and "a" not in sim.running
    assert a.per_node == 1 and a.restarts == 1
    # its work done kept (600 s of 3600 at its first size), and the restart paid
    assert a.work_left == pytest.approx(3000.0 + 90.0 * a.scale, rel=1e-6)


def test_a_held_job_is_out_of_the_queue_until_its_release(sim):
    port = SimPort(sim, Action("resize", "a", "t", gpus=1, why="t"))
    port.requeue_hold("a")
    a = sim.by_id["a"]
    assert port.observe("a").held and a not in sim.pending and "a" not in sim.running
    port.set_gpus("a", 1)
    assert a not in sim.pending
    port.release("a")
    assert not port.observe("a").held and a in sim.pending


def test_a_pending_job_is_resized_where_it_waits(sim):
    b = sim.by_id["b"]
    port = Watched(sim, Action("resize", "b", "t", gpus=2, why="t"))
    interpret(port, port.action)
    assert [step for step, _ in port.seen] == ["set_gpus"]
    assert b.per_node == 2 and b.restarts == 0 and b in sim.pending
    assert b.work_left == 3600.0           # nothing ran, nothing paid


def test_a_move_of_a_job_not_running_is_left_out_as_live(sim):
    b = sim.by_id["b"]
    before = (b.pl, b.per_node, b.nice, b.restarts)
    port = Watched(sim, Action("move_exclusive", "b", "t", gpus=1, why="t"))
    interpret(port, port.action)
    assert port.seen == [] and (b.pl, b.per_node, b.nice, b.restarts) == before
