"""When a per-GPU profile is stale (docs/pal.md, "Profiles age").

A GPU's row is stale when it was measured more than ``profile_max_age_days`` ago (its
``measured_at``, ISO 8601; a row without one ages from the profile file's modification time),
or when the GPU's uuid now differs from the one the profile recorded (the node's GPUs were
swapped: the old row says nothing about the new GPU). ``profile_max_age_days = 0``: never stale
by age. A stale row is reported (``profile-gpus show``, the ``pal`` policy's explanation); the
policy still plans with an aged row, and counts a GPU with no row as median."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone

from ...physics.variability import VariabilityProfile

GpuKey = tuple[str, int]
DAY_S = 86400.0


def parse_time(text: str) -> float | None:
    """Epoch seconds of an ISO 8601 time (UTC when it names no zone); None if unreadable."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.timestamp()


def measured_times(prof: VariabilityProfile, file_mtime_s: float) -> dict[GpuKey, float]:
    """When each named GPU's row was measured (epoch s)."""
    stamps = prof.measured_at or ("",) * len(prof.keys)
    out = {}
    for key, stamp in zip(prof.keys, stamps):
        if key is not None:
            t = parse_time(stamp)
            out[key] = file_mtime_s if t is None else t
    return out


def aged(measured_s: float, now_s: float, max_age_days: float) -> bool:
    return max_age_days > 0 and now_s - measured_s > max_age_days * DAY_S


def stale_gpus(prof: VariabilityProfile, file_mtime_s: float, now_s: float, max_age_days: float,
               current_uuids: Mapping[GpuKey, str] | None = None) -> dict[GpuKey, str]:
    """GPU -> why its row is stale, for the stale rows only."""
    out: dict[GpuKey, str] = {}
    for key, t in measured_times(prof, file_mtime_s).items():
        if aged(t, now_s, max_age_days):
            out[key] = (f"measured {(now_s - t) / DAY_S:.1f} days ago (profile_max_age_days "
                        f"= {max_age_days:g})")
    if current_uuids:
        for key, old in prof.uuid_by_gpu().items():
            new = current_uuids.get(key)
            if new and new != old:
                why = f"uuid changed: profiled {old}, now {new}"
                out[key] = f"{out[key]}; {why}" if key in out else why
    return out
