"""Reading a policy's own site section into its frozen settings: each key's check, unknown
keys refused with the known ones listed, the keys every policy's settings carry
(``base.SITE_KEYS``) passed over. A bad value raises ``ConfigError`` naming the section, the
key and the value, and saying what to give."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ConfigError
from .base import SITE_KEYS

Check = Callable[[str, Any], Any]      # (key, raw value) -> the value, or ConfigError


def number(source: str, lo: float, hi: float = math.inf, whole: bool = False) -> Check:
    """A finite number in ``[lo, hi]`` (a whole one when ``whole``); booleans refused."""
    def check(key: str, value: Any) -> float | int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(value) or not lo <= value <= hi or \
                (whole and value != int(value)):
            kind = "a whole number" if whole else "a number"
            rng = f"{kind} >= {lo:g}" + (f" and <= {hi:g}" if hi != math.inf else "")
            raise ConfigError(source, key, value, f"give {rng}")
        return int(value) if whole else float(value)
    return check


def flag(source: str) -> Check:
    """true or false."""
    def check(key: str, value: Any) -> bool:
        if not isinstance(value, bool):
            raise ConfigError(source, key, value, "give true or false")
        return value
    return check


_CACHE: dict[type, tuple[Any, Any]] = {}    # settings class -> (the raw mapping, its settings)


def parse_section(source: str, raw: Mapping[str, Any] | None, cls: type,
                  checks: Mapping[str, Check], unknown: Mapping[str, str] | None = None):
    """``cls(**checked keys)``; kept while the caller passes the same mapping object (a
    reconcile pass and the simulator ask once per call). ``unknown``: a key no longer read ->
    what to say about it."""
    kept = _CACHE.get(cls)
    if kept is not None and kept[0] is raw:
        return kept[1]
    values = {}
    for key, value in (raw or {}).items():
        if key in SITE_KEYS:
            continue
        check = checks.get(key)
        if check is None:
            why = f"unknown key; known: {', '.join(sorted(checks))}"
            if unknown and key in unknown:
                why += f" ({unknown[key]})"
            raise ConfigError(source, key, value, why)
        values[key] = check(key, value)
    out = cls(**values)
    _CACHE[cls] = (raw, out)
    return out
