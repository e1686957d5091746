"""Who used a GPU's energy: one interval of one GPU split between the jobs on it. Pure.

Rule (documented in docs/energy.md):
- **Idle power** (what the GPU draws doing nothing, ``idle_w x dt``) is split evenly between
  the jobs resident in the interval: each of them keeps the GPU powered, none more than another.
- **Dynamic energy** (the rest) is split by each job's share of the GPU's work, weighted by
  how much power a unit of that job's work costs: ``util_i x w_i``, where ``util_i`` is the
  job's measured utilisation on the GPU (NVML per-process utilisation; the emulated GPUs give
  the same reading) and ``w_i`` its watts per utilisation point. Utilisation alone misleads:
  the measured classes draw 1.0 to 5.8 W per point, so a light job next to a heavy one would be
  charged several times too little. ``w_i`` is the job's own figure, learned while it ran
  alone on a GPU (``SoloRate``), else its class's (from the calibrated physics), else 1 for
  every job (plain utilisation). ``method`` says which was used: ``util-solo``, ``util-class``
  or ``util``.
- Without any per-job utilisation, by **shares held** (shards or MPS percent), ``shards``.
- A job alone on the GPU gets everything: ``exclusive``.

The shares of an interval always add up to its energy exactly.
"""

from __future__ import annotations

from typing import Mapping

from ..record import record


@record
class Share:
    """One job's part of one interval of one GPU."""

    energy_j: float
    idle_j: float
    method: str


def split_interval(energy_j: float, dt_s: float, idle_w: float, jobs: Mapping[str, int],
                   util_pct: Mapping[str, float], w_per_pct: Mapping[str, float],
                   weight_method: Mapping[str, str]) -> dict[str, Share]:
    """Split ``energy_j`` used by one GPU over ``dt_s`` between ``jobs`` (job id -> shares
    held, 0 for a whole GPU). ``util_pct``: measured utilisation per job (may be empty);
    ``w_per_pct``: watts per utilisation point per job (missing: 1); ``weight_method``: where
    each job's ``w`` came from (``util-solo``/``util-class``)."""
    if not jobs:
        return {}
    energy_j = max(0.0, energy_j)
    if len(jobs) == 1:
        (job,) = jobs
        return {job: Share(energy_j, min(energy_j, idle_w * dt_s), "exclusive")}
    idle = min(energy_j, max(0.0, idle_w * dt_s))
    dynamic = energy_j - idle
    each_idle = idle / len(jobs)
    weights = {j: max(0.0, util_pct.get(j, 0.0)) * w_per_pct.get(j, 1.0) for j in jobs}
    total = sum(weights.values())
    if total > 0 and all(j in util_pct for j in jobs):
        methods = {j: weight_method.get(j, "util") for j in jobs}
    else:
        weights = {j: float(max(held, 1)) for j, held in jobs.items()}
        total = sum(weights.values())
        methods = dict.fromkeys(jobs, "shards")
    return {j: Share(each_idle + dynamic * weights[j] / total, each_idle, methods[j])
            for j in jobs}


class SoloRate:
    """Watts per utilisation point of each job, learned from intervals where it ran alone on
    a GPU (a running mean over at most ``window`` intervals)."""

    def __init__(self, window: int = 30) -> None:
        self.window = window
        self.rates: dict[str, tuple[float, int]] = {}

    def observe(self, job: str, power_w: float, idle_w: float, util_pct: float) -> None:
        if util_pct < 1.0 or power_w <= idle_w:
            return
        rate = (power_w - idle_w) / util_pct
        mean, n = self.rates.get(job, (0.0, 0))
        n = min(n + 1, self.window)
        self.rates[job] = (mean + (rate - mean) / n, n)

    def get(self, job: str) -> float | None:
        got = self.rates.get(job)
        return got[0] if got else None

    def forget(self, keep: set[str]) -> None:
        self.rates = {j: v for j, v in self.rates.items() if j in keep}
