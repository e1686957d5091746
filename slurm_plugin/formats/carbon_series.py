"""Carbon intensity as one provider interface, so InfluxDB, a CSV file and a forecast stand in
for each other: the interface and the provider over points in memory, which the live path and
the simulator both use (the InfluxDB provider is ``telemetry.carbon``'s)."""

from __future__ import annotations

import bisect

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Protocol

    from .carbon_csv import CarbonPoint, CarbonSeries
else:
    Protocol = object   # the interface is for type checkers: providers do not inherit it


class CarbonProvider(Protocol):
    """Grid carbon intensity of one zone, in gCO2eq/kWh."""

    zone: str

    def intensity_at(self, t_s: float) -> float | None:
        """The latest value at or before ``t_s`` (None when there is none)."""

    def forecast(self, start_s: float, end_s: float) -> tuple[tuple[float, float], ...]:
        """``(time_s, gco2_per_kwh)`` points with ``start_s < time_s <= end_s``, ascending."""


def is_stale(carbon: CarbonProvider, t_s: float, max_age_s: float) -> bool:
    """True when the zone has no stored point within ``max_age_s`` at or before ``t_s`` (0: no
    limit): the value in force then is too old to stand for ``t_s``, for planning
    (``readers.read_carbon``) and for a job's CO2 (the collector's ledger, the epilog) alike. A
    provider that forecasts over stored points (``stored``) is asked of those points."""
    if max_age_s <= 0:
        return False
    stored = getattr(carbon, "stored", carbon)
    return not stored.forecast(t_s - max_age_s, t_s)


class SeriesCarbon:
    """A provider over points in memory (from a CSV file via ``carbon_csv.load``)."""

    def __init__(self, zone: str, points: tuple[CarbonPoint, ...]) -> None:
        self.zone = zone
        self._times = [p.time_s for p in points]
        self._values = [p.gco2_per_kwh for p in points]

    @classmethod
    def from_series(cls, series: CarbonSeries, zone: str = "") -> "SeriesCarbon":
        return cls(zone or series.zone, series.points)

    def intensity_at(self, t_s: float) -> float | None:
        i = bisect.bisect_right(self._times, t_s)
        return self._values[i - 1] if i else None

    def forecast(self, start_s: float, end_s: float) -> tuple[tuple[float, float], ...]:
        lo = bisect.bisect_right(self._times, start_s)
        hi = bisect.bisect_right(self._times, end_s)
        return tuple(zip(self._times[lo:hi], self._values[lo:hi], strict=True))
