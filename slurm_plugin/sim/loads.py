"""Policies at the loads a site runs, each figure beside its bound: pure functions.

A figure from one overloaded cluster measures the queue order more than the idea (serving
short jobs first moves average JCT many times over where the queue never drains). So a trace is
run at three cluster sizes chosen from slurm-default's own run on it:

- ``idle``: the smallest cluster where slurm-default's average queue wait is about zero
  (at most ``IDLE_WAIT_S``);
- ``busy``: the cluster where it is closest to a few hours (``BUSY_WAIT_S`` within
  ``BUSY_BAND_S``, on a log scale);
- ``overloaded``: the cluster where it is closest to ``OVERLOADED_WAIT_S`` and more than a day.

Each probe is one slurm-default run; ``choose_loads`` says how the sizes are searched. A trace
that no cluster size makes wait that long has no such load, and says so.

Beside each metric, its bound (nothing can do better) or reference (an idealised schedule):

- energy: within the site's share limit, co-location and the shared GPU's throttle priced
  (``shared_bound``; the oracle's where that does not price);
- carbon: the jobs' least energy (the same accounting) in the cleanest hours of the carbon
  series between their submissions and the end of the load's latest schedule, within the
  cluster's capacity (``carbon_floor_kg``): capped, shifted and packed schedules stay above it;
- average, geomean and p99 JCT and makespan: ``bounds.lower_bounds`` (each job alone at its
  fastest, on the fastest GPU; the area bound, each GPU doing at most as many jobs' work a
  second as it has shards); the p99 of the jobs' own bounds is a bound on the p99 because each
  job's JCT is at least its own. Jobs killed at their time limits end sooner than any bound on
  their runs: a policy that has any (``jobs_timed_out``) is not held to these;
- average JCT also beside the fluid shortest-remaining-first reference (``fluid.py``), which is
  not a bound;
- worst queue wait: zero.

The share of the headroom a policy captures is ``(baseline - policy) / (baseline - bound)``:
1 at the bound, 0 at the baseline, negative when worse than the baseline.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import InputError
from ..physics.classes import ClassMix, assign_class
from ..policy.oracle import energy_bound
from .bounds import _counts, _speedup, cleanest_fill, lower_bounds
from .cluster import ClusterSpec
from .fluid import fluid_srpt_jct_s
from .metrics import percentile
from .shared_bound import least_job_energies_kwh
from .trace import TraceJob

HOUR_S = 3600.0
IDLE_WAIT_S = 0.05 * HOUR_S
BUSY_WAIT_S, BUSY_BAND_S = 3 * HOUR_S, (1 * HOUR_S, 8 * HOUR_S)
OVERLOADED_WAIT_S, OVERLOADED_BAND_S = 36 * HOUR_S, (24 * HOUR_S, math.inf)
SCAN_STEP = 1.15
MAX_NODES = 1 << 16

# metric -> the bound's key in ``bounds_at``'s result
BOUNDED = {"energy_kwh": "energy_kwh", "carbon_kg": "carbon_kg", "avg_jct_s": "avg_jct_s",
           "geomean_jct_s": "geomean_jct_s", "p99_jct_s": "p99_jct_s",
           "makespan_s": "makespan_s", "max_queue_s": "max_queue_s"}


@dataclass(frozen=True, slots=True)
class Load:
    name: str               # idle | busy | overloaded | the size given
    nodes: int
    wait_s: float           # slurm-default's average queue wait at that size


class Waits:
    """slurm-default's average queue wait per node count, each size run once."""

    def __init__(self, wait_at: Callable[[int], float]) -> None:
        self._wait_at = wait_at
        self.seen: dict[int, float] = {}

    def __call__(self, nodes: int) -> float:
        if nodes not in self.seen:
            self.seen[nodes] = self._wait_at(nodes)
        return self.seen[nodes]


def _bisect(waits: Waits, a: int, b: int, target_s: float) -> None:
    """Probe between ``a`` < ``b`` (``waits(a) >= target_s > waits(b)``) down to adjacent
    sizes, so the crossing of ``target_s`` is measured, not guessed."""
    while b - a > 1:
        mid = (a + b) // 2
        a, b = (mid, b) if waits(mid) >= target_s else (a, mid)


def _pick(waits: Waits, band: tuple[float, float], target_s: float) -> int | None:
    """Of the sizes probed, the one whose wait lies in ``band`` and is closest to
    ``target_s`` on a log scale (the larger cluster on a tie); None when none lies there."""
    inside = [n for n, w in waits.seen.items() if band[0] <= w <= band[1]]
    if not inside:
        return None
    return min(inside, key=lambda n: (abs(math.log(max(waits(n), 1.0) / target_s)), -n))


def choose_loads(wait_at: Callable[[int], float], least_nodes: int,
                 start_nodes: int) -> tuple[list[Load], list[str]]:
    """The three loads (those the trace can make) and a line for each it cannot.

    The wait need not fall steadily as the cluster grows (a wide job that fits or not, a burst
    that lands in a gap), so the sizes from the idle one down to the least that holds the
    widest job are scanned (each ``SCAN_STEP`` times smaller), every crossing of a target
    between two scanned sizes is bisected, and each load takes the probed size closest to its
    target within its band."""
    waits = Waits(wait_at)
    hi = max(start_nodes, least_nodes)
    while waits(hi) > IDLE_WAIT_S and hi < MAX_NODES:
        hi *= 2
    lo = least_nodes
    if waits(lo) <= IDLE_WAIT_S:
        idle = lo
    else:
        a, b = lo, hi
        while b - a > 1:
            mid = (a + b) // 2
            a, b = (mid, b) if waits(mid) > IDLE_WAIT_S else (a, mid)
        idle = b
    n = idle
    while n > lo:
        n = max(lo, min(n - 1, int(n / SCAN_STEP)))
        waits(n)
    for target in (BUSY_WAIT_S, OVERLOADED_WAIT_S):
        scanned = sorted(waits.seen)
        for a, b in zip(scanned, scanned[1:]):
            if waits(a) >= target > waits(b):
                _bisect(waits, a, b, target)
    loads = [Load("idle", idle, waits(idle))]
    missing = []
    for name, band, target in (("busy", BUSY_BAND_S, BUSY_WAIT_S),
                               ("overloaded", OVERLOADED_BAND_S, OVERLOADED_WAIT_S)):
        pick = _pick(waits, band, target)
        if pick is None:
            near = min(waits.seen, key=lambda m: abs(math.log(max(waits(m), 1.0) / target)))
            missing.append(f"{name}: no cluster of {lo} to {idle} nodes makes slurm-default "
                           f"wait {band[0] / HOUR_S:g}-{band[1] / HOUR_S:g} h on average "
                           f"(the closest: {waits(near) / HOUR_S:,.2f} h at {near} nodes)")
        else:
            loads.append(Load(name, pick, waits(pick)))
    return loads, missing


def _least_energy_kwh(jobs: Sequence[TraceJob], spec: ClusterSpec, seed: int, mix: ClassMix,
                      max_jobs_per_gpu: int | None,
                      time_factor: float) -> tuple[list[float], str | None]:
    """Each job's least energy (kWh): its part of the bound priced with interference and the
    shared GPU's throttle (``shared_bound``); where that bound does not price (MIG, batch
    sizes) the oracle's (its best model and cap, its share of static power), which a schedule
    that shares may beat, with the reason."""
    try:
        least = least_job_energies_kwh(jobs, spec, seed=seed, mix=mix,
                                       max_jobs_per_gpu=max_jobs_per_gpu)
        return [e * time_factor for e in least], None
    except InputError as exc:
        reason = f"energy bound: the oracle's within the share limit ({exc})"
    models = spec.model_nodes
    out = []
    for j in jobs:
        need = math.ceil(j.num_gpus / spec.gpus_per_node)
        app = j.app or assign_class(j.job_id, seed, mix)
        out.append(min(energy_bound(app, j.num_gpus, j.duration_s, m, spec.gpus_per_node,
                                    spec.node_base_power_w, max_jobs_per_gpu).energy_j
                       for m, nodes in models if nodes >= need) * time_factor / 3.6e6)
    return out, reason


def carbon_floor_kg(jobs: Sequence[TraceJob], least_kwh: Sequence[float], carbon, until_s: float,
                    gpus: int, max_jobs_per_gpu: int | None = None,
                    time_factor: float = 1.0) -> float:
    """The least carbon (kg) of ``jobs`` run by ``until_s`` (the end of a schedule's last job):
    capped, shifted, shared and packed schedules alike stay above it.

    Each job's work (its GPUs x its run, on the fastest GPU) needs at least ``least_kwh`` (its
    least energy, at its best cap, paying its share of static power), so at least
    ``e_j = least / work`` per unit, ``e_min`` the least of them. The work runs in the hours
    of the carbon series (each hour one intensity) from its submission's hour to ``until_s``,
    at most ``gpus x 3600 x max_jobs_per_gpu`` units an hour (a shared GPU does no more than
    that many jobs' work). Then

        carbon >= sum_j (e_j - e_min) * work_j * (the cleanest hour j may run in)
                  + e_min * (the least price of all the work, hours filled cleanest first)

    the first term for each job alone, the second the exact optimum of the fluid fill
    (``bounds.cleanest_fill``) for work of one rate; each term is at most the schedule's own
    (the rate e_j splits as e_min + (e_j - e_min))."""
    if not jobs:
        return 0.0
    origin = carbon.origin_s
    first_h = min(math.floor((j.submit_s - origin) / HOUR_S) for j in jobs)
    last_h = math.floor((max(until_s, max(j.submit_s for j in jobs)) - origin) / HOUR_S)
    n = len(carbon.hourly)
    price = [carbon.hourly[h % n] for h in range(first_h, last_h + 1)]
    cleanest_from = price[:]                 # the least price from each hour to the end
    for k in range(len(price) - 2, -1, -1):
        cleanest_from[k] = min(cleanest_from[k], cleanest_from[k + 1])
    work = [j.num_gpus * max(j.duration_s, 0.0) * time_factor for j in jobs]
    rate = [e / w for e, w in zip(least_kwh, work) if w > 0]
    if not rate:
        return 0.0
    e_min = min(rate)
    released: dict[int, float] = {}
    alone_g = 0.0
    for j, e, w in zip(jobs, least_kwh, work):
        if w <= 0:
            continue
        k = math.floor((j.submit_s - origin) / HOUR_S) - first_h
        released[k] = released.get(k, 0.0) + w
        alone_g += (e / w - e_min) * w * cleanest_from[k]
    cap = gpus * HOUR_S * (max_jobs_per_gpu or 1)
    return (alone_g + e_min * cleanest_fill(released, cap, price)) / 1000.0


def bounds_at(jobs: Sequence[TraceJob], spec: ClusterSpec, carbon, *, seed: int, mix: ClassMix,
              max_jobs_per_gpu: int | None, time_factor: float = 1.0) -> dict:
    """The bounds and references of ``jobs`` on ``spec`` that do not depend on a schedule; the
    carbon floor, which depends on the schedule's end, is ``carbon_floor_kg`` with
    ``least_kwh`` from here."""
    spec = spec.resolved()
    lb = lower_bounds(jobs, spec.gpu_count, time_factor, max(1, spec.shards_per_gpu))
    own = []
    for j in jobs:
        ref = _speedup(j, j.num_gpus) * time_factor
        own.append(min(j.duration_s * ref / _speedup(j, n) for n in _counts(j, spec.gpu_count)))
    own.sort()
    least, energy_note = _least_energy_kwh(jobs, spec, seed, mix, max_jobs_per_gpu, time_factor)
    return {"energy_kwh": sum(least), "least_kwh": least, "energy_note": energy_note, "avg_jct_s": lb.avg_jct_s,
            "geomean_jct_s": lb.geomean_jct_s, "p99_jct_s": percentile(own, 99),
            "makespan_s": lb.makespan_s, "max_queue_s": 0.0,
            "fluid_avg_jct_s": fluid_srpt_jct_s(jobs, spec.gpu_count)}


def captured(baseline: float | None, value: float | None, bound: float | None) -> float | None:
    """The share of the headroom between the baseline and the bound a value captures."""
    if baseline is None or value is None or bound is None or baseline - bound <= 1e-12:
        return None
    return (baseline - value) / (baseline - bound)
