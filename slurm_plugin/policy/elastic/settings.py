"""The ``[elastic]`` site keys and their checks: a bad value raises ``ConfigError`` naming
``elastic``, the key and the value."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigError
from ..base import SITE_KEYS

SOURCE = "elastic"


@dataclass(frozen=True, slots=True)
class ElasticSettings:
    # restart cost of a resize (checkpoint + requeue + start-up) until the job's own restarts
    # are measured (the simulator's model: ``restart_cost_s`` of the cluster spec)
    restart_cost_s: float = 90.0
    # hysteresis: a job is not resized again within this long of its last (re)start
    min_interval_s: float = 600.0
    # a resize must save at least gain_factor x its restart cost over the job's remaining time
    gain_factor: float = 1.0
    # a GPU is added only while it adds at least this share of one GPU's throughput
    min_efficiency: float = 0.5
    # progress older than this is stale: ignored
    stale_s: float = 900.0
    # progress above this many samples/s per GPU is not physical: ignored
    max_samples_per_s_per_gpu: float = 1e7
    # and, on more GPUs than its previous run, above ``superlinear`` x linear scaling of that run
    superlinear: float = 1.5
    # worst wait may be this many times slurm-default's (checked by the benchmark: the policy
    # keeps Slurm's queue order and keeps the nodes the first waiting job counts on from growth)
    fairness_factor: float = 2.0
    # resizes started per reconcile pass (bounds the requeue storm on a live cluster)
    max_resizes_per_pass: int = 16
    # a job's restarts are measured; true: each job's measured cost replaces restart_cost_s
    measure_restart_cost: bool = True


_KEYS = {"restart_cost_s": 0.0, "min_interval_s": 0.0, "gain_factor": 0.0,
         "min_efficiency": 0.0, "stale_s": 1.0, "max_samples_per_s_per_gpu": 0.0,
         "superlinear": 1.0, "fairness_factor": 1.0, "max_resizes_per_pass": 0}
_MAX = {"min_efficiency": 1.0}


def _number(key: str, value: Any) -> float:
    lo = _KEYS[key]
    hi = _MAX.get(key, math.inf)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not lo <= value <= hi:
        rng = f"a number >= {lo:g}" + (f" and <= {hi:g}" if hi != math.inf else "")
        raise ConfigError(SOURCE, key, value, f"give {rng}")
    if key == "max_resizes_per_pass":
        if value != int(value):
            raise ConfigError(SOURCE, key, value, "give a whole number >= 0")
        return int(value)
    return float(value)


_CACHE: tuple[Any, ElasticSettings] | None = None


def parse_settings(raw: Mapping[str, Any] | None) -> ElasticSettings:
    """Settings from the policy's section (unknown keys are an error that lists the known;
    the keys every policy's settings carry, ``base.SITE_KEYS``, are passed over)."""
    global _CACHE
    if _CACHE is not None and _CACHE[0] is raw:
        return _CACHE[1]
    values = {}
    for key, value in (raw or {}).items():
        if key in SITE_KEYS:
            continue
        if key == "measure_restart_cost":
            if not isinstance(value, bool):
                raise ConfigError(SOURCE, key, value, "give true or false")
            values[key] = value
            continue
        if key not in _KEYS:
            known = ", ".join(sorted([*_KEYS, "measure_restart_cost"]))
            raise ConfigError(SOURCE, key, value, f"unknown key; known: {known}")
        values[key] = _number(key, value)
    out = ElasticSettings(**values)
    _CACHE = (raw, out)
    return out
