"""The ``[tiresias]`` site keys and their checks: a bad value raises ``ConfigError`` naming
``tiresias``, the key and the value."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigError
from ..section import number, parse_section

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



def _thresholds(key: str, value: Any) -> tuple[float, ...]:
    ok = isinstance(value, (list, tuple)) and value and all(
        not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and v > 0
        for v in value) and list(value) == sorted(value)
    if not ok:
        raise ConfigError(SOURCE, key, value, "give ascending positive GPU-seconds, e.g. "
                                              "[3600, 36000]")
    return tuple(float(v) for v in value)


_CHECKS = {
    "thresholds_gpu_s": _thresholds,
    "lookahead": number(SOURCE, 1, whole=True),
    "max_preemptions_per_pass": number(SOURCE, 0, whole=True),
}


def parse_settings(raw: Mapping[str, Any] | None) -> TiresiasSettings:
    return parse_section(SOURCE, raw, TiresiasSettings, _CHECKS,
                         unknown={"hold_s": "queued jobs are no longer held: no hold_s"})
