"""The ``[ones]`` site keys and their checks: a bad value raises ``ConfigError`` naming
``ones``, the key and the value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..section import number, parse_section

SOURCE = "ones"


@dataclass(frozen=True, slots=True)
class OnesSettings:
    # candidate whole-cluster schedules kept per pass (ONES: 8)
    population: int = 8
    # generations evolved per reconcile pass (each: crossover, mutation, refill, select)
    generations: int = 1
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



_CHECKS = {
    "population": number(SOURCE, 2, 256, whole=True),
    "generations": number(SOURCE, 0, 64, whole=True),
    "crossover_p": number(SOURCE, 0.0, 1.0),
    "mutation_p": number(SOURCE, 0.0, 1.0),
    "seed": number(SOURCE, 0, whole=True),
    "restart_cost_s": number(SOURCE, 0.0),
    "min_interval_s": number(SOURCE, 0.0),
    "min_gain": number(SOURCE, 0.0),
    "hold_s": number(SOURCE, 1.0),
    "lookahead": number(SOURCE, 1, whole=True),
    "max_resizes_per_pass": number(SOURCE, 0, whole=True),
    "statistical_efficiency": number(SOURCE, 0, 1, whole=True),
}


def parse_settings(raw: Mapping[str, Any] | None) -> OnesSettings:
    """Settings from the policy's section (unknown keys are an error that lists the known)."""
    return parse_section(SOURCE, raw, OnesSettings, _CHECKS)
