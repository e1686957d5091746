"""Carbon intensity for the simulator, aligned to the trace by hour of week.

The series (read by ``formats.carbon_csv``) is averaged per hour and cut to whole weeks
starting at its first Monday 00:00 UTC. Trace time maps to it by hour of week, counted from the
trace's own first Monday 00:00 UTC at or before its first submission, week after week, wrapping
around at the series' end. Without ``--carbon`` the built-in slice for the zone is used.

``WeekAlignedCarbon`` is a ``CarbonProvider`` (its history at any trace time), so the simulator
forecasts from it exactly as the live path forecasts from InfluxDB (``ForecastingCarbon``):
policies see a forecast made from the past, never the true future.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from ..errors import InputError
from ..resources import data_dir
from ..formats.carbon_csv import WEEK_S, Basis, load, zone_matches

_MONDAY0_S = 4 * 86400  # 1970-01-05 00:00 UTC was a Monday


def week_start_s(t_s: float) -> float:
    """Monday 00:00 UTC at or before ``t_s``."""
    return t_s - ((t_s - _MONDAY0_S) % WEEK_S)


def builtin_zones() -> list[str]:
    return sorted(p.name[len("carbon-"):-len("-2023-01.csv")]
                  for p in data_dir().glob("carbon-*-2023-01.csv"))


class WeekAlignedCarbon:
    """Hourly gCO2/kWh over whole weeks, with a cumulative integral for O(1) lookups."""

    def __init__(self, zone: str, hourly: list[float], source: str, origin_s: float) -> None:
        self.zone, self.hourly, self.source, self.origin_s = zone, hourly, source, origin_s
        self.warnings: tuple[str, ...] = ()     # what the file lacked (rows skipped)
        self._cum = [0.0]
        for v in hourly:
            self._cum.append(self._cum[-1] + v)
        self._last = (float("nan"), 0.0)    # the last (time, integral) asked: see integral_h

    def _integral_to(self, t_s: float) -> float:
        """The integral from the origin to ``t_s``; the last one asked is kept (one tuple, so
        threads sharing the series never read a time with another time's value)."""
        last = self._last
        if last[0] == t_s:
            return last[1]
        value = self._integral_at(t_s)
        self._last = (t_s, value)
        return value

    def _integral_at(self, t_s: float) -> float:
        x = (t_s - self.origin_s) / 3600
        n = len(self.hourly)
        wraps, r = divmod(x, n)
        i = min(int(r), n - 1)
        return wraps * self._cum[n] + self._cum[i] + (r - i) * self.hourly[i]

    def at(self, t_s: float) -> float:
        """gCO2/kWh at trace time ``t_s``."""
        return self.hourly[int(math.floor((t_s - self.origin_s) / 3600)) % len(self.hourly)]

    def intensity_at(self, t_s: float) -> float | None:
        """``CarbonProvider``: the value in force at ``t_s``."""
        return self.at(t_s)

    def forecast(self, start_s: float, end_s: float) -> tuple[tuple[float, float], ...]:
        """``CarbonProvider``: the recorded hourly values with ``start_s < time <= end_s``
        (as history, this is what the series measured; ``ForecastingCarbon`` predicts from it)."""
        first = math.floor(start_s / 3600) + 1
        last = math.floor(end_s / 3600)
        return tuple((h * 3600.0, self.at(h * 3600.0)) for h in range(first, last + 1))

    def integral_h(self, t0_s: float, t1_s: float) -> float:
        """Integral of the intensity over [t0, t1], in gCO2/kWh x hours. The end is looked up
        last, so back-to-back intervals (the simulator's events) look up each time once."""
        start = self._integral_to(t0_s)
        return self._integral_to(t1_s) - start


def load_carbon(path: str | Path | None, zone: str, trace_start_s: float,
                basis: Basis = "lca", default_zone: str = "") -> WeekAlignedCarbon:
    """The aligned series of ``zone`` from ``path`` (None: the built-in slice). An empty
    ``zone`` with a file: the file's own Zone Id (``default_zone`` for a file without one).
    Hours missing between the file's rows are filled with the hour before them, and said in
    ``warnings`` with the rows the reader skipped or found repeated."""
    if path is None:
        zone = (zone or default_zone).upper()
        p = data_dir() / f"carbon-{zone}-2023-01.csv"
        if not p.exists():
            raise InputError(f"carbon: zone {zone!r} has no built-in series; built-in zones: "
                             f"{', '.join(builtin_zones())}; or give --carbon FILE")
    else:
        p = Path(path)
    series = load(p, basis)
    if not zone:
        zone = series.zone or default_zone
    elif not zone_matches(series.zone, zone):
        raise InputError(f"carbon: {p}: field 'Zone Id': the file holds zone {series.zone!r}, "
                         f"not {zone!r}; pass --zone {series.zone} or another file")
    elif series.zone.upper() == zone.upper():
        zone = series.zone      # the file's spelling
    per_hour: dict[int, list[float]] = {}
    for pt in series.points:
        per_hour.setdefault(int(pt.time_s // 3600), []).append(pt.gco2_per_kwh)
    first = min(per_hour) * 3600
    start = week_start_s(first)
    if start < first:
        start += WEEK_S
    weeks = int(((max(per_hour) + 1) * 3600 - start) // WEEK_S)
    if weeks < 1:
        raise InputError(f"carbon: {p}: less than one full week from its first Monday 00:00 UTC; "
                         "give a file of at least 14 days")
    hourly: list[float] = []
    prev = per_hour[min(per_hour)][0]
    h0 = int(start // 3600)
    gaps: list[tuple[int, int]] = []    # (first hour missing, hours) of each run of them
    for h in range(h0, h0 + weeks * 168):
        vals = per_hour.get(h)
        if vals:
            prev = sum(vals) / len(vals)
        elif gaps and gaps[-1][0] + gaps[-1][1] == h:
            gaps[-1] = (gaps[-1][0], gaps[-1][1] + 1)
        else:
            gaps.append((h, 1))
        hourly.append(prev)         # a gap repeats the previous hour
    out = WeekAlignedCarbon(zone, hourly, str(p), week_start_s(trace_start_s))
    out.warnings = series.notes() + ((_gap_note(p, gaps),) if gaps else ())
    return out


def _gap_note(path: Path, gaps: list[tuple[int, int]]) -> str:
    """One line on the hours the file lacks (the longest run of them named)."""
    h, n = max(gaps, key=lambda g: g[1])
    fmt = "%Y-%m-%d %H:00"
    span = f"{time.strftime(fmt, time.gmtime(h * 3600))} to " \
           f"{time.strftime(fmt, time.gmtime((h + n - 1) * 3600))} UTC"
    return (f"carbon: {path}: {sum(g[1] for g in gaps)} hour(s) missing in {len(gaps)} gap(s) "
            f"(the longest: {n} h, {span}); each is filled with the hour before it")
