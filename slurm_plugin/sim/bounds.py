"""Lower bounds on a trace's makespan and average JCT that no scheduler giving jobs whole GPUs
can beat, on a cluster of ``gpus`` GPUs and the simulator's scaling model. They say how far a
ratio goal against a baseline can be met at all on a given workload (GPU sharing is outside
them: co-located jobs can do more work per GPU-second than one job alone).

- A job cannot end before its submission plus its run at its fastest GPU count (alone on the
  cluster, no wait, no restart): its own bound; their average and geometric mean are the
  average- and geomean-JCT bounds.
- The work submitted at or after a time T cannot end before T plus that work, each job at its
  least GPU-time (its most efficient count), spread perfectly over every GPU (the area bound).

The makespan bound is the larger of the two over every job and every submission time.
These are optimistic (perfect packing, no restarts, no interference, each job at the per-GPU
batch the trace gives it), so real schedules stay above, as long as jobs run to their end: one
killed at a time limit shorter than its run ends sooner than any bound on its run.

``batch_jct_bound`` is the average-JCT bound for a policy that also chooses batch sizes
(``ones``): each job alone from its submission at the fastest of its GPU counts and the global
batches allowed there, its samples to target growing with the batch (statistical efficiency)
as the simulator's batch model has them; as optimistic otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..physics import job_class
from .trace import TraceJob


@dataclass(frozen=True, slots=True)
class Bounds:
    makespan_s: float       # from the first submission
    avg_jct_s: float
    geomean_jct_s: float    # each job's own bound, their geometric mean (the metric's floor)


def _speedup(job: TraceJob, n: int) -> float:
    """Speedup on ``n`` GPUs over one: the job's measured table where the trace has one, else
    its class's model, else linear."""
    if job.speedup:
        return job.speedup[min(n, len(job.speedup)) - 1]
    if job.app:
        return job_class(job.app).speedup(n)
    return float(n)


def _counts(job: TraceJob, gpus: int) -> range:
    """The GPU counts the job may run on: its range where it has one, else its request."""
    lo = job.min_gpus or job.num_gpus
    hi = min(max(job.max_gpus or job.num_gpus, job.num_gpus), gpus)
    return range(max(1, min(lo, hi)), hi + 1)


def lower_bounds(jobs: Sequence[TraceJob], gpus: int, time_factor: float = 1.0,
                 jobs_per_gpu: int = 1) -> Bounds:
    """The makespan and average-JCT lower bounds of ``jobs`` on ``gpus`` GPUs. ``time_factor``:
    the least a run can take relative to the trace's durations on the cluster's fastest GPU
    (a variability profile's lowest factor; 1: every GPU as the trace's). ``jobs_per_gpu``: the
    most jobs a GPU may hold at once (its shards, where jobs share): co-located jobs each run
    no faster than alone, so a GPU does at most that many jobs' work a second (the area bound
    is divided by it; a job's own bound is not)."""
    if not jobs:
        return Bounds(0.0, 0.0, 0.0)
    t0 = min(j.submit_s for j in jobs)
    makespan, jct_total, log_total, area = 0.0, 0.0, 0.0, []
    for j in jobs:
        ref = _speedup(j, j.num_gpus) * time_factor
        counts = _counts(j, gpus)
        fastest_s = min(j.duration_s * ref / _speedup(j, n) for n in counts)
        least_gpu_s = min(j.duration_s * ref / _speedup(j, n) * n for n in counts)
        makespan = max(makespan, j.submit_s + fastest_s - t0)
        jct_total += fastest_s
        log_total += math.log(max(fastest_s, 1e-9))     # as the simulator's geomean metric
        area.append((j.submit_s, least_gpu_s))
    area.sort()
    tail_gpu_s = 0.0
    for submit_s, gpu_s in reversed(area):
        tail_gpu_s += gpu_s
        makespan = max(makespan, submit_s + tail_gpu_s / (gpus * max(1, jobs_per_gpu)) - t0)
    return Bounds(makespan, jct_total / len(jobs), math.exp(log_total / len(jobs)))


def batch_jct_bound(jobs: Sequence[TraceJob], gpus: int, stat_eff: bool = True) -> float:
    """The average JCT no scheduler beats when it may change GPU counts and global batch sizes:
    each job from its submission at the fastest of its runs on whole GPUs (as ``lower_bounds``:
    the trace's own batch per GPU) and, with a batch model (a profiled application and a batch
    size), every count in its range at every global batch allowed there
    (``pollux_batch.fastest_run_s``: what the simulator runs a resized job at)."""
    from ..physics.pollux import pollux_apps
    from ..physics.pollux_batch import fastest_run_s
    if not jobs:
        return 0.0
    apps = set(pollux_apps())
    total = 0.0
    for j in jobs:
        ref = _speedup(j, j.num_gpus)
        best = min(j.duration_s * ref / _speedup(j, n) for n in _counts(j, gpus))
        if j.app in apps and j.batch_size:
            run = fastest_run_s(j.app, _counts(j, gpus), j.min_batch_size, j.max_batch_size,
                                stat_eff, j.batch_size)
            if run is not None and run < best:
                best = run
        total += best
    return total / len(jobs)


def shift_ceiling(jobs: Sequence[TraceJob], carbon, max_delay_s: float,
                  step_s: float = 3600.0) -> float:
    """The least carbon time shifting alone can reach, as a share of every job run at its
    submission: each job at the start within ``max_delay_s`` of its submission (every
    ``step_s``) whose run, as long as the trace's, meets the lowest mean intensity of
    ``carbon`` (``integral_h(t0, t1)``: gCO2/kWh x hours, as the simulator's series), weighted
    by its GPU-seconds. Optimistic: the true future is known, no job waits for GPUs, power is
    the same at every hour. A goal below it is out of reach of start times (caps and
    configurations are outside it)."""
    integral = carbon.integral_h
    now = shifted = 0.0
    steps = int(max_delay_s // step_s)
    for j in jobs:
        run_s = max(j.duration_s, 60.0)
        weight = j.num_gpus     # its carbon: GPUs x power x the intensity's integral
        base = integral(j.submit_s, j.submit_s + run_s)
        best = base
        t = j.submit_s
        for _ in range(steps):
            t += step_s
            got = integral(t, t + run_s)
            if got < best:
                best = got
        now += weight * base
        shifted += weight * best
    return shifted / now if now > 0 else 1.0


def carbon_floor(jobs: Sequence[TraceJob], carbon, gpus: int, extra_s: float,
                 step_s: float = 3600.0) -> float | None:
    """The least carbon of the trace's GPU work on ``gpus`` GPUs when its last work may end
    ``extra_s`` after it would running every job as soon as it can, as a share of that as-soon-
    as-possible carbon; None for no job. Fluid and optimistic: work (GPU-seconds at the trace's
    counts and run times) may run in any step from its submission's on, split and moved for
    free; energy follows busy GPU-seconds (idle GPUs and nodes draw nothing, no cap changes
    it); ``carbon.integral_h(t0, t1)`` prices each step. So no schedule that ends its work
    within that time and runs jobs at their energy per GPU-second spends less, whatever its
    start times, preemptions and packing.

    It is the exact optimum of that relaxation: its feasible work per step (at most the
    cluster's GPU-seconds per step; by each step, at most the work submitted by then) is a
    polymatroid, so filling the cleanest steps first, each as far as the prefix limits allow,
    is optimal (Edmonds' greedy)."""
    if not jobs:
        return None
    t0 = min(j.submit_s for j in jobs)
    cap = gpus * step_s
    released: dict[int, float] = {}
    for j in jobs:
        h = int((j.submit_s - t0) // step_s)
        released[h] = released.get(h, 0.0) + j.num_gpus * max(j.duration_s, 0.0)
    asap: list[float] = []              # GPU-seconds per step, every job as soon as it can
    backlog, h = 0.0, 0
    last_release = max(released)
    while h <= last_release or backlog > 1e-9:
        backlog += released.get(h, 0.0)
        done = min(cap, backlog)
        asap.append(done)
        backlog -= done
        h += 1
    horizon = len(asap) + int(extra_s // step_s)
    price = [carbon.integral_h(t0 + k * step_s, t0 + (k + 1) * step_s) for k in range(horizon)]
    base = sum(w * p for w, p in zip(asap, price))
    if base <= 0:
        return 1.0
    floor = cleanest_fill(released, cap, price)
    return floor / base


def cleanest_fill(released: dict[int, float], cap: float, price: Sequence[float]) -> float:
    """The least of sum(work in step k x price[k]) when ``released[k]`` work arrives at step k,
    a step runs at most ``cap`` and all of it runs within the steps priced: the cleanest steps
    filled first, each as far as the work released by then and not yet placed allows (the
    optimum: the feasible work per step is a polymatroid). Work the steps cannot hold is left
    out (the caller prices a horizon long enough for it)."""
    horizon = len(price)
    # slack[k]: work submitted by the end of step k not yet placed at or before k (the last
    # step's: all the work), each placement lowering it from its step on
    slack, total = [], 0.0
    for k in range(horizon):
        total += released.get(k, 0.0)
        slack.append(total)
    floor = 0.0
    for k in sorted(range(horizon), key=price.__getitem__):
        room = min(cap, min(slack[k:]))
        if room <= 1e-9:
            continue
        floor += room * price[k]
        for m in range(k, horizon):
            slack[m] -= room
    return floor
