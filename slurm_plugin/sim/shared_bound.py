"""An energy bound within the share limit that prices co-location as the simulator does.

``oracle-bound`` within ``max_jobs_per_gpu`` prices sharing with no interference and no
throttle (simulated schedules can beat it). This bound holds for every schedule the simulator
can make with at most ``max_jobs_per_gpu`` jobs on a GPU (default its ``shards_per_gpu``) in
which no job is killed at its time limit, whatever the caps, sharing, placement, boots and
waits, each job on GPU counts within its range (``bounds._counts``).

The argument. A running job does ``s rho / v`` units of its work (solo seconds at its trace's
GPU count) a second (``s`` = speedup(GPUs) / speedup(trace's GPUs), ``v >= 1`` its variability,
``rho`` its speed); ``q`` is its interference rate, 1 / its co-location slowdown on its worst
shared GPU (1 with none). Each powered GPU's power and ``B``, its node's base power per GPU, are
split among the GPU's running jobs (idle GPUs, booting jobs, off nodes: dropped). A job gets:

- on a GPU alone, capped in a band ``[a, b]`` (``cap_step_w`` wide) or not: ``min(idle + d_a
  q, M) + B``, ``rho <= min(q, 1 / sigma_b)`` (``capped_job``'s dynamic power ``d`` rises and
  its slowdown ``sigma`` falls with the cap; ``M`` the board's top);
- on a GPU with ``k - 1`` others, at its rate ``r >= q`` among them (``group_slowdowns``):
  ``(idle/k + d0 q) P/D + B/k`` (``k`` counts them all, running or not: less), ``rho <=
  min(q, r / theta)``: ``d0`` its uncapped dynamic power, demand ``D = idle + d0 q + X``, the
  others' ``X`` within their least and most at their rates (least 0 for a class that may run
  on several GPUs: booting, or slower elsewhere), ``P = min(D, L)``, ``theta =
  cap_slowdown(D, L)``, ``L`` any limit in ``[min cap, M]``.
Per unit of speed its least over bands is ``S(q)``, over ``L`` and ``D`` (exact:
``least_throttled_w``) ``H(q, group)``. All ``g`` GPUs of a job alone: ``q = 1``, ``g S(1)``;
else one GPU's group has ``r = q``: ``H(q, it)``, and each other GPU at least ``min(S(q), H(q,
any group with r >= q))``. A job needs ``duration_s / s`` times the least of that over its
counts and models; summed, the bound, each job's co-runners at their best for it alone (not
attained in general). MIG instances and batch sizes (the batch model sets speed) are refused.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations_with_replacement

from ..errors import InputError
from ..physics import group_slowdowns, idle_power_w, job_class
from ..physics.classes import ClassMix, assign_class, class_mix
from ..physics.constants import gpu_constants
from ..physics.job_cap import capped_job
from ..physics.mig import supports_mig
from .bounds import _counts
from .cluster import ClusterSpec
from .trace import TraceJob

CAP_STEP_W = 1.0


@dataclass(frozen=True, slots=True)
class Board:
    """A GPU model's constants as the bound uses them, and its node's base power per GPU."""
    idle_w: float
    min_cap_w: float
    max_w: float
    beta: float         # cap_slowdown's exponent
    static_w: float     # B


@dataclass(frozen=True, slots=True)
class CoRunners:
    """A job's GPU as the bound prices its other jobs."""
    jobs: int           # how many (k - 1)
    rate: float         # the job's interference rate among them: 1 / its slowdown
    least_w: float      # the least and most dynamic power they draw together (at most each
    most_w: float       # at its rate there)


def shared_energy_bound_kwh(jobs: Sequence[TraceJob], spec: ClusterSpec, *, seed: int = 0,
                            mix: ClassMix | None = None, max_jobs_per_gpu: int | None = None,
                            cap_step_w: float = CAP_STEP_W) -> float:
    """The least energy (kWh) of ``jobs`` on ``spec`` with at most ``max_jobs_per_gpu`` jobs on
    a GPU (default: the cluster's shards per GPU), interference and throttle priced (module
    doc); classes as ``oracle_metrics`` assigns them."""
    return sum(least_job_energies_kwh(jobs, spec, seed=seed, mix=mix,
                                      max_jobs_per_gpu=max_jobs_per_gpu, cap_step_w=cap_step_w))


def least_job_energies_kwh(jobs: Sequence[TraceJob], spec: ClusterSpec, *, seed: int = 0,
                           mix: ClassMix | None = None, max_jobs_per_gpu: int | None = None,
                           cap_step_w: float = CAP_STEP_W) -> list[float]:
    """Each job's part of the bound (kWh), in the order of ``jobs``: at least what it is given
    in any schedule (module doc). Raises ``InputError`` where the bound does not price."""
    spec = spec.resolved()
    _check(jobs, spec)
    most = max(1, max_jobs_per_gpu or spec.shards_per_gpu)
    apps = [j.app or assign_class(j.job_id, seed, mix or class_mix("all")) for j in jobs]
    # (GPU model, GPU count) each job may run on: its counts on the models with nodes enough
    counts = [tuple((m, g) for m, nodes in spec.model_nodes for g in _counts(j, spec.gpu_count)
                    if math.ceil(g / spec.gpus_per_node) <= nodes) for j in jobs]
    dyn_w = _class_dynamic_w(apps, counts, spec.gpus_per_node)
    available = Counter(apps)
    out = []
    for j, app, options in zip(jobs, apps, counts):
        others = available.copy()
        others[app] -= 1
        out.append(j.duration_s * min(
            job_class(app).speedup(j.num_gpus) / job_class(app).speedup(g)
            * least_power_w(app, g, model, spec.gpus_per_node, spec.node_base_power_w,
                            _co_classes(others, dyn_w[model], most - 1), most, cap_step_w)
            for model, g in options) / 3.6e6)
    return out


def _check(jobs: Sequence[TraceJob], spec: ClusterSpec) -> None:
    mig = [m for m, _ in spec.model_nodes if supports_mig(m)]
    if mig:
        raise InputError(f"shared energy bound: GPU model {mig[0]} has MIG, whose instances "
                         "this bound does not price; give a cluster of models without MIG")
    if any(j.batch_size is not None for j in jobs):
        raise InputError("shared energy bound: the trace has batch sizes, whose speeds this "
                         "bound does not price; give a trace without them")


def _dynamic_w(app: str, gpus: int, cap_w: float | None, model: str,
               gpus_per_node: int) -> tuple[float, float]:
    """(dynamic power per GPU, slowdown) of a job alone on its GPUs at ``cap_w``."""
    power_w, slowdown = capped_job(app, gpus, cap_w, model, gpus_per_node)
    return max(0.0, power_w - idle_power_w(model)), slowdown


def _class_dynamic_w(apps: Sequence[str], counts: Sequence[tuple[tuple[str, int], ...]],
                     gpus_per_node: int) -> dict[str, dict[str, tuple[float, float]]]:
    """Per model and class, the least and most uncapped dynamic power per GPU a job of the trace
    draws there (least 0 where one may run on several GPUs: module doc)."""
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for app, options in zip(apps, counts):
        for model, g in options:
            w = _dynamic_w(app, g, None, model, gpus_per_node)[0]
            least_w, most_w = out.setdefault(model, {}).get(app, (math.inf, 0.0))
            out[model][app] = (min(least_w, 0.0 if g > 1 else w), max(most_w, w))
    return out


def _co_classes(others: Counter, dyn_w: dict[str, tuple[float, float]],
                most: int) -> tuple[tuple[str, int, float, float], ...]:
    """(class, how many may share a GPU with the job, least and most dynamic power) of the
    other jobs that may run on the GPU's model: at most ``most`` of a class (a small key)."""
    return tuple((c, min(n, most), *dyn_w[c]) for c, n in sorted(others.items())
                 if n > 0 and c in dyn_w)


@lru_cache(maxsize=4096)
def least_power_w(app: str, gpus: int, model: str, gpus_per_node: int, node_base_w: float,
                  co_classes: tuple[tuple[str, int, float, float], ...], max_jobs_per_gpu: int,
                  cap_step_w: float) -> float:
    """The least power (W) a job of class ``app`` on ``gpus`` GPUs of ``model`` is given per
    unit of speed, sharing with at most ``max_jobs_per_gpu - 1`` of ``co_classes`` (module doc)."""
    c = gpu_constants(model)
    board = Board(c["idle_power_w"], c["min_power_cap_w"], c["max_power_w"], c["cap_beta"],
                  node_base_w / gpus_per_node)
    bands = cap_bands(app, gpus, model, gpus_per_node, cap_step_w)
    own_w = _dynamic_w(app, gpus, None, model, gpus_per_node)[0]
    groups = co_runner_groups(app, model, co_classes, max_jobs_per_gpu - 1)
    rest = _undominated(groups) if gpus > 1 else ()
    others = {q: min([alone_w(bands, q, board)] + [shared_w(own_w, g, q, board)
                                                   for g in rest if g.rate >= q])
              for q in {g.rate for g in groups}} if gpus > 1 else {}   # the GPUs but one
    return min([gpus * alone_w(bands, 1.0, board)]
               + [shared_w(own_w, g, g.rate, board) + (gpus - 1) * others.get(g.rate, 0.0)
                  for g in groups])


@lru_cache(maxsize=1024)
def cap_bands(app: str, gpus: int, model: str, gpus_per_node: int,
              cap_step_w: float) -> tuple[tuple[float, float], ...]:
    """(dynamic power per GPU at the band's lowest cap, slowdown at its highest): uncapped,
    then the bands of caps ``cap_step_w`` wide over the model's settable range."""
    c = gpu_constants(model)
    lo_w, hi_w = c["min_power_cap_w"], c["max_power_w"]
    n = max(1, math.ceil((hi_w - lo_w) / cap_step_w - 1e-9))
    at = [_dynamic_w(app, gpus, min(hi_w, lo_w + i * cap_step_w), model, gpus_per_node)
          for i in range(n + 1)]
    return ((_dynamic_w(app, gpus, None, model, gpus_per_node)[0], 1.0),
            *((at[i][0], at[i + 1][1]) for i in range(n)))


def alone_w(bands: Sequence[tuple[float, float]], q: float, board: Board) -> float:
    """``S(q)``: the least a job alone on a GPU is given per unit of speed."""
    return min((min(board.idle_w + dyn_w * q, board.max_w) + board.static_w)
               * max(1 / q, slowdown) for dyn_w, slowdown in bands)


def shared_w(own_w: float, co: CoRunners, q: float, board: Board) -> float:
    """``H(q, co)`` of a job of uncapped dynamic power ``own_w`` (module doc)."""
    k = co.jobs + 1
    load_w = board.idle_w + own_w * q
    return least_throttled_w(board.idle_w / k + own_w * q, board.static_w / k, q, co.rate,
                             load_w + co.least_w, load_w + co.most_w, board)


def least_throttled_w(a_w: float, c_w: float, q: float, r: float, lo_w: float, hi_w: float,
                      board: Board) -> float:
    """The least of ``throttled_w`` over limits L in the board's range and demands D in
    ``[lo_w, hi_w]``. At a given D it is least at ``_best_limit_w`` (in L it falls to the least
    of L*, where its log-derivative is zero, the L where ``theta = r / q`` and D; then rises);
    between the D where two of those, or one and a range end, meet, it is monotone or has one
    turn (``_turn_w``) in D, so the least is at one of those D."""
    i_w, lo_l, hi_l, beta = board.idle_w, board.min_cap_w, board.max_w, board.beta
    kappa = (q / r) ** (1 / beta)
    at = [lo_w, hi_w, lo_l, hi_l, i_w + (lo_l - i_w) / kappa, i_w + (hi_l - i_w) / kappa,
          _turn_w(a_w * lo_l, c_w, i_w, beta), _turn_w(a_w * hi_l, c_w, i_w, beta)]
    fall_w = a_w * (1 - beta)
    if beta < 1 and c_w > 0:
        at += [(fall_w * lim - a_w * i_w) / (beta * c_w) for lim in (lo_l, hi_l)]
    if fall_w > beta * c_w:
        at.append(a_w * i_w / (fall_w - beta * c_w))
    if beta < 1 and beta * c_w != fall_w * kappa:
        at.append(i_w * (fall_w * (1 - kappa) - a_w) / (beta * c_w - fall_w * kappa))
    return min(throttled_w(a_w, c_w, q, r, d, _best_limit_w(a_w, c_w, q, r, d, board), board)
               for d in (min(hi_w, max(lo_w, x)) for x in at))


def throttled_w(a_w: float, c_w: float, q: float, r: float, load_w: float, limit_w: float,
                board: Board) -> float:
    """``(a P/D + c) max(1/q, theta/r)`` at demand ``load_w`` D under limit ``limit_w`` L."""
    if load_w <= limit_w:
        return (a_w + c_w) / q
    theta = ((load_w - board.idle_w) / (limit_w - board.idle_w)) ** board.beta
    return (a_w * limit_w / load_w + c_w) * max(1 / q, theta / r)


def _best_limit_w(a_w: float, c_w: float, q: float, r: float, load_w: float,
                  board: Board) -> float:
    """The limit in the board's range that makes ``throttled_w`` least at ``load_w``."""
    best = min(load_w, board.idle_w + (load_w - board.idle_w) * (q / r) ** (1 / board.beta))
    if board.beta < 1:
        best = min(best, (a_w * board.idle_w + board.beta * c_w * load_w)
                   / (a_w * (1 - board.beta)))
    return min(board.max_w, max(board.min_cap_w, best))


def _turn_w(a_limit_w: float, c_w: float, idle_w: float, beta: float) -> float:
    """Where ``(a L/D + c) theta(D, L)`` stops falling in D (L fixed, ``a_limit_w = a L``): the
    larger root of ``beta c D^2 - (1 - beta) a L D + a L idle``; its low end where none."""
    disc = ((1 - beta) * a_limit_w) ** 2 - 4 * beta * c_w * a_limit_w * idle_w
    if beta * c_w <= 0 or disc < 0:
        return idle_w
    return ((1 - beta) * a_limit_w + math.sqrt(disc)) / (2 * beta * c_w)


@lru_cache(maxsize=4096)
def co_runner_groups(app: str, model: str, co_classes: tuple[tuple[str, int, float, float], ...],
                     most: int) -> tuple[CoRunners, ...]:
    """Every group of 1 to ``most`` co-runners a job of ``app`` may have on a GPU of ``model``:
    of each class at most as many as ``co_classes`` gives."""
    limit = {c: n for c, n, _, _ in co_classes}
    dyn_w = {c: (lo_w, hi_w) for c, _, lo_w, hi_w in co_classes}
    out = []
    for size in range(1, min(most, sum(limit.values())) + 1):
        for group in combinations_with_replacement(sorted(limit), size):
            if any(group.count(c) > limit[c] for c in set(group)):
                continue
            slow = group_slowdowns((app, *group), model=model)
            out.append(CoRunners(size, 1 / slow[0],
                                 *(sum(dyn_w[c][i] / s for c, s in zip(group, slow[1:]))
                                   for i in (0, 1))))
    return tuple(out)


def _undominated(groups: Sequence[CoRunners]) -> tuple[CoRunners, ...]:
    """The groups no other one prices lower at every interference rate ``q``: a job's part per
    unit of speed falls with more jobs on its GPU, a higher rate there (which also admits more
    ``q``) and a wider range of power the others may draw."""
    unique = set(groups)
    return tuple(a for a in unique
                 if not any(b != a and b.jobs >= a.jobs and b.rate >= a.rate
                            and b.most_w >= a.most_w and b.least_w <= a.least_w
                            for b in unique))
