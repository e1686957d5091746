"""``tiresias`` keeps state from pass to pass (each job's row, the last pass that decided
nothing); over a simulated run it must decide exactly as a policy made afresh for every pass,
and the queued jobs it reads from the simulator's priority order (tiers it set itself) must be
those a sort of every job by (queue, submission, id) gives."""

from __future__ import annotations

import pytest

from slurm_plugin.model import Action
from slurm_plugin.policy.tiresias.decide import Tiresias, _queued
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.trace import TraceJob


class Twin(Tiresias):
    """Tiresias that checks each pass against a fresh one on the same snapshot."""

    def __init__(self) -> None:
        super().__init__()
        self.passes = self.compared = self.pending_checked = self.tiered = 0

    def reconcile(self, ctx) -> tuple[Action, ...]:
        got = super().reconcile(ctx)
        self.passes += 1
        fresh = Tiresias().reconcile(ctx)
        assert _decisions(got, ctx) == _decisions(fresh, ctx), ctx.now_s
        self.compared += 1
        cluster = ctx.cluster
        if cluster.pending_count:
            assert cluster.pending_jobs is not None
            plain = cluster.__class__(nodes=cluster.nodes, jobs=cluster.jobs,
                                      taken_s=cluster.taken_s, pending_count=cluster.pending_count)
            th = (3600.0, 36000.0)
            for k in (1, 3, 256):
                assert [j.job_id for j in _queued(cluster, k, ctx.history, th)] == \
                    [j.job_id for j in _queued(plain, k, ctx.history, th)]
            self.pending_checked += 1
            self.tiered += bool(cluster.pending_tiered)
        return got


def _decisions(actions, ctx) -> list[tuple]:
    return [(a.kind, a.job_id, a.begin_s, a.gpus, a.nice, tuple(sorted(a.predicted.items())))
            for a in actions]


def _jobs(n: int) -> list[TraceJob]:
    """Bursts of short and long jobs of 1 to 8 GPUs, some submitted at the same second."""
    out = []
    for i in range(n):
        gpus = (1, 2, 1, 4, 8, 1)[i % 6]
        out.append(TraceJob(job_id=str(i), submit_s=60.0 * (i // 3), line=i + 2,
                            duration_s=(600.0, 7200.0, 1800.0, 20_000.0)[i % 4] * (1 + i % 5),
                            num_gpus=gpus))
    return out


@pytest.mark.parametrize("nodes", [2, 4])
def test_kept_state_decides_as_a_fresh_policy(nodes):
    policy = Twin()
    spec = ClusterSpec(nodes=nodes, gpus_per_node=8, restart_cost_s=90.0)
    Simulator(_jobs(150), spec, policy, settings={"thresholds_gpu_s": [3600.0, 36000.0],
                                                  "lookahead": 16}).run()
    assert policy.compared > 100 and policy.pending_checked > 50, vars(policy)
    assert policy.compared == policy.passes and policy.tiered > 20, vars(policy)
