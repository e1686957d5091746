"""``ones`` skips a pass when nothing it depends on changed since a pass that only held queued
jobs: the same nodes version, pending count and history version, before the next hysteresis
end. A skipped pass renews the holds running out and evolves nothing."""

from __future__ import annotations

import pytest

from slurm_plugin.model import Cluster, Gpu, GpuUse, Job, Node, Readings
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.base import Context
from slurm_plugin.policy.ones import decide
from slurm_plugin.sim.cluster import ClusterSpec


def _ctx(now: float, version: int | None, pending: int = 1, begin_s: float | None = None,
         history_version: int | None = 0, busy_start_s: float = 0.0,
         busy_elastic: bool = False) -> Context:
    """One full node (a non-elastic job unless ``busy_elastic``) and one elastic job queued
    behind it."""
    uses = tuple(GpuUse("n0", k) for k in range(4))
    busy = Job(job_id="1", state="RUNNING", gpus=4, nodes=("n0",), uses=uses, submit_s=0.0,
               start_s=busy_start_s, time_limit_s=1e6, min_gpus=1 if busy_elastic else None,
               max_gpus=8 if busy_elastic else None)
    queued = Job(job_id="2", state="PENDING", gpus=2, submit_s=1.0, time_limit_s=1e5,
                 min_gpus=1, max_gpus=4, begin_s=begin_s)
    node = Node(name="n0", state="allocated",
                gpus=tuple(Gpu(node="n0", index=k, exclusive_job="1") for k in range(4)))
    cluster = Cluster(nodes=(node,), jobs={"1": busy, "2": queued}, taken_s=now,
                      pending_count=pending, nodes_version=version)
    return Context(cluster=cluster, readings=Readings(), now_s=now,
                   history_version=history_version)


@pytest.fixture
def evolved(monkeypatch):
    calls: list[int] = []
    real = decide.evolve

    def counting(plans, *args):
        calls.append(len(plans))
        return real(plans, *args)

    monkeypatch.setattr(decide, "evolve", counting)
    return calls


def test_a_pass_with_nothing_changed_is_skipped_and_renews_holds(evolved):
    pol = get_policy("ones")
    first = pol.reconcile(_ctx(1000.0, 1))
    assert [(a.kind, a.job_id, a.begin_s) for a in first] == [("defer", "2", 2800.0)]
    assert evolved == [1]
    # held until 2800: nothing to renew at 1100, and no evolution
    assert pol.reconcile(_ctx(1100.0, 1, begin_s=2800.0)) == ()
    # the hold runs out within hold_s / 2: renewed without evolving
    renewed = pol.reconcile(_ctx(2000.0, 1, begin_s=2800.0))
    assert [(a.kind, a.job_id, a.begin_s) for a in renewed] == [("defer", "2", 3800.0)]
    assert evolved == [1]


def test_a_held_job_is_renewed_before_its_hold_runs_out_at_the_simulators_pace():
    """With passes the simulator's default interval apart, every pass leaves the job left
    out held beyond the next pass: Slurm never sees its hold run out."""
    interval_s = ClusterSpec().reconcile_interval_s
    pol = get_policy("ones")
    begin_s = None
    for k in range(12):
        now = 1000.0 + k * interval_s
        for a in pol.reconcile(_ctx(now, 1, begin_s=begin_s)):
            assert (a.kind, a.job_id) == ("defer", "2")
            begin_s = a.begin_s
        assert begin_s > now + interval_s


@pytest.mark.parametrize("change", [{"version": 2}, {"pending": 2}, {"history_version": 1},
                                    {"version": None}])
def test_a_change_evolves_again(evolved, change):
    pol = get_policy("ones")
    pol.reconcile(_ctx(1000.0, 1))
    args = {"version": 1, "pending": 1, "history_version": 0, **change}
    pol.reconcile(_ctx(1100.0, args["version"], args["pending"], 2800.0,
                       args["history_version"]))
    assert evolved == [1, 1]


def test_no_skip_without_a_nodes_version(evolved):
    pol = get_policy("ones")
    pol.reconcile(_ctx(1000.0, None))
    pol.reconcile(_ctx(1100.0, None, begin_s=2800.0))
    assert evolved == [1, 1]


def test_a_hysteresis_end_evolves_again(evolved):
    pol = get_policy("ones")
    young = {"busy_start_s": 900.0, "busy_elastic": True}    # movable from 1200 (300 s)
    pol.reconcile(_ctx(1000.0, 1, **young))
    pol.reconcile(_ctx(1100.0, 1, begin_s=2800.0, **young))
    assert evolved == [1]
    pol.reconcile(_ctx(1250.0, 1, begin_s=2800.0, **young))
    assert len(evolved) == 2
