"""The least energy a trace's jobs can need when the average JCT may not grow past a limit.

``oracle-bound`` (``policy/oracle.py``) lets every job run at its most efficient power cap
whatever that costs in time: a cap that halves a job's power and doubles its run counts as a
saving. A goal stated "at average JCT no worse than slurm-default's" cannot spend that time, so
part of the oracle's headroom is out of reach of any schedule that meets it. This module bounds
the energy of schedules under that limit, with the oracle's own accounting (each job pays its
dynamic power and a share of the static power, idle capacity draws nothing, no interference):

    minimise  sum_j E_j(c_j)    over each job's cap c_j (and GPU model, where the cluster has
    subject to sum_j T_j(c_j) <= n * avg_jct_s               several with nodes enough for it)

where ``T_j`` is the job's run at that cap, never more than its JCT (a wait only adds). Its
Lagrangian dual, ``g(lam) = sum_j min_c (E_j(c) + lam * T_j(c)) - lam * n * avg_jct_s``, is at
most that minimum for every ``lam >= 0`` (weak duality), so its largest value is a lower bound on
the energy of every schedule whose average JCT stays within the limit. Per job both E and T are
its uncapped run times a factor of its shape (class, GPU count, model), so ``g`` sums over
shapes and its maximum is found by bisection on its slope (total run minus the limit).

``time_factor`` (at most 1) is the least a run may take relative to the trace's durations on
the cluster's fastest GPU (a variability profile's lowest factor): a run and its energy both
shrink by it, so the bound holds where some GPUs are faster than the trace's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..physics.classes import ClassMix, assign_class, class_mix
from ..policy.oracle import cap_options
from .cluster import ClusterSpec
from .trace import TraceJob


def _shapes(jobs: Sequence[TraceJob], spec: ClusterSpec, seed: int, mix: ClassMix,
            max_jobs_per_gpu: int | None, time_factor: float) -> list[tuple[float, list]]:
    """(the shape's total uncapped run time, its (energy per second, time per second) options)."""
    totals: dict[tuple[str, int], float] = {}
    for j in jobs:
        app = j.app or assign_class(j.job_id, seed, mix)
        key = (app, j.num_gpus)
        totals[key] = totals.get(key, 0.0) + j.duration_s
    out = []
    for (app, gpus), total_s in totals.items():
        need = math.ceil(gpus / spec.gpus_per_node)
        options = [(w * slow * time_factor, slow * time_factor)
                   for m, nodes in spec.model_nodes if nodes >= need
                   for w, _, slow, _ in cap_options(app, gpus, m, spec.gpus_per_node,
                                                    spec.node_base_power_w, max_jobs_per_gpu)]
        out.append((total_s, options))
    return out


def _dual(shapes: list[tuple[float, list]], lam: float, budget_s: float) -> tuple[float, float]:
    """(g(lam), the total run time of the choices that attain it)."""
    value = run_s = 0.0
    for total_s, options in shapes:
        e, t = min(options, key=lambda o: o[0] + lam * o[1])
        value += total_s * (e + lam * t)
        run_s += total_s * t
    return value - lam * budget_s, run_s


def energy_within_jct(jobs: Sequence[TraceJob], spec: ClusterSpec, avg_jct_s: float, *,
                      seed: int = 0, mix: ClassMix | None = None,
                      max_jobs_per_gpu: int | None = None,
                      time_factor: float = 1.0) -> float | None:
    """The energy bound (kWh) of ``jobs`` on ``spec`` for schedules whose average JCT is at most
    ``avg_jct_s``; None when no schedule can keep to it (the jobs' fastest runs alone exceed it).
    With a limit the oracle's own choices meet, it is the oracle's energy."""
    if not jobs:
        return 0.0
    spec = spec.resolved()
    shapes = _shapes(jobs, spec, seed, mix or class_mix("all"), max_jobs_per_gpu, time_factor)
    budget_s = len(jobs) * avg_jct_s
    fastest_s = sum(total_s * min(t for _, t in options) for total_s, options in shapes)
    if fastest_s > budget_s * (1 + 1e-12):
        return None
    best, run_s = _dual(shapes, 0.0, budget_s)
    if run_s <= budget_s:
        return best / 3.6e6            # the oracle's choices keep to the limit
    lo, hi = 0.0, 1.0
    while _dual(shapes, hi, budget_s)[1] > budget_s and hi < 1e12:
        lo, hi = hi, hi * 2            # the slope at hi is <= 0 once the runs fit the limit
    for _ in range(100):
        mid = (lo + hi) / 2
        value, run_s = _dual(shapes, mid, budget_s)
        best = max(best, value)
        if run_s > budget_s:
            lo = mid
        else:
            hi = mid
    best = max(best, _dual(shapes, lo, budget_s)[0], _dual(shapes, hi, budget_s)[0])
    return best / 3.6e6
