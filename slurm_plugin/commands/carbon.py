"""``wattctl carbon import|show``: grid carbon intensity in InfluxDB."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import click

from .. import config
from ..record import asdict
from ..formats import carbon_csv
from ..telemetry.carbon import import_series, summary
from ..telemetry.influx import InfluxClient

IMPORT_TIMEOUT_S = 10.0


def _utc(t_s: float | None) -> str:
    if t_s is None:
        return "-"
    return datetime.fromtimestamp(t_s, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


@click.group("carbon")
def carbon() -> None:
    """Grid carbon intensity: load CSV files into InfluxDB, show what is stored, and the
    carbon budget against what jobs spent."""


@carbon.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--zone", required=True, help="Zone to store under, e.g. GB, DE-LU.")
@click.option("--basis", type=click.Choice(["lca", "direct"]), default="lca", show_default=True,
              help="Electricity Maps files: life-cycle or direct emissions as gco2_per_kwh.")
@click.option("--shift-to-now", is_flag=True,
              help="Move the series later so that it covers now, by whole weeks (each hour "
                   "keeps its hour of the week; whole days for a series shorter than a week): "
                   "a past year replayed as current data, for a demo or a test cluster. Job "
                   "CO2 and the policies use only intensities stored within "
                   "carbon.max_age_s.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def import_cmd(file: str, zone: str, basis: str, shift_to_now: bool, as_json: bool) -> None:
    """Load FILE (Electricity Maps CSV or Time,Carbon Intensity CSV) into InfluxDB.

    Idempotent: points already stored (same zone and time) are not written again. A bulk
    load waits at least 10 s per request whatever influx.timeout_s says."""
    t0 = time.perf_counter()
    series = carbon_csv.load(file, basis)  # type: ignore[arg-type]
    for note in series.notes():
        click.echo(f"warning: {note}", err=True)
    shift_s = 0
    if shift_to_now:
        series, shift_s = series.shifted_to(time.time())
    client = InfluxClient.from_config(config.load())
    client.timeout_s = max(client.timeout_s, IMPORT_TIMEOUT_S)
    result = import_series(client, series, zone)
    elapsed = time.perf_counter() - t0
    if as_json:
        click.echo(json.dumps(asdict(result) | {"elapsed_s": round(elapsed, 3),
                                                "shifted_s": shift_s}))
        return
    shifted = f" (moved {shift_s / 86400:g} days later)" if shift_s else ""
    click.echo(f"{result.path} ({result.format}) -> zone {zone}: {result.points} points "
               f"{_utc(result.first_s)} .. {_utc(result.last_s)}{shifted}: {result.new} new, "
               f"{result.present} already present ({result.updated} updated); "
               f"{result.written} written in {elapsed:.2f} s")


@carbon.command("show")
@click.option("--zone", default=None, help="Default: the site's carbon.zone.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def show(zone: str | None, as_json: bool) -> None:
    """What is stored for a zone, and the intensity in force now.

    Where the site sets carbon.file, that file is what the policies read for carbon.zone (not
    InfluxDB): for that zone the file's series is shown, and a file that cannot be read is an
    error."""
    cfg = config.load()
    zone = zone or cfg["carbon.zone"]
    from_file = bool(cfg["carbon.file"]) and zone.upper() == cfg["carbon.zone"].upper()
    client = InfluxClient.from_config(cfg)
    s = _file_summary(cfg, client, time.time()) if from_file else \
        summary(client, zone, time.time())
    where = {"source": "carbon.file", "file": cfg["carbon.file"]} if from_file else \
        {"source": "influxdb"}
    if as_json:
        click.echo(json.dumps(asdict(s) | where))
        return
    origin = (f"carbon.file {cfg['carbon.file']} (what the policies read; InfluxDB is not read "
              "while carbon.file is set)") if from_file else "InfluxDB"
    if not s.points:
        click.echo(f"zone {s.zone}: no carbon intensity stored in {origin}; load some with "
                   f"`wattctl carbon import FILE --zone {s.zone}`")
        return
    now = "no point at or before now" if s.now_gco2_per_kwh is None else \
        f"{s.now_gco2_per_kwh:.1f} gCO2eq/kWh (latest point at or before now)"
    if s.last_s is not None and s.now_s - s.last_s > 86400:
        now += f"; the series ended {_utc(s.last_s)}: add newer data"
    click.echo(f"zone {s.zone}: {origin}: {s.points} points {_utc(s.first_s)} .. "
               f"{_utc(s.last_s)}\n"
               f"gCO2eq/kWh: min {s.min:.1f}, mean {s.mean:.1f}, max {s.max:.1f}\n"
               f"now ({_utc(s.now_s)}): {now}")


def _file_summary(cfg, client: InfluxClient, now_s: float):
    """``summary`` of the site's ``carbon.file``, read as the policies read it; a file that
    cannot be read is a ``ConfigError`` naming the setting, its file and the fix."""
    import math

    from ..errors import ConfigError, InputError
    from ..telemetry.carbon import CarbonSummary, provider_from_config

    path = cfg["carbon.file"]
    try:
        provider = provider_from_config(cfg, client)
    except InputError as exc:
        raise ConfigError(cfg.source("carbon.file"), "carbon.file", path,
                          f"{exc}; the policies read this file, not InfluxDB: fix it, or set "
                          'carbon.file = "" to use what `wattctl carbon import` stored') from None
    except ConfigError as exc:
        raise ConfigError(cfg.source("carbon.file"), exc.key, exc.value, exc.fix) from None
    points = provider.forecast(-math.inf, math.inf)
    values = [v for _, v in points]
    if not values:
        return CarbonSummary(cfg["carbon.zone"], 0, None, None, None, None, None, now_s, None)
    return CarbonSummary(cfg["carbon.zone"], len(values), points[0][0], points[-1][0],
                         min(values), sum(values) / len(values), max(values), now_s,
                         provider.intensity_at(now_s))


@carbon.command("budget")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def budget(as_json: bool) -> None:
    """The carbon budget of this period ([greenflow] in the site config) against what jobs
    spent (job_energy), per account; the forecast to the period's end; what greenflow paced
    on at its last pass (carbon owed, weights); the jobs deferred or capped in it."""
    from ..report.carbon_budget import budget_report
    r = budget_report(config.load(), time.time())
    if as_json:
        click.echo(json.dumps(r))
        return

    def kg(v: float | None) -> str:
        return "-" if v is None else f"{v:,.3f} kg"
    p = r["period"]
    click.echo(f"cluster {r['cluster']}, zone {r['zone'] or '-'}: period "
               f"{_utc(p['start_s'])} .. {_utc(p['end_s'])}")
    click.echo(f"  budget {kg(r['budget_kg'])}, spent {kg(r['spent_kg'])}, forecast to the end "
               f"{kg(r['forecast_kg'])}" + ("" if r["budget_kg"] is not None else
                                            " (no budget: set [greenflow] budget_kg_per_day)"))
    pace = r["pacing"]
    if pace is not None:
        use = pace.get("limit_use")
        click.echo(f"  greenflow at {_utc(pace['at_s'])}: {kg(pace['owed_kg'])} owed by queued "
                   f"and running jobs (counted as spent"
                   + (f"; {use:.0%} of their time limits, as jobs use them" if use is not None
                      else "") + "), carbon weight "
                   + ("-" if pace["weight"] is None else f"{pace['weight']:.2f}")
                   + " (0: JCT alone counts, 1: carbon alone)")
    floor = (pace or {}).get("floor_kg")
    if floor is not None:
        click.echo(f"  floor {kg(floor)}: spent, plus the queued and running jobs' work at its "
                   "most efficient cap in the cleanest hour forecast; no schedule ends the "
                   "period below it")
        if r["budget_kg"] is not None and r["budget_kg"] < floor:
            click.echo(f"  warning: the budget ({kg(r['budget_kg'])}) is below the floor: it "
                       "cannot be kept; greenflow spends as little as it can", err=True)
    for a in r["accounts"]:
        w = (pace or {}).get("accounts", {}).get(a["account"])
        click.echo(f"  account {a['account'] or '-'}: spent {kg(a['spent_kg'])}"
                   + (f" of {kg(a['budget_kg'])}" if a["budget_kg"] is not None else "")
                   + (f", carbon weight {w:.2f}" if w is not None else ""))
    for key in ("deferred", "capped"):
        jobs = sorted({str(m["job_id"]) for m in r[key]})
        click.echo(f"  {key}: {len(jobs)} job(s)" + (f": {', '.join(jobs)}" if jobs else ""))
    for w in r["warnings"]:
        click.echo(f"  warning: {w}", err=True)
