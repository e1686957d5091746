"""Grid carbon-intensity CSV files -> ``CarbonSeries``.

Two formats, told apart by the header line:

- Electricity Maps hourly exports (one file per zone and year), in the older header
  ``Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),
  Carbon Intensity gCO₂eq/kWh (LCA),...`` and the current one
  ``Datetime (UTC),Country,Zone name,Zone id,Carbon intensity gCO₂eq/kWh (direct),
  Carbon intensity gCO₂eq/kWh (Life cycle),...``: column names are matched without regard to
  case, spacing or the subscript in gCO₂. ``basis`` picks the life-cycle (``lca``, default) or
  the direct-emission column; the other is kept as well where the file has it.
- "Let's Wait Awhile" (Wiesner et al., Middleware'21): ``Time,Carbon Intensity`` (life-cycle
  factors), 15- or 30-minute steps, no zone column.

Times are UTC. A row whose chosen value is empty or NaN (an hour the source has no data for)
is skipped and its line kept in ``CarbonSeries.skipped``, for the caller to report; any other
bad row raises ``InputError`` naming the file, the line and the field.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from ..errors import InputError

WEEK_S = 7 * 86400

Basis = Literal["lca", "direct"]

EM_TIME = "Datetime (UTC)"
EM_ZONE = "Zone Id"
EM_DIRECT = "Carbon Intensity gCO₂eq/kWh (direct)"
EM_LCA = "Carbon Intensity gCO₂eq/kWh (LCA)"
LWA_TIME = "Time"
LWA_VALUE = "Carbon Intensity"
# the names each Electricity Maps column has had, as ``_key`` writes them
_EM_NAMES = {EM_TIME: ("datetime (utc)",), EM_ZONE: ("zone id",),
             EM_DIRECT: ("carbon intensity gco2eq/kwh (direct)",),
             EM_LCA: ("carbon intensity gco2eq/kwh (lca)",
                      "carbon intensity gco2eq/kwh (life cycle)")}


def zone_matches(file_zone: str, zone: str) -> bool:
    """Whether a file whose Zone Id is ``file_zone`` holds ``zone``: the same id without regard
    to case, or a bidding zone named after the file's country (``DE-LU`` for a file whose Zone Id
    is ``DE``, as Electricity Maps' DE-LU exports are). A file without a Zone Id holds any."""
    f, z = file_zone.strip().upper(), zone.strip().upper()
    return not f or f == z or z.startswith(f + "-")


def _key(name: str) -> str:
    """A column name without case, repeated spaces or the subscript: ``gCO₂eq`` = ``gco2eq``."""
    return " ".join(name.replace("₂", "2").lower().split())


def _columns(header: list[str]) -> dict[str, int]:
    """Each Electricity Maps column the header has -> its index."""
    keys = [_key(h) for h in header]
    out = {}
    for col, names in _EM_NAMES.items():
        for i, k in enumerate(keys):
            if k in names:
                out[col] = i
                break
    return out


def _lwa_columns(header: list[str]) -> int | None:
    """The index of ``Time`` where the header is ``Time,Carbon Intensity`` (names matched as
    ``_key`` does), after an unnamed index column pandas writes or not; None otherwise."""
    keys = [_key(h) for h in header]
    first = 1 if keys and keys[0] == "" else 0
    if keys[first:first + 2] == [_key(LWA_TIME), _key(LWA_VALUE)]:
        return first
    return None


@dataclass(frozen=True, slots=True)
class CarbonPoint:
    time_s: float                        # epoch seconds, UTC
    gco2_per_kwh: float                  # the chosen basis
    gco2_per_kwh_direct: float | None = None


@dataclass(frozen=True, slots=True)
class CarbonSeries:
    """Points ascending by time, one per timestamp (a repeated timestamp keeps the last row,
    its line in ``repeated``)."""

    path: str
    format: Literal["electricitymaps", "lets-wait-awhile"]
    zone: str                            # the file's Zone Id ("" when the file has none)
    points: tuple[CarbonPoint, ...]
    skipped: tuple[int, ...] = ()        # lines whose chosen value was empty or NaN
    repeated: tuple[int, ...] = ()       # lines whose timestamp an earlier row had

    def shifted_to(self, now_s: float) -> tuple["CarbonSeries", int]:
        """The series moved later so that it covers ``now_s`` (its first point at or before
        it, its last at or after it): by whole weeks where that can cover it (each point keeps
        its hour of the week, as the simulator aligns a zone's year to a trace), else by whole
        days (its hour of the day), else by hours. A past year replays as current data (a
        demo, a test cluster); a series that already reaches ``now_s`` is kept. Returns it and
        the seconds it moved."""
        first, last = self.points[0].time_s, self.points[-1].time_s
        if last >= now_s:
            return self, 0
        for step in (WEEK_S, 86400, 3600):
            d = math.ceil((now_s - last) / step) * step
            if first + d <= now_s:
                break
        points = tuple(CarbonPoint(p.time_s + d, p.gco2_per_kwh, p.gco2_per_kwh_direct)
                       for p in self.points)
        return CarbonSeries(self.path, self.format, self.zone, points, self.skipped,
                            self.repeated), d

    def skipped_note(self) -> str:
        """One line on the rows skipped ("" when none)."""
        if not self.skipped:
            return ""
        return (f"carbon csv: {self.path}: {len(self.skipped)} row(s) without a value skipped "
                f"(line {_lines(self.skipped)}); the hours around them stand in for them")

    def notes(self) -> tuple[str, ...]:
        """One line per kind of row not taken as it is: skipped, repeated."""
        out = [self.skipped_note()] if self.skipped else []
        if self.repeated:
            out.append(f"carbon csv: {self.path}: {len(self.repeated)} row(s) repeat an earlier "
                       f"row's time (line {_lines(self.repeated)}); the last row of each time "
                       f"is kept")
        return tuple(out)


def _lines(lines: tuple[int, ...]) -> str:
    return ", ".join(map(str, lines[:5])) + (", ..." if len(lines) > 5 else "")


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


def _missing(text: str) -> bool:
    """An empty or NaN cell: the source had no value for that time."""
    t = text.strip().lower()
    return t in ("", "nan", "null", "none", "n/a", "na")


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
    em = _columns(header)
    if EM_TIME in em:
        fmt = "electricitymaps"
        chosen = EM_LCA if basis == "lca" else EM_DIRECT
        if chosen not in em:
            raise InputError(f"carbon csv: {name}:1: column {chosen!r} missing from the header"
                             + (" (or 'Carbon intensity gCO₂eq/kWh (Life cycle)')"
                                if chosen == EM_LCA else "")
                             + ("; the file has the other basis only: choose it (`carbon "
                                "import --basis`, `simulate --carbon-basis`)"
                                if (EM_DIRECT if basis == "lca" else EM_LCA) in em else ""))
        col = em
    elif (lwa := _lwa_columns(header)) is not None:
        fmt, chosen = "lets-wait-awhile", LWA_VALUE
        col = {LWA_TIME: lwa, LWA_VALUE: lwa + 1}
    else:
        raise InputError(f"carbon csv: {name}:1: header {rows[0][:6]!r} is neither the Electricity "
                         f"Maps format ({EM_TIME!r}, {EM_LCA!r}, ...) nor {LWA_TIME},{LWA_VALUE}")
    time_col = EM_TIME if fmt == "electricitymaps" else LWA_TIME
    zone_col = col.get(EM_ZONE, -1)
    width = max(i for c, i in col.items() if c != EM_ZONE) + 1
    by_time: dict[float, CarbonPoint] = {}
    skipped: list[int] = []
    repeated: list[int] = []
    zone, zone_line = "", 0
    for line, row in enumerate(rows[1:], start=2):
        if not row or not any(c.strip() for c in row):
            continue
        if len(row) < width:
            raise InputError(f"carbon csv: {name}:{line}: field {header[len(row)]!r}: the row "
                             f"is cut short ({len(row)} field(s), the header has "
                             f"{len(header)}); complete or remove it")
        t = _time(name, line, time_col, row[col[time_col]])
        if _missing(row[col[chosen]]):
            skipped.append(line)
            continue
        value = _value(name, line, chosen, row[col[chosen]])
        if fmt == "electricitymaps":
            direct = None
            if EM_DIRECT in col and not _missing(row[col[EM_DIRECT]]):
                direct = _value(name, line, EM_DIRECT, row[col[EM_DIRECT]])
            point = CarbonPoint(t, value, direct)
            if 0 <= zone_col < len(row) and (z := row[zone_col].strip()):
                if not zone:
                    zone, zone_line = z, line
                elif z != zone:
                    raise InputError(f"carbon csv: {name}:{line}: field {header[zone_col]!r} = "
                                     f"{z!r}: the file mixes zones {zone} (line {zone_line}) "
                                     f"and {z}; give one file per zone")
        else:
            point = CarbonPoint(t, value)
        if t in by_time:
            repeated.append(line)
        by_time[t] = point
    if not by_time:
        raise InputError(f"carbon csv: {name}: no data rows after the header"
                         + (f" with a value ({len(skipped)} without one)" if skipped else ""))
    points = tuple(by_time[t] for t in sorted(by_time))
    return CarbonSeries(name, fmt, zone, points, tuple(skipped), tuple(repeated))
