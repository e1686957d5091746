"""Carbon providers that forecast: the built-in forecaster over any provider's history, and an
external forecast read from a CSV file. Both keep the ``CarbonProvider`` interface: for them
``forecast(start_s, end_s)`` is the forecast made at ``start_s`` (only history at or before
``start_s`` is used) for the hours in ``(start_s, end_s]``.

External forecast CSV (UTF-8, comma-separated, header line required, times UTC in ISO 8601;
a time without an offset is UTC)::

    time,gco2_per_kwh,issued
    2024-05-01 13:00:00,212.5,2024-05-01 12:00:00
    2024-05-01 14:00:00,208.0,2024-05-01 12:00:00

``time`` is the start of the period the value covers; ``issued`` (optional) is when the forecast
was made: at ``start_s`` the provider uses, for each time, the value of the newest issue made at
or before ``start_s`` (without ``issued`` every row counts as issued before any query). A row
whose value is empty, ``nan`` or infinite is skipped and reported (``skipped_lines``); any other
bad field raises ``InputError`` naming the file, line, field and value.
"""

from __future__ import annotations

import bisect
import csv
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..errors import InputError
from ..physics.carbon_forecast import (DEFAULT_FORECASTER, HISTORY_DAYS, HOUR_S, Forecaster,
                                       HourlySeries, forecaster as named_forecaster, predict)
from .carbon_series import CarbonProvider

FORECAST_COLUMNS = ("time", "gco2_per_kwh")
ISSUED_COLUMN = "issued"


@dataclass
class ForecastReport:
    """What the last forecast left out: NaN or negative history points, gap hours, stale hours
    (between the newest history point and the forecast origin)."""

    skipped_points: int = 0
    gap_hours: int = 0
    stale_hours: int = 0

    def warning(self, zone: str) -> str | None:
        if not (self.skipped_points or self.gap_hours):
            return None
        return (f"carbon forecast: zone {zone}: history has {self.gap_hours} hour(s) without a "
                f"value ({self.stale_hours} of them just before now) and "
                f"{self.skipped_points} invalid point(s); they were skipped")


class ForecastingCarbon:
    """The built-in forecaster over the history of another provider (InfluxDB or a file)."""

    def __init__(self, history: CarbonProvider, method: str | Forecaster = DEFAULT_FORECASTER,
                 history_days: int = HISTORY_DAYS) -> None:
        self.history = history
        self.zone = history.zone
        self.forecaster = named_forecaster(method) if isinstance(method, str) else method
        self.history_s = history_days * 86400.0
        self.report = ForecastReport()
        self._cache: tuple[int, int, tuple[tuple[float, float], ...]] | None = None

    def intensity_at(self, t_s: float) -> float | None:
        return self.history.intensity_at(t_s)

    def forecast(self, start_s: float, end_s: float) -> tuple[tuple[float, float], ...]:
        origin_hour = math.floor(start_s / HOUR_S)
        horizon_h = max(0, math.ceil(end_s / HOUR_S) - origin_hour)
        if horizon_h == 0:
            return ()
        cached = self._cache
        if cached is None or cached[0] != origin_hour or cached[1] < horizon_h:
            # the hour holding start_s is history (its value is in force now); the forecast
            # starts at the next hour
            points = self.history.forecast(start_s - self.history_s, start_s)
            series = HourlySeries.from_points(points, until_s=start_s)
            last_valid = max((i for i, v in enumerate(series.values) if v is not None),
                             default=-1)
            self.report = ForecastReport(series.skipped_points, series.gap_hours,
                                         len(series.values) - 1 - last_valid)
            cached = (origin_hour, horizon_h, predict(self.forecaster, series, horizon_h))
            self._cache = cached
        return tuple((t, v) for t, v in cached[2] if start_s < t <= end_s)


class StoredThenForecast:
    """The forecast a live policy plans with: the points stored for the hours ahead (an
    external forecast imported into InfluxDB or the site's ``carbon.file``), and where they
    stop short of the horizon, or there are none, the built-in forecaster over the stored
    history (``ForecastingCarbon``) for the hours after them. ``intensity_at`` is the
    history's."""

    def __init__(self, stored: CarbonProvider) -> None:
        self.stored = stored
        self.zone = stored.zone
        self.builtin = ForecastingCarbon(stored)
        self.used_builtin = False

    def intensity_at(self, t_s: float) -> float | None:
        return self.stored.intensity_at(t_s)

    def forecast(self, start_s: float, end_s: float) -> tuple[tuple[float, float], ...]:
        ahead = tuple(self.stored.forecast(start_s, end_s) or ())
        last_s = ahead[-1][0] if ahead else start_s
        if last_s + HOUR_S > end_s:
            return ahead
        made = tuple((t, v) for t, v in self.builtin.forecast(start_s, end_s) if t > last_s)
        self.used_builtin = self.used_builtin or bool(made)
        return ahead + made

    @property
    def warnings(self) -> list[str]:
        out = list(getattr(self.stored, "warnings", ()))
        said = self.builtin.report.warning(self.zone) if self.used_builtin else None
        return out + ([said] if said else [])


@dataclass(frozen=True, slots=True)
class ForecastTable:
    """An external forecast: rows ``(issued_s, time_s, gco2_per_kwh)`` sorted by issue."""

    path: str
    zone: str
    rows: tuple[tuple[float, float, float], ...]
    skipped_lines: tuple[int, ...] = field(default=())


def _parse_time(path: str, line: int, column: str, text: str) -> float:
    try:
        dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"carbon forecast csv: {path}:{line}: field {column!r} = {text!r}: "
                         "expected a UTC time like 2024-05-01 13:00:00; fix or remove that row"
                         ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def load_forecast(path: str | Path, zone: str = "") -> ForecastTable:
    """Read an external forecast CSV (format in this module's docstring)."""
    name = str(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.reader(fh))
    except OSError as exc:
        raise InputError(f"carbon forecast csv: {name}: cannot read ({exc.strerror}); "
                         "check the path") from None
    if not rows:
        raise InputError(f"carbon forecast csv: {name}:1: empty file; expected the header "
                         f"{','.join(FORECAST_COLUMNS)}[,{ISSUED_COLUMN}]")
    header = [h.strip().lower() for h in rows[0]]
    missing = [c for c in FORECAST_COLUMNS if c not in header]
    if missing:
        raise InputError(f"carbon forecast csv: {name}:1: column {missing[0]!r} missing from "
                         f"header {rows[0]!r}; expected {','.join(FORECAST_COLUMNS)}"
                         f"[,{ISSUED_COLUMN}]")
    ti, vi = header.index("time"), header.index("gco2_per_kwh")
    ii = header.index(ISSUED_COLUMN) if ISSUED_COLUMN in header else -1
    out: list[tuple[float, float, float]] = []
    skipped: list[int] = []
    for line, row in enumerate(rows[1:], start=2):
        if not row or not any(c.strip() for c in row):
            continue
        if len(row) < len(header):
            raise InputError(f"carbon forecast csv: {name}:{line}: row has {len(row)} fields, "
                             f"the header {len(header)}; fix or remove that row")
        t = _parse_time(name, line, "time", row[ti])
        issued = _parse_time(name, line, ISSUED_COLUMN, row[ii]) if ii >= 0 else -math.inf
        text = row[vi].strip()
        try:
            value = float(text) if text else math.nan
        except ValueError:
            raise InputError(f"carbon forecast csv: {name}:{line}: field 'gco2_per_kwh' = "
                             f"{text!r}: expected a number of gCO2eq/kWh; fix or remove that row"
                             ) from None
        if not math.isfinite(value):
            skipped.append(line)
            continue
        if value < 0:
            raise InputError(f"carbon forecast csv: {name}:{line}: field 'gco2_per_kwh' = "
                             f"{text!r}: expected a non-negative number; fix or remove that row")
        out.append((issued, t, value))
    if not out:
        raise InputError(f"carbon forecast csv: {name}: no usable rows after the header "
                         f"({len(skipped)} skipped as empty or NaN)")
    out.sort()
    return ForecastTable(name, zone, tuple(out), tuple(skipped))


class ExternalForecastCarbon:
    """A provider over an external forecast; ``history`` (optional) answers ``intensity_at``."""

    def __init__(self, table: ForecastTable, history: CarbonProvider | None = None) -> None:
        self.table = table
        self.history = history
        self.zone = table.zone or (history.zone if history is not None else "")
        self._issued = [r[0] for r in table.rows]

    def forecast(self, start_s: float, end_s: float) -> tuple[tuple[float, float], ...]:
        hi = bisect.bisect_right(self._issued, start_s)
        newest: dict[float, float] = {}
        for _, t, v in self.table.rows[:hi]:       # sorted by issue: a newer issue overwrites
            if start_s < t <= end_s:
                newest[t] = v
        return tuple(sorted(newest.items()))

    def intensity_at(self, t_s: float) -> float | None:
        if self.history is not None:
            return self.history.intensity_at(t_s)
        best: tuple[float, float] | None = None
        hi = bisect.bisect_right(self._issued, t_s)
        for _, t, v in self.table.rows[:hi]:
            if t <= t_s and (best is None or t >= best[0]):
                best = (t, v)
        return best[1] if best else None
