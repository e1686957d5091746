"""Slurm's time formats (as ``sacct -S/-E`` takes them) -> epoch seconds, in local time.

``now[{+|-}N[seconds|minutes|hours|days|weeks]]``, ``YYYY-MM-DD[THH:MM[:SS]]``, ``HH:MM[:SS]``
(today), ``MMDD[YY]``, ``MM/DD[/YY]``, ``MM.DD[.YY]``, ``today``, ``midnight``, ``noon``.
"""

from __future__ import annotations

import re
import time

from ..errors import InputError

_UNITS = {"": 1, "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
          "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
          "h": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400, "days": 86400,
          "w": 604800, "week": 604800, "weeks": 604800}
FORMATS = ("now-1days", "now+2hours", "2026-11-01", "2026-11-01T10:00", "10:00", "1101",
           "11/01/26", "today", "midnight", "noon")


def _local(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0) -> float:
    return time.mktime((y, mo, d, h, mi, s, 0, 0, -1))


def parse_time_s(text: str, now_s: float, option: str = "--since") -> float:
    """Epoch seconds of a Slurm time; InputError names the option, the value and the forms."""
    t = text.strip().lower()
    lt = time.localtime(now_s)
    try:
        m = re.fullmatch(r"now(?:([+-])(\d+)([a-z]*))?", t)
        if m:
            if (m.group(3) or "") not in _UNITS:
                raise ValueError
            n = int(m.group(2) or 0) * _UNITS[m.group(3) or ""]
            return now_s + (n if m.group(1) != "-" else -n)
        if t in ("today", "midnight"):
            return _local(lt.tm_year, lt.tm_mon, lt.tm_mday)
        if t == "noon":
            return _local(lt.tm_year, lt.tm_mon, lt.tm_mday, 12)
        m = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})(?:t(\d{1,2}):(\d{2})(?::(\d{2}))?)?", t)
        if m:
            y, mo, d, h, mi, s = (int(g or 0) for g in m.groups())
            if not (1 <= mo <= 12 and 1 <= d <= 31 and h < 24 and mi < 60 and s < 60):
                raise ValueError
            return _local(y, mo, d, h, mi, s)
        m = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}))?", t)
        if m:
            return _local(lt.tm_year, lt.tm_mon, lt.tm_mday, int(m.group(1)), int(m.group(2)),
                          int(m.group(3) or 0))
        m = re.fullmatch(r"(\d{2})(\d{2})(\d{2})?|(\d{1,2})([/.])(\d{1,2})(?:\5(\d{2}))?", t)
        if m:
            if m.group(1):
                mo, d, y = int(m.group(1)), int(m.group(2)), m.group(3)
            else:
                mo, d, y = int(m.group(4)), int(m.group(6)), m.group(7)
            if not (1 <= mo <= 12 and 1 <= d <= 31):
                raise ValueError
            return _local(2000 + int(y) if y else lt.tm_year, mo, d)
    except (ValueError, OverflowError):
        pass
    raise InputError(f"report: {option} = {text!r}: not a Slurm time; use one of "
                     f"{', '.join(FORMATS)}")
