"""Co-location: slowdown of jobs sharing one GPU, and that GPU's utilisation and power.

Each GPU model has its own co-location constants (``constants.colocation_constants``, from
the catalogue: docs/gpu-models.md). Shared time-sliced (the default ``mode``, as Slurm's
shards share a GPU), a pair in the model's measured table (``colocation_pairs``: normalised
speeds) is used as measured; other pairs use the utilisation model
``slowdown_a = 1 + k * (u_b / 100) * max(0, (u_a + u_b) / 100 - t)`` with the model's
``interference_k`` and ``interference_util_threshold``. Shared through MPS (``mode="mps"``)
the measured table is not used (it was measured time-sliced) and ``k`` is the model's
``interference_k_mps``. With three or more jobs, a job's slowdown is ``1 + sum`` of its
pairwise excess slowdowns. See docs/physics.md.

The shipped catalogue carries the V100's pairs and interference over to every entry unchanged
(and its MPS k is the time-sliced one), so there the slowdowns are the same on every model; a
site's calibration (``wattctl calibrate-gpus`` measures a co-located pair on each model, both
modes) makes them differ. A shared GPU's utilisation and power use its model's own constants;
it holds one power limit, and when its jobs together would draw more every one of them slows
(``shared_gpu_throttle``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

from ..errors import ConfigError
from .classes import job_class
from .constants import colocation_constants, gpu_constants
from .gpu_models import DERIVED_CACHES
from .power import cap_slowdown

MODES = ("time-sliced", "mps")     # how jobs share a GPU: Slurm shards time-slice it


@lru_cache(maxsize=16384)
def colocated_slowdown(app_a: str, app_b: str, model: str = "V100",
                       mode: str = "time-sliced") -> tuple[float, float]:
    """(slowdown of a, slowdown of b) when a and b share one GPU of ``model`` (any catalogued
    name) in ``mode`` (``MODES``); 1.0 means no slowdown."""
    c = colocation_constants(model)
    if mode == "time-sliced":
        pairs, k = c["colocation_pairs"], c["interference_k"]
    elif mode == "mps":
        pairs, k = {}, c["interference_k_mps"]
    else:
        raise ConfigError("physics", "mode", mode,
                          f"not a way to share a GPU; choose one of: {', '.join(MODES)}")
    if f"{app_a}|{app_b}" in pairs:
        sa, sb = pairs[f"{app_a}|{app_b}"]
        return 1 / sa, 1 / sb
    if f"{app_b}|{app_a}" in pairs:
        sb, sa = pairs[f"{app_b}|{app_a}"]
        return 1 / sa, 1 / sb
    ua, ub = job_class(app_a).util_pct, job_class(app_b).util_pct
    over = max(0.0, (ua + ub) / 100 - c["interference_util_threshold"])
    return 1 + k * ub / 100 * over, 1 + k * ua / 100 * over


def group_slowdowns(apps: Sequence[str], model: str = "V100",
                    mode: str = "time-sliced") -> tuple[float, ...]:
    """Slowdown of each job in a group sharing one GPU of ``model`` in ``mode``."""
    return _group_slowdowns(tuple(apps), model, mode)


@lru_cache(maxsize=16384)
def _group_slowdowns(apps: tuple[str, ...], model: str, mode: str) -> tuple[float, ...]:
    if len(apps) < 2:
        return (1.0,) * len(apps)
    out = []
    for i, a in enumerate(apps):
        extra = sum(colocated_slowdown(a, b, model, mode)[0] - 1
                    for j, b in enumerate(apps) if j != i)
        out.append(1 + extra)
    return tuple(out)


# a site's calibrated pair changes them (``gpu_models.use_site_models``)
DERIVED_CACHES.extend((colocated_slowdown, _group_slowdowns))


def shared_gpu_util(utils_pct: Sequence[float], rates: Sequence[float]) -> float:
    """Utilisation of a shared GPU: each job's solo utilisation times its progress rate."""
    return min(100.0, sum(u * r for u, r in zip(utils_pct, rates)))


def shared_gpu_power_w(dynamic_w: Sequence[float], rates: Sequence[float],
                       power_cap_w: float | None = None, model: str = "V100") -> float:
    """Power of a GPU shared by jobs of solo dynamic power ``dynamic_w`` progressing at ``rates``:
    idle power plus each job's dynamic power scaled by its rate, capped."""
    c = gpu_constants(model)
    p = c["idle_power_w"] + sum(d * r for d, r in zip(dynamic_w, rates))
    p = min(p, c["max_power_w"])
    return min(p, power_cap_w) if power_cap_w else p


def shared_gpu_throttle(dynamic_w: Sequence[float], rates: Sequence[float],
                        power_cap_w: float | None = None, model: str = "V100") -> float:
    """Time multiplier of every job on that GPU from its one power limit (the board's top, or
    ``power_cap_w``, as the node sets it for all its jobs): 1 while they draw no more together
    (``shared_gpu_power_w`` before its clip); past it the GPU runs at the limit, and as slowly
    as one job of that demand would under that cap (``power.cap_slowdown``). Clipping the power
    without it would be energy no GPU gives."""
    c = gpu_constants(model)
    demand_w = c["idle_power_w"] + sum(d * r for d, r in zip(dynamic_w, rates))
    limit_w = min(c["max_power_w"], power_cap_w) if power_cap_w else c["max_power_w"]
    return 1.0 if demand_w <= limit_w else cap_slowdown(demand_w, limit_w, model)
