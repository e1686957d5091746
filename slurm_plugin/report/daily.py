"""Pure: energy and carbon per UTC day and account, each record spread over the hours it ran
(in proportion to its run time in each day), for the report's figure."""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

from .records import EnergyRecord

DAY_S = 86400.0


def day_start_s(t_s: float) -> float:
    return t_s - t_s % DAY_S


def _day_shares(r: EnergyRecord, days: list[float]) -> list[tuple[int, float]]:
    """(day index, fraction of the record) for each day the job ran in."""
    if r.duration_s <= 0:
        return [(i, 1.0) for i, d in enumerate(days) if d <= r.end_s < d + DAY_S]
    out = []
    for i, d in enumerate(days):
        part = min(r.end_s, d + DAY_S) - max(r.start_s, d)
        if part > 0:
            out.append((i, part / r.duration_s))
    return out


def per_day(records: Sequence[EnergyRecord], since_s: float, until_s: float) -> dict:
    """``{"days": [day start s, ...], "accounts": [...], "energy_kwh": {account: [per day]},
    "co2_kg": {account: [per day]}}`` over the UTC days from ``since_s`` (or the earliest
    start of a job, when earlier: a job that ended in the period is shown whole, so the bars
    add up to the report's totals) to ``until_s``."""
    since_s = min([since_s, *(r.start_s for r in records)])
    first, last = day_start_s(since_s), day_start_s(max(since_s, until_s - 1e-6))
    days = [first + i * DAY_S for i in range(int((last - first) // DAY_S) + 1)]
    energy: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(days))
    co2: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(days))
    for r in records:
        account = r.account or "(none)"
        for i, share in _day_shares(r, days):
            energy[account][i] += r.energy_j * share / 3.6e6
            if r.co2_g is not None:
                co2[account][i] += r.co2_g * share / 1000
        energy[account], co2[account]    # an account shows even when all of it is outside
    accounts = sorted(energy, key=lambda a: -sum(energy[a]))
    return {"days": days, "accounts": accounts, "energy_kwh": dict(energy), "co2_kg": dict(co2)}
