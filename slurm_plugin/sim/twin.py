"""Comparing two runs of one workload (the live cluster and the simulator): pure functions.

Start order. Each run's jobs are ordered by start time; jobs that start at the same time are
ordered by submit time, then job id (Slurm starts the jobs of one scheduling pass in priority
order, which is submit order under ``priority/basic``). Two orders agree on a job when the job is
in their longest common subsequence: the largest set of jobs that start in the same relative
order in both runs. ``order_agreement`` is that set's size over the number of jobs; "the same
start order for at least 90% of jobs" means that at most 10% of the jobs would have to be moved
to turn one order into the other. ``pairwise_agreement`` (Kendall-style: the fraction of job
pairs started in the same relative order) is reported alongside.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Iterable, Sequence

from ..errors import InputError
from ..policy.queue import id_order


@dataclass(frozen=True, slots=True)
class JobTimes:
    """One job of one run; times in seconds on any common clock."""

    job_id: str
    submit_s: float
    start_s: float
    end_s: float

    @property
    def jct_s(self) -> float:
        return self.end_s - self.submit_s

    @property
    def queue_s(self) -> float:
        return self.start_s - self.submit_s

    @property
    def run_s(self) -> float:
        return self.end_s - self.start_s


def start_order(jobs: Iterable[JobTimes]) -> list[str]:
    """Job ids by start time; ties by submit time, then job id."""
    return [j.job_id for j in sorted(jobs, key=lambda j: (j.start_s, j.submit_s,
                                                        id_order(j.job_id)))]


def _check_same_jobs(a: Sequence[str], b: Sequence[str]) -> None:
    if len(set(a)) != len(a) or len(set(b)) != len(b):
        raise InputError("twin: start order: a job id appears twice in one run")
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b))
        raise InputError(f"twin: start order: the runs hold different jobs ({', '.join(only)} "
                         "in one run only); compare runs of the same workload")


def common_order(a: Sequence[str], b: Sequence[str]) -> list[str]:
    """A longest common subsequence of two orders of the same jobs (in ``a``'s order)."""
    _check_same_jobs(a, b)
    pos_b = {job: i for i, job in enumerate(b)}
    seq = [pos_b[job] for job in a]
    tails: list[int] = []          # smallest tail value of an increasing run of each length
    tail_at: list[int] = []        # index in seq of that tail
    parent = [-1] * len(seq)
    for i, v in enumerate(seq):
        k = bisect.bisect_left(tails, v)
        if k == len(tails):
            tails.append(v)
            tail_at.append(i)
        else:
            tails[k], tail_at[k] = v, i
        parent[i] = tail_at[k - 1] if k else -1
    out: list[str] = []
    i = tail_at[-1] if tail_at else -1
    while i >= 0:
        out.append(a[i])
        i = parent[i]
    return out[::-1]


def order_agreement(a: Sequence[str], b: Sequence[str]) -> float:
    """Fraction of jobs that start in the same relative order in both runs (see module doc);
    1.0 for two empty runs."""
    return len(common_order(a, b)) / len(a) if a else 1.0


def moved_jobs(a: Sequence[str], b: Sequence[str]) -> list[str]:
    """The jobs outside the common order (in ``a``'s order): the ones that moved."""
    keep = set(common_order(a, b))
    return [job for job in a if job not in keep]


def pairwise_agreement(a: Sequence[str], b: Sequence[str]) -> float:
    """Fraction of job pairs that start in the same relative order in both runs."""
    _check_same_jobs(a, b)
    pos_b = {job: i for i, job in enumerate(b)}
    n = len(a)
    pairs = n * (n - 1) // 2
    if not pairs:
        return 1.0
    same = sum(1 for i in range(n) for k in range(i + 1, n) if pos_b[a[i]] < pos_b[a[k]])
    return same / pairs


def summary(jobs: Sequence[JobTimes]) -> dict[str, float]:
    """Average JCT, queue and run time, and the makespan (first submit to last end)."""
    if not jobs:
        raise InputError("twin: summary: no jobs in the run")
    n = len(jobs)
    return {"jobs": n,
            "avg_jct_s": sum(j.jct_s for j in jobs) / n,
            "avg_queue_s": sum(j.queue_s for j in jobs) / n,
            "avg_run_s": sum(j.run_s for j in jobs) / n,
            "makespan_s": max(j.end_s for j in jobs) - min(j.submit_s for j in jobs)}


def integrate(samples: Sequence[tuple[float, float]], t0_s: float, t1_s: float) -> float:
    """Integral over [t0_s, t1_s] of the line through time-sorted ``(time_s, value)`` samples
    (trapezoids, as the collector integrates its energy counter): power samples -> energy.
    The samples must cover the interval."""
    if t1_s < t0_s or not samples or samples[0][0] > t0_s or samples[-1][0] < t1_s:
        span = f"{samples[0][0]:.1f}..{samples[-1][0]:.1f}" if samples else "no samples"
        raise InputError(f"twin: integral: [{t0_s:.1f}, {t1_s:.1f}] is not covered by the "
                         f"samples ({span}); collect for longer around the run")
    total = 0.0
    for (ta, va), (tb, vb) in zip(samples, samples[1:]):
        lo, hi = max(ta, t0_s), min(tb, t1_s)
        if hi <= lo:
            continue
        slope = (vb - va) / (tb - ta)
        total += (hi - lo) * (va + slope * (lo - ta) + va + slope * (hi - ta)) / 2
    return total
