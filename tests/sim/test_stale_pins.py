"""A pending job pinned to a busy GPU in the simulator: its view shows the pin as the live
snapshot does (``Job.pinned``, ``Cluster.pending_pinned``), and EaCO's ``unpin`` lets Slurm
start it on any free GPU once it has waited ``pin_wait_s``."""

from __future__ import annotations

from slurm_plugin.policy.base import plain_placement
from slurm_plugin.policy.eaco.pins import stale_pins
from slurm_plugin.policy.eaco.settings import EacoSettings
from slurm_plugin.record import replace
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.trace import TraceJob


class Starts(Simulator):
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.starts: dict[str, tuple[float, str]] = {}

    def _start(self, j, gpus):
        self.starts.setdefault(j.id, (self.now, gpus[0].node.name if gpus else ""))
        super()._start(j, gpus)


class PinSecond:
    """Pins job 2 to 2 shards of GPU 0 of node0 (held whole by job 1); reconciles with
    EaCO's stale-pin rule."""

    name = "pin-second"

    def __init__(self, pin_wait_s: float) -> None:
        self.settings = EacoSettings(pin_wait_s=pin_wait_s)
        self.seen: list[tuple] = []

    def advise(self, request, ctx):
        pl = plain_placement(self.name, request, "as asked")
        if request.name != "job2":
            return pl
        return replace(pl, nodes=("node0",), gpu_indexes=(0,), share_mode="shard", shards=2)

    def reconcile(self, ctx):
        for job in ctx.cluster.pending_pinned or ():
            self.seen.append((ctx.now_s, job.job_id, job.pinned))
        return stale_pins(ctx.cluster, ctx.now_s, self.settings, self.name)


def _run(pin_wait_s: float):
    jobs = [TraceJob(job_id="1", submit_s=0.0, duration_s=5000.0, num_gpus=1, line=2),
            TraceJob(job_id="2", submit_s=10.0, duration_s=100.0, num_gpus=1, line=3)]
    spec = ClusterSpec(nodes=2, gpus_per_node=1, shards_per_gpu=4, reconcile_interval_s=60.0,
                       time_limit_rule="exact")
    policy = PinSecond(pin_wait_s)
    sim = Starts(jobs, spec, policy)
    sim.run()
    return sim, policy


def test_a_stale_pin_is_undone_after_pin_wait_s_and_the_job_starts_on_a_free_gpu():
    sim, policy = _run(300.0)
    assert policy.seen and policy.seen[0][1:] == ("2", (("node0", "g0", 2),))
    start_s, node = sim.starts["2"]
    assert 310.0 <= start_s <= 370.0 and node == "node1"      # the first pass past 10 + 300 s
    assert sim.metrics.actions == {"unpin": 1}
    assert all(t <= start_s for t, _, _ in policy.seen)  # no longer pinned once unpinned


def test_without_the_rule_the_pinned_job_waits_for_its_gpu():
    sim, policy = _run(0.0)
    assert sim.starts["2"] == (5000.0, "node0")
    assert "unpin" not in sim.metrics.actions and policy.seen[-1][0] >= 4900.0
