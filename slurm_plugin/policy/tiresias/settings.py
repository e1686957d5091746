"""The ``[tiresias]`` site keys and their checks: a bad value raises ``ConfigError`` naming
``tiresias``, the key and the value."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigError
from ..base import SITE_KEYS

SOURCE = "tiresias"


@dataclass(frozen=True, slots=True)
class TiresiasSettings:
    # attained service (GPU-seconds) at which a job moves to the next, lower queue
    # (ascending; Tiresias's discretized 2D-LAS)
    thresholds_gpu_s: tuple[float, ...] = (3600.0, 36000.0)
    # queued jobs looked at per pass (queue order)
    lookahead: int = 256
    # preemptions per pass (each costs the job a restart from its checkpoint)
    max_preemptions_per_pass: int = 16


_CACHE: tuple[Any, TiresiasSettings] | None = None


def _bad(key: str, value: Any, fix: str) -> ConfigError:
    return ConfigError(SOURCE, key, value, fix)


def parse_settings(raw: Mapping[str, Any] | None) -> TiresiasSettings:
    global _CACHE
    if _CACHE is not None and _CACHE[0] is raw:
        return _CACHE[1]
    values: dict[str, Any] = {}
    for key, value in (raw or {}).items():
        if key in SITE_KEYS:
            continue
        if key == "thresholds_gpu_s":
            ok = isinstance(value, (list, tuple)) and value and all(
                not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
                and v > 0 for v in value) and list(value) == sorted(value)
            if not ok:
                raise _bad(key, value, "give ascending positive GPU-seconds, e.g. [3600, 36000]")
            values[key] = tuple(float(v) for v in value)
        elif key in ("lookahead", "max_preemptions_per_pass"):
            lo = 1 if key == "lookahead" else 0
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value < lo or value != int(value):
                raise _bad(key, value, f"give a whole number >= {lo}")
            values[key] = int(value)
        else:
            raise _bad(key, value, "unknown key; known: lookahead, max_preemptions_per_pass, "
                                   "thresholds_gpu_s (queued jobs are no longer held: no "
                                   "hold_s)" if key == "hold_s" else
                       "unknown key; known: lookahead, max_preemptions_per_pass, "
                       "thresholds_gpu_s")
    out = TiresiasSettings(**values)
    _CACHE = (raw, out)
    return out
