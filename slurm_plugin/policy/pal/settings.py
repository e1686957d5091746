"""PAL's site keys (the ``[pal]`` section) and their checks.

``profile``: the per-GPU profile CSV (``wattctl profile-gpus import``), keyed by node and GPU
index; "" for none (every GPU counts as median). ``locality_penalty_a`` .. ``_d``: the time
multiplier of a job of that class spread over several nodes (PAL's measured defaults A 1.16,
B 1.0, C 1.0, D 1.10). ``default_class``: the PAL class of a job whose workload is unknown.
``slowdown_tolerance``: the threshold, as a share above the lowest slowdown some free GPU set
offers now: sets under it count as equal and go to the best fit (default 0.02).
``order_queue``: whether the most variability-sensitive class goes first in the queue.
``size_tiers``: whether, within that order, a job asking less GPU-time (time limit x GPUs)
goes first (the queue tiers of ``policy/queue.queue_tier``).
``tier_age_s``: a waiting job's queue tier drops by one for every this long it has waited, so
no job waits behind smaller or more sensitive ones for good (0, the default: tiers never age).
``profile_max_age_days``: rows measured longer ago are stale (said in the explanation; 0 never).
The simulator hands in ``profile_factors`` (the factors it applies, keyed by node and GPU index)
in place of a file. A malformed value raises ``ConfigError`` naming ``pal``, the key and the
value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigError

SOURCE = "pal"
CLASSES = ("A", "B", "C", "D")
LOCALITY_PENALTY = {"A": 1.16, "B": 1.0, "C": 1.0, "D": 1.10}   # PAL, measured on Longhorn


@dataclass(frozen=True, slots=True)
class PalSettings:
    profile: str = ""
    locality_penalty: tuple[tuple[str, float], ...] = tuple(LOCALITY_PENALTY.items())
    default_class: str = "A"
    order_queue: bool = True
    size_tiers: bool = True
    tolerance: float = 0.02
    max_age_days: float = 30.0
    tier_age_s: float = 0.0

    def penalty(self, cls: str) -> float:
        return dict(self.locality_penalty).get(cls, 1.0)


_cache: tuple[int, Mapping[str, Any] | None, PalSettings] = (0, None, PalSettings())


def parse_settings(values: Mapping[str, Any]) -> PalSettings:
    """Settings from ``Context.settings`` (parsed again only for another mapping); unknown keys
    are ignored."""
    global _cache
    if _cache[1] is values:
        return _cache[2]
    s = _parse(values)
    _cache = (id(values), values, s)
    return s


def _parse(values: Mapping[str, Any]) -> PalSettings:
    kw: dict[str, Any] = {}
    prof = values.get("profile")
    if prof is not None:
        if not isinstance(prof, str):
            raise ConfigError(SOURCE, "profile", prof, "give the path of a GPU profile CSV "
                              "(wattctl profile-gpus import), or \"\" for none")
        kw["profile"] = prof.strip()
    pen = dict(LOCALITY_PENALTY)
    for c in CLASSES:
        key = f"locality_penalty_{c.lower()}"
        v = values.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or not 1.0 <= v <= 10.0:
            raise ConfigError(SOURCE, key, v, "give the time multiplier of a job of class "
                              f"{c} spread over nodes, a number from 1 to 10")
        pen[c] = float(v)
    kw["locality_penalty"] = tuple(pen.items())
    dc = values.get("default_class")
    if dc is not None:
        if not isinstance(dc, str) or dc.strip().upper() not in CLASSES:
            raise ConfigError(SOURCE, "default_class", dc, "give one of A, B, C, D")
        kw["default_class"] = dc.strip().upper()
    tol = values.get("slowdown_tolerance")
    if tol is not None:
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not math.isfinite(tol) \
                or not 0.0 <= tol <= 1.0:
            raise ConfigError(SOURCE, "slowdown_tolerance", tol, "give the share above the "
                              "lowest slowdown still counted as equal, a number from 0 to 1")
        kw["tolerance"] = float(tol)
    age = values.get("profile_max_age_days")
    if age is not None:
        if isinstance(age, bool) or not isinstance(age, (int, float)) or not math.isfinite(age) \
                or not 0.0 <= age <= 36500:
            raise ConfigError(SOURCE, "profile_max_age_days", age, "give the age in days after "
                              "which a profile row is stale, a number from 0 (never) to 36500")
        kw["max_age_days"] = float(age)
    tier_age = values.get("tier_age_s")
    if tier_age is not None:
        if isinstance(tier_age, bool) or not isinstance(tier_age, (int, float)) \
                or not math.isfinite(tier_age) or not 0.0 <= tier_age <= 1e7:
            raise ConfigError(SOURCE, "tier_age_s", tier_age, "give how long (seconds) a job "
                              "waits before its queue tier drops by one, 0 (never) to 1e7")
        kw["tier_age_s"] = float(tier_age)
    for key in ("order_queue", "size_tiers"):
        flag = values.get(key)
        if flag is not None:
            if not isinstance(flag, bool):
                raise ConfigError(SOURCE, key, flag, "give true or false")
            kw[key] = flag
    return PalSettings(**kw)
