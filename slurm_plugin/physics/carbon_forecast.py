"""Carbon-intensity forecasts from a zone's own history. Pure: standard library only.

A history is first put on an hourly grid (``HourlySeries``: the mean of the points inside each
UTC hour; NaN, infinite or negative points are skipped and counted, an hour without a point is a
gap, ``None``, and counted). A forecaster predicts the hours after the last hour of the history:
``predict(series, horizon_h)[h - 1]`` is the mean intensity of hour ``last + h``.

Forecasters (``FORECASTERS``; docs/carbon-forecast.md has their measured error on every zone):

- ``persistence``: the last valid hour, flat.
- ``seasonal-day`` / ``seasonal-week``: the same hour one day / one week earlier.
- ``profile``: the mean of the same hour of day over the last ``days`` days.
- ``blend`` (the default: the lowest mean error at 1, 6 and 24 h over every series measured):
  the profile plus the current anomaly (last value minus its profile) times a weight ``w_h`` per
  horizon, fitted by least squares on the series's own last ``fit_days`` days (clipped to
  [0, 1]). At 1 h ahead ``w_h`` is near 1 (persistence of the anomaly), at a day it is lower:
  the blend of persistence and seasonal-naive is learned per zone from its history at run time,
  not set by a constant per zone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Protocol, Sequence

from ..errors import ConfigError

HOUR_S = 3600.0
Values = Sequence["float | None"]


@dataclass(frozen=True, slots=True)
class HourlySeries:
    """Hourly means on a UTC grid; ``values[k]`` is the hour starting ``start_s + k * 3600``."""

    start_s: float
    values: tuple[float | None, ...]
    skipped_points: int = 0      # NaN, infinite or negative inputs dropped

    @property
    def end_s(self) -> float:
        """Start of the hour after the last one."""
        return self.start_s + len(self.values) * HOUR_S

    @property
    def gap_hours(self) -> int:
        return sum(1 for v in self.values if v is None)

    @classmethod
    def from_points(cls, points: Iterable[tuple[float, float]],
                    until_s: float | None = None) -> "HourlySeries":
        """Bucket ``(time_s, gco2_per_kwh)`` points by UTC hour. ``until_s``: extend the grid with
        gaps up to the hour holding ``until_s`` (a stale history then shows as trailing gaps)."""
        sums: dict[int, float] = {}
        counts: dict[int, int] = {}
        skipped = 0
        for t, v in points:
            if v is None or not math.isfinite(v) or v < 0 or not math.isfinite(t):
                skipped += 1
                continue
            k = math.floor(t / HOUR_S)
            sums[k] = sums.get(k, 0.0) + v
            counts[k] = counts.get(k, 0) + 1
        if not sums:
            k0 = math.floor(until_s / HOUR_S) if until_s is not None else 0
            return cls(k0 * HOUR_S, (None,) if until_s is not None else (), skipped)
        first, last = min(sums), max(sums)
        if until_s is not None:
            last = max(last, math.floor(until_s / HOUR_S))
        values = tuple(sums[k] / counts[k] if k in sums else None for k in range(first, last + 1))
        return cls(first * HOUR_S, values, skipped)


class Forecaster(Protocol):
    name: str

    def predict_at(self, values: Values, end: int, horizon_h: int) -> list[float | None]:
        """Forecasts for hours ``end .. end + horizon_h - 1`` from ``values[:end]`` only."""


def predict(forecaster: Forecaster, series: HourlySeries,
            horizon_h: int) -> tuple[tuple[float, float], ...]:
    """``(hour_start_s, gco2_per_kwh)`` for the ``horizon_h`` hours after the series; hours the
    forecaster cannot predict (no valid history at all) are left out."""
    out = forecaster.predict_at(series.values, len(series.values), horizon_h)
    return tuple((series.end_s + i * HOUR_S, v) for i, v in enumerate(out) if v is not None)


def _last_valid(values: Values, end: int, lookback_h: int = 24 * 14) -> float | None:
    for i in range(end - 1, max(-1, end - 1 - lookback_h), -1):
        v = values[i]
        if v is not None:
            return v
    return None


@dataclass(frozen=True, slots=True)
class Persistence:
    name: str = "persistence"

    def predict_at(self, values: Values, end: int, horizon_h: int) -> list[float | None]:
        return [_last_valid(values, end)] * horizon_h


@dataclass(frozen=True, slots=True)
class SeasonalNaive:
    """The same hour ``period_h`` earlier (further periods back over a gap; else persistence)."""

    period_h: int = 24
    name: str = "seasonal-day"

    def predict_at(self, values: Values, end: int, horizon_h: int) -> list[float | None]:
        last = _last_valid(values, end)
        out: list[float | None] = []
        for h in range(1, horizon_h + 1):
            target = end - 1 + h
            i = target - self.period_h * math.ceil(h / self.period_h)
            v = None
            for _ in range(4):
                if 0 <= i < end and values[i] is not None:
                    v = values[i]
                    break
                i -= self.period_h
            out.append(v if v is not None else last)
        return out


def _profile(values: Values, end: int, target: int, days: int) -> float | None:
    """Mean of ``values[target - 24 k]`` over the ``days`` most recent days before ``end``."""
    k0 = max(1, math.ceil((target - end + 1) / 24))
    total, n = 0.0, 0
    for k in range(k0, k0 + days):
        i = target - 24 * k
        if i < 0:
            break
        v = values[i]
        if v is not None:
            total += v
            n += 1
    return total / n if n else None


@dataclass(frozen=True, slots=True)
class Profile:
    """The mean of the same hour of day over the last ``days`` days."""

    days: int = 7
    name: str = "profile"

    def predict_at(self, values: Values, end: int, horizon_h: int) -> list[float | None]:
        last = _last_valid(values, end)
        out: list[float | None] = []
        for h in range(1, horizon_h + 1):
            p = _profile(values, end, end - 1 + h, self.days)
            out.append(p if p is not None else last)
        return out


@dataclass(frozen=True, slots=True)
class Blend:
    """Profile plus the current anomaly times ``w_h`` fitted on the last ``fit_days`` days."""

    days: int = 7
    fit_days: int = 28
    max_fit_h: int = 72          # beyond this horizon the anomaly weight is 0 (pure profile)
    name: str = "blend"

    def weights(self, values: Values, end: int, horizon_h: int) -> list[float]:
        """``w_h`` for h = 1..horizon_h by least squares over the origins of the fit window."""
        hmax = min(horizon_h, self.max_fit_h)
        lo = max(0, end - 24 * self.fit_days - hmax)
        # Anomaly of each index against its profile as seen from an origin at most 24 h before
        # it (the mean of the same hour on the ``days`` days before; None where either is
        # missing).
        anomaly: list[float | None] = []
        days = self.days
        for i in range(lo, end):
            y = values[i]
            if y is None:
                anomaly.append(None)
                continue
            # _profile(values, i, i, days), inline: the same hour on the days before, summed
            # in the same order
            total, n = 0.0, 0
            for j in range(i - 24, max(-1, i - 24 * days - 1), -24):
                v = values[j]
                if v is not None:
                    total += v
                    n += 1
            anomaly.append(y - total / n if n else None)
        num = [0.0] * (hmax + 1)
        den = [0.0] * (hmax + 1)
        # w_h by least squares of the anomaly h hours on against the anomaly at the origin,
        # over the origins whose target lies inside the window (origin order, as summed before)
        last = len(anomaly) - 1
        gapless = None not in anomaly
        if gapless:     # each h's sum of squares is a prefix of one running sum (same order)
            squares = [0.0]
            for a in anomaly:
                squares.append(squares[-1] + a * a)
        for h in range(1, min(hmax, 24) + 1):
            nh, dh = 0.0, 0.0
            if gapless:
                for a, b in zip(anomaly, anomaly[h:]):
                    nh += a * b
                dh = squares[last + 1 - h]
            else:
                for a, b in zip(anomaly[:last + 1 - h], anomaly[h:last + 1]):
                    if a is not None and b is not None:
                        nh += a * b
                        dh += a * a
            num[h], den[h] = nh, dh
        fitted = [min(1.0, max(0.0, num[h] / den[h])) if den[h] > 0 else 0.0
                  for h in range(1, min(hmax, 24) + 1)]
        w: list[float] = []
        for h in range(1, horizon_h + 1):
            if h <= len(fitted):
                w.append(fitted[h - 1])
            elif h <= hmax and len(fitted) == 24:   # beyond a day: decay the day-ahead weight
                w.append(fitted[23] ** (h / 24))
            else:
                w.append(0.0)
        return w

    def predict_at(self, values: Values, end: int, horizon_h: int) -> list[float | None]:
        last = _last_valid(values, end)
        if last is None:
            return [None] * horizon_h
        origin = end - 1
        while origin >= 0 and values[origin] is None:
            origin -= 1
        p_origin = _profile(values, origin - 23 if origin >= 23 else 0, origin, self.days)
        anomaly = last - p_origin if p_origin is not None else 0.0
        stale = end - 1 - origin       # trailing gap hours: the anomaly is that much older
        w = self.weights(values, end, horizon_h + stale)
        out: list[float | None] = []
        for h in range(1, horizon_h + 1):
            p = _profile(values, end, end - 1 + h, self.days)
            if p is None:
                out.append(last)
                continue
            out.append(max(0.0, p + w[h - 1 + stale] * anomaly))
        return out


FORECASTERS: dict[str, Forecaster] = {
    "persistence": Persistence(),
    "seasonal-day": SeasonalNaive(24, "seasonal-day"),
    "seasonal-week": SeasonalNaive(168, "seasonal-week"),
    "profile": Profile(),
    "blend": Blend(),
    "blend-3d": Blend(days=3, name="blend-3d"),
    "blend-1d": Blend(days=1, name="blend-1d"),
}
DEFAULT_FORECASTER = "blend"
HISTORY_DAYS = 36   # history a forecaster needs: fit window (28 d) + profile (7 d) + a day


def forecaster(name: str = DEFAULT_FORECASTER) -> Forecaster:
    """The built-in forecaster called ``name``; ConfigError lists the known ones."""
    f = FORECASTERS.get(name.strip().lower())
    if f is None:
        raise ConfigError("carbon forecast", "method", name,
                          f"unknown forecaster; choose one of: {', '.join(FORECASTERS)}")
    return f
