"""An idealised reference schedule for average JCT: shortest remaining time first on a fluid
cluster. Not a bound (a better order or split may exist) and not a policy (it knows every job's
length, moves jobs for free at every event and ignores nodes): what a scheduler that chooses
GPU counts could reach on a workload with everything in its favour, so a ratio goal can be read
against it.

At every arrival and completion, the jobs present are taken shortest remaining run first (the
remaining fraction times the run at the job's fastest count); each gets the count of its range
that uses the least GPU-time, while GPUs are left; then, in the same order, a job grows to the
fastest count the GPUs still free allow. Runs on ``n`` GPUs last as ``bounds._speedup`` has
them (the trace's measured speedups, else the class model); no restart costs anything.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from .bounds import _counts, _speedup
from .trace import TraceJob


def fluid_srpt_jct_s(jobs: Sequence[TraceJob], gpus: int) -> float:
    """The average JCT of the fluid shortest-remaining-time-first schedule of ``jobs`` on
    ``gpus`` GPUs."""
    if not jobs:
        return 0.0
    runs = []                   # per job: {count: run_s}, by submission
    for j in sorted(jobs, key=lambda j: j.submit_s):
        ref = _speedup(j, j.num_gpus)
        runs.append((j.submit_s, {n: j.duration_s * ref / _speedup(j, n)
                                  for n in _counts(j, gpus)}))
    left = [1.0] * len(runs)    # fraction of each job still to run
    done = [0.0] * len(runs)
    fastest = [min(r.values()) for _, r in runs]
    efficient = [min(r, key=lambda n: (n * r[n], n)) for _, r in runs]
    t, nxt, active = runs[0][0], 0, []
    while nxt < len(runs) or active:
        while nxt < len(runs) and runs[nxt][0] <= t:
            active.append(nxt)
            nxt += 1
        if not active:
            t = runs[nxt][0]
            continue
        active.sort(key=lambda i: (left[i] * fastest[i], i))
        free, alloc = gpus, {}
        for i in active:
            if efficient[i] <= free:
                alloc[i] = efficient[i]
                free -= efficient[i]
        for i, n in alloc.items():      # dicts keep the order: shortest first
            r = runs[i][1]
            best = min((m for m in r if n <= m <= n + free), key=lambda m: (r[m], m))
            free -= best - n
            alloc[i] = best
        until = runs[nxt][0] if nxt < len(runs) else float("inf")
        step = min([left[i] * runs[i][1][n] for i, n in alloc.items()] + [until - t])
        t += step
        for i, n in alloc.items():
            left[i] -= step / runs[i][1][n]
            if left[i] <= 1e-9:
                done[i] = t
        active = [i for i in active if left[i] > 1e-9]
    return statistics.fmean(done[i] - runs[i][0] for i in range(len(runs)))
