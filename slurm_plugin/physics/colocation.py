"""Co-location: slowdown of jobs sharing one GPU, and that GPU's utilisation and power.

Pairs measured on a V100 (Gavel physical-cluster throughputs, PAL norm_speed.csv) are used as
measured; other pairs use the fitted utilisation model
``slowdown_a = 1 + k * (u_b / 100) * max(0, (u_a + u_b) / 100 - t)``. With three or more jobs,
a job's slowdown is ``1 + sum`` of its pairwise excess slowdowns. See docs/physics.md.

The slowdowns are the same on every GPU model: no pair was measured on another model, and the
catalogue (docs/gpu-models.md) carries the V100's pairs and interference over to every entry
unchanged (a unit test holds them equal; a model with its own pairs would need the model passed
here). A shared GPU's utilisation and power use its model's own constants.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

from .classes import job_class
from .constants import constants, gpu_constants


@lru_cache(maxsize=4096)
def colocated_slowdown(app_a: str, app_b: str) -> tuple[float, float]:
    """(slowdown of a, slowdown of b) when a and b share one GPU; 1.0 means no slowdown."""
    pairs = constants()["pairs"]
    if f"{app_a}|{app_b}" in pairs:
        sa, sb = pairs[f"{app_a}|{app_b}"]
        return 1 / sa, 1 / sb
    if f"{app_b}|{app_a}" in pairs:
        sb, sa = pairs[f"{app_b}|{app_a}"]
        return 1 / sa, 1 / sb
    inter = constants()["interference"]
    ua, ub = job_class(app_a).util_pct, job_class(app_b).util_pct
    over = max(0.0, (ua + ub) / 100 - inter["util_threshold"])
    return 1 + inter["k"] * ub / 100 * over, 1 + inter["k"] * ua / 100 * over


def group_slowdowns(apps: Sequence[str]) -> tuple[float, ...]:
    """Slowdown of each job in a group sharing one GPU."""
    return _group_slowdowns(tuple(apps))


@lru_cache(maxsize=4096)
def _group_slowdowns(apps: tuple[str, ...]) -> tuple[float, ...]:
    if len(apps) < 2:
        return (1.0,) * len(apps)
    out = []
    for i, a in enumerate(apps):
        extra = sum(colocated_slowdown(a, b)[0] - 1 for j, b in enumerate(apps) if j != i)
        out.append(1 + extra)
    return tuple(out)


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
