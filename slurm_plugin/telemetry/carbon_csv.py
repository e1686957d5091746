"""Grid carbon-intensity CSV files -> ``CarbonSeries``.

Two formats, told apart by the header line:

- Electricity Maps hourly exports (one file per zone and year):
  ``Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),
  Carbon Intensity gCO₂eq/kWh (LCA),...``. ``basis`` picks the life-cycle (``lca``, default)
  or the direct-emission column; the other is kept as well.
- "Let's Wait Awhile" (Wiesner et al., Middleware'21): ``Time,Carbon Intensity`` (life-cycle
  factors), 15- or 30-minute steps, no zone column.

Times are UTC. A bad row raises ``InputError`` naming the file, the line and the field.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from ..errors import InputError

Basis = Literal["lca", "direct"]

EM_TIME = "Datetime (UTC)"
EM_ZONE = "Zone Id"
EM_DIRECT = "Carbon Intensity gCO₂eq/kWh (direct)"
EM_LCA = "Carbon Intensity gCO₂eq/kWh (LCA)"
LWA_TIME = "Time"
LWA_VALUE = "Carbon Intensity"


@dataclass(frozen=True, slots=True)
class CarbonPoint:
    time_s: float                        # epoch seconds, UTC
    gco2_per_kwh: float                  # the chosen basis
    gco2_per_kwh_direct: float | None = None


@dataclass(frozen=True, slots=True)
class CarbonSeries:
    """Points ascending by time, one per timestamp (a repeated timestamp keeps the last row)."""

    path: str
    format: Literal["electricitymaps", "lets-wait-awhile"]
    zone: str                            # the file's Zone Id ("" when the file has none)
    points: tuple[CarbonPoint, ...]


def _bad(path: str, line: int, fieldname: str, value: object, why: str) -> InputError:
    return InputError(f"carbon csv: {path}:{line}: field {fieldname!r} = {value!r}: {why}; "
                      "fix or remove that row")


def _time(path: str, line: int, fieldname: str, text: str) -> float:
    try:
        dt = datetime.fromisoformat(text.strip())
    except ValueError:
        raise _bad(path, line, fieldname, text,
                   "expected a time like 2023-01-01 00:00:00") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def _value(path: str, line: int, fieldname: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _bad(path, line, fieldname, text, "expected a number of gCO2eq/kWh") from None
    if not math.isfinite(value) or value < 0:
        raise _bad(path, line, fieldname, text, "expected a finite, non-negative number")
    return value


def load(path: str | Path, basis: Basis = "lca") -> CarbonSeries:
    """Read one carbon-intensity CSV file of either format."""
    name = str(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.reader(fh))
    except OSError as exc:
        raise InputError(f"carbon csv: {name}: cannot read ({exc.strerror}); "
                         "check the path") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"carbon csv: {name}: not UTF-8 text ({exc.reason})") from None
    if not rows:
        raise InputError(f"carbon csv: {name}:1: empty file; expected a header line")
    header = [h.strip() for h in rows[0]]
    if EM_TIME in header:
        fmt, need = "electricitymaps", (EM_TIME, EM_DIRECT, EM_LCA)
    elif header[:2] == [LWA_TIME, LWA_VALUE]:
        fmt, need = "lets-wait-awhile", (LWA_TIME, LWA_VALUE)
    else:
        raise InputError(f"carbon csv: {name}:1: header {rows[0][:6]!r} is neither the Electricity "
                         f"Maps format ({EM_TIME!r}, {EM_LCA!r}, ...) nor {LWA_TIME},{LWA_VALUE}")
    missing = [c for c in need if c not in header]
    if missing:
        raise InputError(f"carbon csv: {name}:1: column {missing[0]!r} missing from the header")
    col = {c: header.index(c) for c in need}
    zone_col = header.index(EM_ZONE) if EM_ZONE in header else -1
    width = max(col.values()) + 1
    by_time: dict[float, CarbonPoint] = {}
    zone = ""
    for line, row in enumerate(rows[1:], start=2):
        if not row or not any(c.strip() for c in row):
            continue
        if len(row) < width:
            raise _bad(name, line, header[len(row)] if len(row) < len(header) else "?", None,
                       f"row has {len(row)} fields, the header {len(header)}")
        if fmt == "electricitymaps":
            t = _time(name, line, EM_TIME, row[col[EM_TIME]])
            direct = _value(name, line, EM_DIRECT, row[col[EM_DIRECT]])
            lca = _value(name, line, EM_LCA, row[col[EM_LCA]])
            point = CarbonPoint(t, lca if basis == "lca" else direct, direct)
            if zone_col >= 0 and not zone:
                zone = row[zone_col].strip()
        else:
            t = _time(name, line, LWA_TIME, row[col[LWA_TIME]])
            point = CarbonPoint(t, _value(name, line, LWA_VALUE, row[col[LWA_VALUE]]))
        by_time[t] = point
    if not by_time:
        raise InputError(f"carbon csv: {name}: no data rows after the header")
    points = tuple(by_time[t] for t in sorted(by_time))
    return CarbonSeries(name, fmt, zone, points)
