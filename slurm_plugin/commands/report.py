"""``wattctl report``: GPU energy, carbon, GPU-hours and sharing per job, user, account or
partition over a period, with what the same jobs would have cost on exclusive GPUs."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import click

_COLUMNS = (("jobs", "jobs", "{:d}"), ("energy_kwh", "kWh", None), ("co2_kg", "kgCO2", None),
            ("gpu_hours", "GPU-h", None), ("shared_pct", "shared%", "{:.1f}"),
            ("exclusive_kwh", "excl kWh", None), ("exclusive_co2_kg", "excl kgCO2", None),
            ("saved_kwh", "saved kWh", None), ("saved_pct", "saved%", "{:.1f}"))


def _num(v: float) -> str:
    """Three decimals, or three significant digits for small figures (a test job's 0.00137)."""
    if v == 0 or abs(v) >= 0.1:
        return f"{v:,.3f}"
    return f"{v:.3g}"


def table(result: dict[str, Any]) -> str:
    """A fixed-width table, one row per group and a total."""
    rows = result["rows"] + [result["total"]]
    keys = [str(r["key"]) for r in rows]
    w0 = max(len(result["by"]), *(len(k) for k in keys))
    cells = [[("-" if r[k] is None else fmt.format(r[k]) if fmt else _num(r[k]))
              for k, _, fmt in _COLUMNS] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, (_, h, _) in enumerate(_COLUMNS)]
    head = result["by"].ljust(w0) + "".join("  " + h.rjust(w) for (_, h, _), w in
                                            zip(_COLUMNS, widths))
    lines = [head, "-" * len(head)]
    for i, (key, c) in enumerate(zip(keys, cells)):
        if i == len(rows) - 1:
            lines.append("-" * len(head))
        lines.append(key.ljust(w0) + "".join("  " + v.rjust(w) for v, w in zip(c, widths)))
    return "\n".join(lines)


def _when(t_s: float) -> str:
    return datetime.fromtimestamp(t_s).strftime("%Y-%m-%dT%H:%M:%S")


@click.command("report")
@click.option("--by", type=click.Choice(["job", "run", "user", "account", "partition"]),
              default="user", show_default=True,
              help="One row per ... (run: each run of a job, JOB@START: a job requeued or "
                   "resized has one per GPU count it ran on)")
@click.option("--since", default="now-7days", show_default=True,
              help="Jobs that ended at or after this time (Slurm's formats: now-1days, "
                   "2026-11-01, 2026-11-01T10:00, today, ...).")
@click.option("--until", default="now", show_default=True,
              help="... and before this time (same formats).")
@click.option("--cluster", "cluster_name", default=None,
              help="Only this cluster's jobs (default: site cluster.name; 'all' for every one).")
@click.option("--default-app", default="vgg16", show_default=True,
              help="Job class of the counterfactual for jobs that name none (vgg16: the middle "
                   "of the measured classes' power); see `wattctl policies` docs/physics.md.")
@click.option("--zone", default=None, help="Carbon zone of the figure's intensity line "
                                            "(default: site carbon.zone).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Write a PNG: energy and carbon per day stacked by account, "
                                 "with the grid's carbon intensity (needs wattbatch[plot]).")
@click.option("--batches", is_flag=True,
              help="Instead: the batch-size history of jobs in the period (ones): each advice "
                   "reconcile wrote and each batch change a job reported.")
@click.option("--job", "job_id", default=None,
              help="With --batches: only this job: a job id, an array task (14543_1) or an "
                   "array job id (14543: all its tasks), as sacct -j takes them.")
@click.pass_context
def report(ctx: click.Context, by: str, since: str, until: str, cluster_name: str | None,
           default_app: str, zone: str | None, as_json: bool, plot_file: Path | None,
           batches: bool, job_id: str | None) -> None:
    """GPU energy (kWh), carbon (kgCO2eq), GPU-hours and the share of GPU time spent on a
    shared GPU, per job, user, account or partition, from the job_energy records of jobs that
    ended in the period; and what the same jobs would have used on exclusive GPUs
    (calibrated physics by job class), so that the saving of sharing shows.

    With --batches only --since, --until, --job and --json apply; --job needs --batches."""
    from ..config import load
    from ..errors import InputError
    from ..physics import job_class
    from ..report.aggregate import report as aggregate
    from ..report.job_names import job_selector
    from ..report.period import parse_time_s
    from ..report.records import read_intensity, read_records
    from ..telemetry.influx import InfluxClient

    if job_id is not None and not batches:
        raise click.UsageError("--job applies to --batches only (the batch-size history of one "
                               "job); add --batches, or use --by job for energy per job")
    if batches:
        given = [f"--{name.replace('_', '-')}" for name, option in
                 (("by", "by"), ("cluster", "cluster_name"), ("default_app", "default_app"),
                  ("zone", "zone"), ("plot", "plot_file"))
                 if ctx.get_parameter_source(option) is not click.core.ParameterSource.DEFAULT]
        if given:
            raise click.UsageError(f"{', '.join(given)}: not with --batches (the batch-size "
                                   "history takes --since, --until, --job, --json); leave "
                                   f"{'it' if len(given) == 1 else 'them'} out")
        if job_id is not None:
            job_id = job_selector(job_id)
    now = time.time()
    since_s, until_s = parse_time_s(since, now, "--since"), parse_time_s(until, now, "--until")
    if since_s >= until_s:
        raise InputError(f"report: --since {since} ({_when(since_s)}) is not before --until "
                         f"{until} ({_when(until_s)}); give an earlier --since")
    try:
        job_class(default_app)
    except InputError as exc:
        raise InputError(f"report: --default-app: {str(exc).split(': ', 1)[1]}") from None
    if plot_file is not None:
        from ..report.plot import _pyplot
        _pyplot()       # a missing matplotlib is said before InfluxDB is asked anything
    cfg = load()
    client = InfluxClient.from_config(cfg)
    # influx.timeout_s is short so that submissions never wait; a report over months may take
    # longer than that to answer
    client.timeout_s = max(client.timeout_s, 30.0)
    if batches:
        from ..report.job_names import raw_job_ids
        job_ids, notes = raw_job_ids(job_id, cfg) if job_id else (None, [])
        for note in notes:
            click.echo(f"note: {note}", err=True)
        _batches(client, since_s, until_s, job_ids, as_json)
        return
    cluster = cfg["cluster.name"] if cluster_name is None else \
        (None if cluster_name == "all" else cluster_name)
    records = read_records(client, since_s, until_s, cluster)
    if by in ("job", "run"):
        from ..report.job_names import name_records
        records, notes = name_records(records, cfg)
        for note in notes:
            click.echo(f"note: {note}", err=True)
    result = aggregate(records, by, default_app)
    result.update({"since": _when(since_s), "until": _when(until_s), "since_s": since_s,
                   "until_s": until_s, "cluster": cluster or "all"})
    result["carbon_notes"] = _stale_carbon(client, zone or cfg["carbon.zone"], since_s, until_s,
                                           cfg["carbon.max_age_s"], result["total"])
    if plot_file is not None:
        from ..report.daily import per_day
        from ..report.plot import plot_daily
        zone = zone or cfg["carbon.zone"]
        daily = per_day(records, since_s, until_s)
        intensity = read_intensity(client, zone, daily["days"][0], until_s)
        plot_daily(daily, intensity, zone, plot_file,
                   f"GPU energy and carbon by account, {result['since']} to {result['until']}"
                   f" ({len(records)} job records, cluster {result['cluster']})")
        result["plot"] = str(plot_file)
    if as_json:
        click.echo(json.dumps(result, indent=1))
        return
    click.echo(f"{result['cluster']}: jobs that ended {result['since']} to {result['until']}"
               f": {len(records)} job records")
    if not records:
        click.echo("no job_energy records in the period (the epilog writes one per job per "
                   "node; is it wired in slurm.conf?)")
        return
    click.echo(table(result))
    t = result["total"]
    if t["co2_missing_records"]:
        click.echo(f"{t['co2_missing_records']} records carry no co2_g (no carbon intensity "
                   "at the epilog): their carbon is left out of kgCO2")
    for note in result["carbon_notes"]:
        click.echo(f"note: {note}")
    click.echo(f"exclusive GPUs: the same jobs alone on their GPUs (physics by job class, "
               f"{default_app} when none): sharing saved {_num(t['saved_kwh'])} kWh "
               f"({t['saved_pct']:.1f}%)")
    if plot_file is not None:
        click.echo(f"plot: {plot_file}")


def _stale_carbon(client, zone: str, since_s: float, until_s: float, max_age_s: float,
                  total: dict) -> list[str]:
    """A note when the zone's stored intensity was stale over the whole period: no point from
    ``max_age_s`` before it to its end. The collector and the epilog charge no CO2 at a stale
    intensity, so the jobs' carbon is missing, not wrong; a record that carries some was
    charged from another source (``carbon.file``) or by an earlier wattbatch."""
    if max_age_s <= 0 or not (total.get("co2_kg") or total.get("co2_missing_records")):
        return []
    from ..report.records import read_intensity
    if read_intensity(client, zone, since_s - max_age_s, until_s):
        return []
    return [f"zone {zone}: no carbon intensity stored from {max_age_s / 3600:g} h before the "
            "period to its end (carbon.max_age_s): no CO2 is charged at a stale intensity, so "
            "kgCO2 leaves out these jobs' energy; import the zone's intensities for the period "
            "(wattctl carbon import)"]


def _batches(client, since_s: float, until_s: float, job_ids: list[str] | None,
             as_json: bool) -> None:
    from ..report.batches import batch_table, read_batch_history

    history = read_batch_history(client, since_s, until_s, job_ids)
    if as_json:
        click.echo(json.dumps({"since": _when(since_s), "until": _when(until_s),
                               "jobs": history}, indent=1))
        return
    click.echo(f"batch sizes {_when(since_s)} to {_when(until_s)}: {len(history)} jobs")
    if history:
        click.echo(batch_table(history, _when))
