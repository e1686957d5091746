"""Carbon intensity in InfluxDB: the provider that reads it, the import of a series, the site's
provider (a CSV file or InfluxDB) and the one policies plan with. The interface and the
in-memory provider are ``formats.carbon_series``'s, shared with the simulator.

Stored in InfluxDB as ``carbon_intensity,zone=Z gco2_per_kwh=..[,gco2_per_kwh_direct=..] <t>``.
``import_series`` is idempotent by timestamp: it asks which timestamps are already stored and
writes only new points and points whose value changed (a point with the same measurement, tags
and time replaces the stored one, so even a repeated write stores nothing twice).
"""

from __future__ import annotations

from ..errors import ConfigError, InputError
from ..formats.carbon_series import CarbonProvider, SeriesCarbon
from ..record import record
from .influx import InfluxClient, quote_str
from .lineproto import Point, time_ns

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Any

    from ..formats.carbon_csv import CarbonPoint, CarbonSeries
    from ..formats.carbon_forecast import StoredThenForecast

MEASUREMENT = "carbon_intensity"


class InfluxCarbon:
    """A provider reading ``carbon_intensity`` from InfluxDB."""

    def __init__(self, client: InfluxClient, zone: str) -> None:
        self.client = client
        self.zone = zone
        self.warnings: list[str] = []    # stored rows skipped: time or value not a number

    def _where(self) -> str:
        return f'"zone" = {quote_str(self.zone)}'

    def intensity_at(self, t_s: float) -> float | None:
        series = self.client.query(
            f'SELECT last("gco2_per_kwh") FROM "{MEASUREMENT}" WHERE {self._where()} '
            f"AND time <= {time_ns(t_s)}")
        rows = series[0].rows() if series else ()
        value = rows[0].get("last") if rows else None
        return None if value is None else self._number(value, "last(gco2_per_kwh)", t_s)

    def forecast(self, start_s: float, end_s: float) -> tuple[tuple[float, float], ...]:
        series = self.client.query(
            f'SELECT "gco2_per_kwh" FROM "{MEASUREMENT}" WHERE {self._where()} '
            f"AND time > {time_ns(start_s)} AND time <= {time_ns(end_s)}")
        out = []
        for s in series:
            for row in s.rows():
                t, v = row.get("time"), row.get("gco2_per_kwh")
                if v is None:
                    continue
                t = self._number(t, "time", t)
                v = self._number(v, "gco2_per_kwh", t) if t is not None else None
                if t is not None and v is not None:
                    out.append((t, v))
        return tuple(out)

    def _number(self, value: Any, column: str, at: object) -> float | None:
        """A stored value as a float, or None with a warning (bounds are the reader's:
        ``telemetry.bounds``)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.warnings.append(f"telemetry: {MEASUREMENT},zone={self.zone} at {at}: "
                                 f"{column} = {value!r} is not a number; point not used")
            return None
        return float(value)


def carbon_point(zone: str, p: CarbonPoint) -> Point:
    fields: dict[str, float] = {"gco2_per_kwh": float(p.gco2_per_kwh)}
    if p.gco2_per_kwh_direct is not None:
        fields["gco2_per_kwh_direct"] = float(p.gco2_per_kwh_direct)
    return Point(MEASUREMENT, {"zone": zone}, fields, p.time_s)


@record
class ImportResult:
    zone: str
    path: str
    format: str
    points: int          # distinct timestamps in the file
    new: int             # not stored before
    present: int         # already stored (same timestamp)
    updated: int         # of ``present``, stored with another value and rewritten
    written: int         # points sent to InfluxDB by this import
    first_s: float
    last_s: float
    skipped: int = 0     # rows of the file without a value (empty or NaN), not stored


def import_series(client: InfluxClient, series: CarbonSeries, zone: str) -> ImportResult:
    """Store a series under ``zone``; ask first what is there, write only what is missing."""
    if not zone:
        raise InputError(f"carbon import: {series.path}: zone is empty; give --zone, e.g. GB")
    from ..formats.carbon_csv import zone_matches
    if not zone_matches(series.zone, zone):
        raise InputError(f"carbon import: {series.path}: the file's Zone Id is {series.zone!r} "
                         f"but --zone is {zone!r}; give --zone {series.zone}")
    client.create_database()
    first, last = series.points[0].time_s, series.points[-1].time_s
    stored: dict[int, float] = {}
    for s in client.query(f'SELECT "gco2_per_kwh" FROM "{MEASUREMENT}" WHERE "zone" = '
                          f"{quote_str(zone)} AND time >= {time_ns(first)} "
                          f"AND time <= {time_ns(last)}"):
        for t, v in s.values:
            stored[time_ns(t)] = v
    todo, present, updated = [], 0, 0
    for p in series.points:
        old = stored.get(time_ns(p.time_s))
        if old is None:
            todo.append(p)
        else:
            present += 1
            if abs(float(old) - p.gco2_per_kwh) > 1e-9 * max(1.0, abs(p.gco2_per_kwh)):
                updated += 1
                todo.append(p)
    written = client.write(carbon_point(zone, p) for p in todo)
    return ImportResult(zone, series.path, series.format, len(series.points),
                        len(series.points) - present, present, updated, written, first, last,
                        len(series.skipped))


@record
class CarbonSummary:
    zone: str
    points: int
    first_s: float | None
    last_s: float | None
    min: float | None
    mean: float | None
    max: float | None
    now_s: float
    now_gco2_per_kwh: float | None


def summary(client: InfluxClient, zone: str, now_s: float) -> CarbonSummary:
    """Count, span and range of a zone's stored series, and the value in force at ``now_s``."""
    where = f'WHERE "zone" = {quote_str(zone)}'
    f = '"gco2_per_kwh"'
    agg = client.query(f'SELECT count({f}), min({f}), mean({f}), max({f}) FROM "{MEASUREMENT}" '
                       f"{where}; SELECT first({f}) FROM \"{MEASUREMENT}\" {where}; "
                       f'SELECT last({f}) FROM "{MEASUREMENT}" {where}')
    if not agg:
        return CarbonSummary(zone, 0, None, None, None, None, None, now_s, None)
    row = agg[0].rows()[0]
    first_s = agg[1].values[0][0] if len(agg) > 1 else None
    last_s = agg[2].values[0][0] if len(agg) > 2 else None
    now = InfluxCarbon(client, zone).intensity_at(now_s)
    return CarbonSummary(zone, int(row["count"]), first_s, last_s, row["min"], row["mean"],
                         row["max"], now_s, now)


def provider_from_config(cfg: Any, client: InfluxClient) -> CarbonProvider:
    """``carbon.file`` set: that CSV file (zone ``carbon.zone``); else InfluxDB."""
    if cfg["carbon.file"]:
        from ..formats.carbon_csv import load as load_csv, zone_matches   # file sites only
        series = load_csv(cfg["carbon.file"])
        if not zone_matches(series.zone, cfg["carbon.zone"]):
            raise ConfigError("site config", "carbon.file", cfg["carbon.file"],
                              f"the file's Zone Id is {series.zone!r}, carbon.zone is "
                              f"{cfg['carbon.zone']!r}; set carbon.zone = {series.zone!r} or "
                              f"give that zone's file")
        return SeriesCarbon.from_series(series, cfg["carbon.zone"])
    return InfluxCarbon(client, cfg["carbon.zone"])


def planning_provider(cfg: Any, client: InfluxClient) -> "StoredThenForecast":
    """The site's carbon provider (``provider_from_config``) as policies plan with it: stored
    points ahead, then the built-in forecast."""
    from ..formats.carbon_forecast import StoredThenForecast
    return StoredThenForecast(provider_from_config(cfg, client))
