"""GreenFlow's site keys (the ``[greenflow]`` section) and their checks.

A carbon budget for one period: ``budget_kg_per_day`` or ``budget_kg_per_week`` (periods aligned
to UTC days / weeks from the epoch), or ``budget_kg`` over ``budget_period_s`` from
``budget_start_s`` (what ``wattctl simulate --carbon-budget-kg`` sets). ``accounts`` holds
per-account budgets per period (kg); ``zone`` the carbon zone; ``shiftable_partitions`` the
partitions whose jobs may be shifted in time (empty: all). No budget: GreenFlow only takes the
free savings (power caps that cost no time). A malformed value raises ``ConfigError`` naming
the key and the value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from ...errors import ConfigError

SOURCE = "greenflow"
DAY_S = 86400.0
CAPS_W = (None, 225.0, 200.0, 175.0, 150.0, 125.0, 100.0)   # V100 settable range: 100-250 W
# The caps tried on any GPU model: these shares of its top limit (V100: CAPS_W, 25 W steps from
# 90 % to 40 % of 250 W), each moved into the model's settable range (``model_caps_w``).
CAP_SHARES = (0.9, 0.8, 0.7, 0.6, 0.5, 0.4)


@dataclass(frozen=True, slots=True)
class GreenFlowSettings:
    budget_g: float | None = None        # per period; None: no budget
    period_s: float = DAY_S
    period_start_s: float | None = None  # None: periods aligned to the epoch
    accounts_g: Mapping[str, float] = field(default_factory=dict)
    zone: str = ""
    shiftable_partitions: tuple[str, ...] = ()
    caps_w: tuple[float | None, ...] | None = None   # None: the GPU model's (model_caps_w)
    gain: float = 20.0                   # carbon weight per budget overspent (share of the budget)
    order_queue: bool = True             # smaller predicted GPU-time first (sbatch --nice tiers)
    restart_cost_s: float = 90.0         # checkpoint + requeue + start-up of a resized job
    resize_interval_s: float = 6 * 3600.0   # an elastic job is resized at most this often

    def caps_for(self, gpu_model: str) -> tuple[float | None, ...]:
        """The caps tried on ``gpu_model``: ``caps_w`` when given, else the model's own."""
        return self.caps_w if self.caps_w is not None else model_caps_w(gpu_model)

    def period_of(self, now_s: float) -> tuple[float, float]:
        """(start, end) of the budget period holding ``now_s``; past the last period of a
        ``budget_kg`` run the period holds on (everything counts against the one budget)."""
        if self.period_start_s is not None:
            return self.period_start_s, self.period_start_s + self.period_s
        start = math.floor(now_s / self.period_s) * self.period_s
        return start, start + self.period_s

    def may_shift(self, partition: str) -> bool:
        """A job may be shifted when every partition it may run in is shiftable (``a,b``: Slurm
        starts it in whichever frees first); the default partition ("") only when all are."""
        if not self.shiftable_partitions:
            return True
        names = [p.strip() for p in partition.split(",") if p.strip()]
        return bool(names) and all(p in self.shiftable_partitions for p in names)


@lru_cache(maxsize=64)
def model_caps_w(gpu_model: str) -> tuple[float | None, ...]:
    """None (uncapped) then ``CAP_SHARES`` of the model's top limit, each at least its lowest
    settable limit, without repeats: V100 (100-250 W) ``CAPS_W``; H100 (234-700 W) 630 ... 280 W.
    A model without physics (a ConfigError) gets ``CAPS_W`` (GreenFlow's cap table for it
    holds only the uncapped row)."""
    from ...physics.constants import gpu_constants
    try:
        c = gpu_constants(gpu_model)
    except ConfigError:
        return CAPS_W
    out: list[float | None] = [None]
    for share in CAP_SHARES:
        cap = max(c["min_power_cap_w"], round(c["max_power_w"] * share, 1))
        if cap not in out:
            out.append(cap)
    return tuple(out)


def _kg(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0:
        raise ConfigError(SOURCE, key, value, "give a carbon budget in kg CO2e, a number >= 0")
    return float(value) * 1000.0


def _seconds(key: str, value: Any, minimum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < minimum:
        raise ConfigError(SOURCE, key, value, f"give seconds, a number >= {minimum:g}")
    return float(value)


def _account_list(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        name, eq, kg = item.partition("=")
        try:
            out[name.strip()] = float(kg)
        except ValueError:
            out[name.strip()] = kg.strip()
        if not eq or not name.strip():
            raise ConfigError(SOURCE, "accounts", text,
                              'give account=kg pairs, e.g. "physics=20,bio=5"')
    return out


_LAST: list = [None, None]      # (the mapping last parsed, its settings): a run passes one


def parse_settings(values: Mapping[str, Any]) -> GreenFlowSettings:
    """Settings from ``Context.settings``; unknown keys are ignored (other sections' keys).
    The same read-only mapping as the call before (a simulation passes one per run) gives the
    same settings without parsing again."""
    if values is _LAST[0] and isinstance(values, MappingProxyType):
        return _LAST[1]
    parsed = _parse(values)
    _LAST[:] = [values, parsed]
    return parsed


def _parse(values: Mapping[str, Any]) -> GreenFlowSettings:
    given = [k for k in ("budget_kg_per_day", "budget_kg_per_week", "budget_kg")
             if values.get(k) is not None
             and not (k != "budget_kg" and values.get(k) == 0)]     # the site config's "none"
    if len(given) > 1:
        raise ConfigError(SOURCE, given[1], values[given[1]],
                          f"give one budget, not both {given[0]} and {given[1]}")
    kw: dict[str, Any] = {}
    if given == ["budget_kg_per_day"]:
        kw["budget_g"] = _kg("budget_kg_per_day", values["budget_kg_per_day"])
    elif given == ["budget_kg_per_week"]:
        kw.update(budget_g=_kg("budget_kg_per_week", values["budget_kg_per_week"]),
                  period_s=7 * DAY_S)
    elif given == ["budget_kg"]:
        if values.get("budget_period_s") is None or values.get("budget_start_s") is None:
            raise ConfigError(SOURCE, "budget_kg", values["budget_kg"],
                              "a budget for a whole period needs budget_start_s and "
                              "budget_period_s (or use budget_kg_per_day / budget_kg_per_week)")
        kw.update(budget_g=_kg("budget_kg", values["budget_kg"]),
                  period_s=_seconds("budget_period_s", values["budget_period_s"], 1.0),
                  period_start_s=_seconds("budget_start_s", values["budget_start_s"], 0.0))
    accounts = values.get("accounts")
    if isinstance(accounts, str):                   # the site config's "physics=20,bio=5" form
        accounts = _account_list(accounts)
    if accounts is not None:
        if not isinstance(accounts, Mapping):
            raise ConfigError(SOURCE, "accounts", accounts,
                              "give a table of account = kg CO2e per period")
        kw["accounts_g"] = {str(a): _kg(f"accounts.{a}", v) for a, v in accounts.items()}
    zone = values.get("zone")
    if zone is not None:
        if not isinstance(zone, str) or not zone.strip() or any(c.isspace() for c in zone.strip()):
            raise ConfigError(SOURCE, "zone", zone,
                              "give an Electricity Maps zone id such as DE-LU or GB")
        kw["zone"] = zone.strip()
    parts = values.get("shiftable_partitions")
    if isinstance(parts, str):                      # the site config's "gpu,long" form
        parts = [p.strip() for p in parts.split(",") if p.strip()]
    if parts is not None:
        if not all(isinstance(p, str) and p for p in parts):
            raise ConfigError(SOURCE, "shiftable_partitions", parts, "give partition names, "
                              "e.g. [\"batch\"] or \"batch,long\" (empty: all)")
        kw["shiftable_partitions"] = tuple(parts)
    for key, least in (("restart_cost_s", 0.0), ("resize_interval_s", 0.0)):
        if values.get(key) is not None:
            kw[key] = _seconds(key, values[key], least)
    oq = values.get("order_queue")
    if oq is not None:
        if not isinstance(oq, bool):
            raise ConfigError(SOURCE, "order_queue", oq, "give true or false")
        kw["order_queue"] = oq
    return GreenFlowSettings(**kw)
