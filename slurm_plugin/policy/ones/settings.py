"""The ``[ones]`` site keys and their checks: a bad value raises ``ConfigError`` naming
``ones``, the key and the value."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigError
from ..base import SITE_KEYS

SOURCE = "ones"


@dataclass(frozen=True, slots=True)
class OnesSettings:
    # candidate whole-cluster schedules kept per pass (ONES: 8)
    population: int = 8
    # generations evolved per reconcile pass (each: crossover, mutation, refill, select)
    generations: int = 4
    # per gene: swap it with the other parent's (crossover), drop the allocation (mutation)
    crossover_p: float = 0.3
    mutation_p: float = 0.3
    # the random draws of a pass come from (seed, pass time): a seed gives one schedule
    seed: int = 0
    # cost of a resize of a running job (checkpoint + requeue + start-up), seconds
    restart_cost_s: float = 90.0
    # hysteresis: a job (re)started less than this long ago keeps its allocation
    min_interval_s: float = 300.0
    # a new schedule replaces the running one only when its predicted goodput is higher by
    # this share (changes cost restarts the prediction may not repay)
    min_gain: float = 0.05
    # a pending job left out of the schedule is held (its start deferred) this long; holds
    # are renewed once half has run out, so this must exceed twice the time between passes
    hold_s: float = 1800.0
    # pending jobs considered per pass (queue order)
    lookahead: int = 64
    # resizes started per pass (bounds the requeue storm on a live cluster)
    max_resizes_per_pass: int = 32
    # 0: a bigger batch is assumed to need no more samples (the illusory model; the
    # benchmark's ablation), 1: samples to target grow with the batch (Pollux's validation)
    statistical_efficiency: int = 1


_MIN = {"population": 2, "generations": 0, "crossover_p": 0.0, "mutation_p": 0.0, "seed": 0,
        "restart_cost_s": 0.0, "min_interval_s": 0.0, "min_gain": 0.0, "hold_s": 1.0,
        "lookahead": 1, "max_resizes_per_pass": 0, "statistical_efficiency": 0}
_MAX = {"population": 256, "generations": 64, "crossover_p": 1.0, "mutation_p": 1.0,
        "statistical_efficiency": 1}
_INTS = {"population", "generations", "seed", "lookahead", "max_resizes_per_pass",
         "statistical_efficiency"}


def _number(key: str, value: Any) -> float | int:
    lo, hi = _MIN[key], _MAX.get(key, math.inf)
    whole = key in _INTS
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not lo <= value <= hi or (whole and value != int(value)):
        kind = "a whole number" if whole else "a number"
        rng = f"{kind} >= {lo:g}" + (f" and <= {hi:g}" if hi != math.inf else "")
        raise ConfigError(SOURCE, key, value, f"give {rng}")
    return int(value) if whole else float(value)


_CACHE: tuple[Any, OnesSettings] | None = None


def parse_settings(raw: Mapping[str, Any] | None) -> OnesSettings:
    """Settings from the policy's section (unknown keys are an error that lists the known)."""
    global _CACHE
    if _CACHE is not None and _CACHE[0] is raw:
        return _CACHE[1]
    values = {}
    for key, value in (raw or {}).items():
        if key in SITE_KEYS:
            continue
        if key not in _MIN:
            raise ConfigError(SOURCE, key, value, f"unknown key; known: {', '.join(sorted(_MIN))}")
        values[key] = _number(key, value)
    out = OnesSettings(**values)
    _CACHE = (raw, out)
    return out
