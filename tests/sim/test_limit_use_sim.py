"""The simulator's ``Cluster.limit_use``: the GPU-weighted share of their time limits that the
jobs ended in the last week used, as Slurm's accounting gives it live."""

from __future__ import annotations

import pytest

from slurm_plugin.model import LIMIT_USE_WINDOW_S, Action
from slurm_plugin.policy.baseline import SlurmDefault
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.trace import TraceJob


def test_limit_use_of_the_jobs_ended_in_the_last_week():
    seen: list[tuple[float, float | None]] = []

    class Spy(SlurmDefault):
        def reconcile(self, ctx) -> tuple[Action, ...]:
            seen.append((ctx.now_s, ctx.cluster.limit_use))
            return ()

    later = LIMIT_USE_WINDOW_S + 10_000.0
    jobs = [TraceJob(job_id="a", submit_s=0.0, duration_s=100.0, num_gpus=1, line=2,
                     time_limit_s=960.0),
            TraceJob(job_id="b", submit_s=0.0, duration_s=300.0, num_gpus=2, line=3,
                     time_limit_s=600.0),
            TraceJob(job_id="c", submit_s=later, duration_s=50_000.0, num_gpus=1, line=4,
                     time_limit_s=60_000.0)]
    spec = ClusterSpec(nodes=1, gpus_per_node=4, reconcile_interval_s=60.0)
    Simulator(jobs, spec, Spy(), seed=0).run()
    at = dict(seen)
    assert at[60.0] is None                                   # nothing ended yet
    assert at[120.0] == pytest.approx(100 / 960)              # a: 1 GPU x 100 of 960 s
    assert at[360.0] == pytest.approx((100 + 2 * 300) / (960 + 2 * 600))
    # a week after they ended, a and b no longer count; c runs still
    quiet = [u for t, u in seen if 300 + LIMIT_USE_WINDOW_S < t < later + 50_000]
    assert quiet and set(quiet) == {None}
