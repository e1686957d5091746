"""The fluid shortest-remaining-time-first reference (``sim/fluid.py``) on cases small enough to
work out by hand."""

from __future__ import annotations

import pytest

from slurm_plugin.sim.fluid import fluid_srpt_jct_s
from slurm_plugin.sim.trace import TraceJob


def job(i, submit_s, run_s, gpus, lo=None, hi=None, speedup=None):
    return TraceJob(job_id=str(i), submit_s=submit_s, duration_s=run_s, num_gpus=gpus, line=i,
                    min_gpus=lo, max_gpus=hi, speedup=speedup)


def test_a_job_alone_grows_to_its_fastest_count():
    sp = (1.0, 1.8, 2.4, 2.0)           # four GPUs are slower than three
    assert fluid_srpt_jct_s([job(1, 50.0, 1800.0, 2, 1, 4, sp)], 8) == \
        pytest.approx(1800.0 * 1.8 / 2.4)


def test_the_shorter_job_runs_first():
    jobs = [job(1, 0.0, 300.0, 1), job(2, 0.0, 100.0, 1)]
    assert fluid_srpt_jct_s(jobs, 1) == pytest.approx((100.0 + 400.0) / 2)


def test_a_short_arrival_preempts_a_long_run():
    jobs = [job(1, 0.0, 1000.0, 1), job(2, 100.0, 10.0, 1)]
    assert fluid_srpt_jct_s(jobs, 1) == pytest.approx((1010.0 + 10.0) / 2)


def test_jobs_start_on_their_least_gpu_time_and_the_shortest_grows():
    sp = (1.0, 1.5, 1.8, 2.0)           # sublinear: one GPU is the most efficient
    # two jobs of 1000 s on 1 GPU, range 1-4, on 4 GPUs: each starts on 1; the shorter (job
    # 1 by its id on a tie) grows to 3 (1.8x), the other keeps 1; then it grows to 4
    jobs = [job(1, 0.0, 1000.0, 1, 1, 4, sp), job(2, 0.0, 1000.0, 1, 1, 4, sp)]
    first = 1000.0 / 1.8
    second = first + (1000.0 - first) / 2.0     # what is left of its 1000 s, at 2x on 4 GPUs
    assert fluid_srpt_jct_s(jobs, 4) == pytest.approx((first + second) / 2)


def test_nothing_to_schedule():
    assert fluid_srpt_jct_s([], 8) == 0.0


@pytest.mark.parametrize("case", range(6))
def test_it_never_goes_below_the_lower_bound(case):
    import random

    from slurm_plugin.sim.bounds import lower_bounds
    rng = random.Random(case)
    sp = (1.0, 1.7, 2.2, 2.5, 2.7, 2.8, 2.85, 2.9)
    jobs = [job(i, rng.uniform(0, 5000), rng.uniform(60, 20_000), rng.choice([1, 2, 4, 8]),
                1 if rng.random() < 0.5 else None, 8, sp) for i in range(rng.randint(1, 80))]
    gpus = rng.choice([4, 8, 16])
    got = fluid_srpt_jct_s(jobs, gpus)
    assert got >= lower_bounds(jobs, gpus).avg_jct_s * (1 - 1e-9)
