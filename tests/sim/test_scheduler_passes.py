"""The simulator's two schedulers against Slurm's rules, on small clusters:

- the main scheduler stops at the first job that cannot start, except one that names its nodes
  (``--nodelist``): that one keeps only its nodes from the rest of the pass, as slurmctld's
  ``_schedule`` does ("don't block the entire queue/partition");
- the backfill pass's shortcuts (a shape that got no GPUs, a shape refused for its time limit)
  change no decision: the same traces give the same starts with them off."""

from __future__ import annotations

import random

import pytest

from slurm_plugin.policy import get_policy
from slurm_plugin.policy.base import plain_placement
from slurm_plugin.record import replace
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.trace import TraceJob


class Starts(Simulator):
    """Records each job's (first) start time."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.starts: dict[str, float] = {}

    def _start(self, j, gpus):
        self.starts.setdefault(j.id, self.now)
        super()._start(j, gpus)


class NoShortcuts(Starts):
    """Every job without a shape: no capacity pre-check, no memo; each job fitted afresh."""

    def _apply_placement(self, j, pl, num_nodes=None):
        super()._apply_placement(j, pl, num_nodes)
        j.shape = None


class PinSecond:
    """Pins job 2 to GPU 0 of node0 (held by job 1); the rest as asked."""

    name = "pin-second"

    def advise(self, request, ctx):
        pl = plain_placement(self.name, request, "as asked")
        return replace(pl, nodes=("node0",), gpu_indexes=(0,)) if request.name == "job2" else pl

    def reconcile(self, ctx):
        return ()


def test_a_job_pinned_to_busy_nodes_does_not_block_the_queue():
    jobs = [TraceJob(job_id="1", submit_s=0.0, duration_s=5000.0, num_gpus=1, line=2),
            TraceJob(job_id="2", submit_s=10.0, duration_s=100.0, num_gpus=1, line=3),
            TraceJob(job_id="3", submit_s=20.0, duration_s=100.0, num_gpus=1, line=4)]
    spec = ClusterSpec(nodes=2, gpus_per_node=1, bf_interval_s=600.0, time_limit_rule="exact")
    sim = Starts(jobs, spec, PinSecond())
    sim.run()
    assert sim.starts["1"] == 0.0
    assert sim.starts["3"] == 20.0          # at once on node1, not at the backfill tick (600 s)
    assert sim.starts["2"] >= 5000.0        # when job 1 frees its GPU


def _trace(seed: int, n: int = 60) -> list[TraceJob]:
    rng = random.Random(seed)
    t, out = 0.0, []
    for i in range(n):
        t += rng.choice((0.0, 5.0, 30.0, 120.0, 600.0))
        out.append(TraceJob(job_id=str(i), submit_s=t, line=i + 2,
                            duration_s=rng.choice((60.0, 300.0, 900.0, 3600.0, 7200.0)),
                            num_gpus=rng.choice((1, 1, 1, 2, 2, 3, 4, 6, 8))))
    return out


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("policy", ["slurm-default", "fifo-packed"])
def test_the_backfill_shortcuts_change_no_start(seed, policy):
    spec = ClusterSpec(nodes=4, gpus_per_node=4, bf_interval_s=30.0, time_limit_rule="modal")
    fast = Starts(_trace(seed), spec, get_policy(policy), seed=seed)
    fast.run()
    exact = NoShortcuts(_trace(seed), spec, get_policy(policy), seed=seed)
    exact.run()
    assert fast.starts == exact.starts


class PinAll:
    """Pins every job to GPU 0 of node0: job 1 on 3 shards, job 2 on 2 shards (it waits: 5 of
    4), job 3 on the whole GPU (it waits); records the GPU views of its first reconcile pass."""

    name = "pin-all"

    def __init__(self):
        self.views = None

    def advise(self, request, ctx):
        pl = plain_placement(self.name, request, "as asked")
        shards = {"job1": 3, "job2": 2}.get(request.name, 0)
        return replace(pl, nodes=("node0",), gpu_indexes=(0,),
                       share_mode="shard" if shards else "exclusive", shards=shards)

    def reconcile(self, ctx):
        if self.views is None:
            self.views = ctx.cluster.nodes[0].gpus
        return ()


def test_pending_pinned_jobs_hold_their_gpus_in_the_views_as_live():
    """The live snapshot counts a pending job's typed GRES as that GPU's holder (``Job.pinned``);
    the simulator's views do the same while the job waits, and drop it once it starts."""
    jobs = [TraceJob(job_id="1", submit_s=0.0, duration_s=1000.0, num_gpus=1, line=2),
            TraceJob(job_id="2", submit_s=10.0, duration_s=100.0, num_gpus=1, line=3),
            TraceJob(job_id="3", submit_s=20.0, duration_s=100.0, num_gpus=1, line=4)]
    spec = ClusterSpec(nodes=1, gpus_per_node=2, shards_per_gpu=4, time_limit_rule="exact",
                       reconcile_interval_s=300.0)
    policy = PinAll()
    sim = Starts(jobs, spec, policy)
    sim.run()
    g0, g1 = policy.views               # at 300 s: job 1 runs, jobs 2 and 3 wait for GPU 0
    assert (g0.shards_used, g0.shard_jobs, g0.exclusive_job) == (5, ("1", "2"), None)
    assert (g1.shards_used, g1.shard_jobs, g1.exclusive_job) == (0, (), None)
    assert sim.starts["2"] >= 1000.0 and sim.starts["3"] >= 1000.0
    assert all(not g.pinned for n in sim.nodes for g in n.gpus)
