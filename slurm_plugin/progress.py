"""Progress reporting for training jobs: one ``job_progress`` point per call.

From Python::

    from slurm_plugin.progress import report_progress
    report_progress(step, samples_per_s, epoch=e, steps_per_epoch=n, total_steps=t)

From a shell: ``wattbatch-progress --step 10 --samples-per-s 250``. The job id defaults to
``$SLURM_JOB_ID``; InfluxDB is the site's (``influx.*``, e.g. ``$WATTBATCH_INFLUX_URL``).
Point: ``job_progress,job_id=.. step=..i,samples_per_s=..,epoch=..i,steps_per_epoch=..i,
total_steps=..i,restart_count=..i,started_s=..`` where ``started_s`` is when this process
first reported (the start of this run of the job, after a requeue too).
A failure to write raises ``TelemetryError``: a training loop should catch it and carry on.

**Batch-size advice** (the ``ones`` policy): a job that can change its global batch without a
restart passes ``batch_size=CURRENT``; the point then records it, and the call returns the
scheduler's current advice for the job (``Advice``: the batch to run at and the factor for the
learning rate) or None (no advice, or InfluxDB unreachable: reading advice never raises). A
job that never passes its batch is never advised and keeps its batch. Reconcile writes the
advice (``job_advice,job_id=.. batch_size=..i,lr_scale=..,from_batch_size=..i,why=".."``);
a job restarted on another GPU count gets it in ``$WATTBATCH_BATCH_SIZE`` and
``$WATTBATCH_LR_SCALE`` (the script wattbatch renders for a job with a batch range reads it at
start). A job with a key takes only advice signed with it, within ``$WATTBATCH_BATCH_RANGE``.
From a shell:
``wattbatch-progress --step S --samples-per-s R --batch-size B`` or
``wattbatch-progress --advice`` print the advice as JSON (``null`` for none).
When the prolog gave the job a key (``progress_key``), the point carries its signature
``sig``: only then does reconcile attribute it to the job on a site that requires it.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from dataclasses import dataclass

import click

from . import config, progress_key
from .errors import InputError, WattError
from .telemetry.influx import InfluxClient, quote_str
from .telemetry.lineproto import Point

MEASUREMENT = "job_progress"
ADVICE = "job_advice"
_started_s: dict[str, float] = {}


@functools.lru_cache(maxsize=1)
def _site_client() -> InfluxClient:
    return InfluxClient.from_config(config.load())


@dataclass(frozen=True)
class Advice:
    """The scheduler's current advice for a job: run at global batch ``batch_size`` and
    multiply the learning rate by ``lr_scale`` (relative to ``from_batch_size``, the batch the
    job ran at when it was decided; 0: not known)."""

    batch_size: int
    lr_scale: float = 1.0
    from_batch_size: int = 0
    time_s: float = 0.0
    why: str = ""

    def as_dict(self) -> dict:
        return {"batch_size": self.batch_size, "lr_scale": self.lr_scale,
                "from_batch_size": self.from_batch_size, "time_s": self.time_s, "why": self.why}


def progress_point(job_id: str, step: int, samples_per_s: float, *, epoch: int = 0,
                   steps_per_epoch: int = 0, total_steps: int = 0, restart_count: int = 0,
                   started_s: float, now_s: float, batch_size: int | None = None) -> Point:
    fields = {"step": int(step), "samples_per_s": float(samples_per_s), "epoch": int(epoch),
              "steps_per_epoch": int(steps_per_epoch), "total_steps": int(total_steps),
              "restart_count": int(restart_count), "started_s": float(started_s)}
    if batch_size is not None:
        fields["batch_size"] = int(batch_size)
    return Point(MEASUREMENT, {"job_id": job_id}, fields, now_s)


def advice_point(job_id: str, batch_size: int, lr_scale: float | None, *, now_s: float,
                 from_batch_size: int | None = None, why: str = "",
                 key: bytes | None = None) -> Point:
    """The ``job_advice`` point reconcile writes for a ``batch`` action (and a resize that
    sets a batch); signed with the job's key (``progress_key``) when ``key`` is given, so that
    a job on a site with progress keys takes advice only from the site."""
    if isinstance(batch_size, bool) or int(batch_size) < 1:
        raise InputError(f"progress: job_advice: batch_size = {batch_size!r}: give a whole "
                         "number >= 1")
    now_s = int(now_s * 1000) / 1000        # signed to the ms
    fields = {"batch_size": int(batch_size),
              "lr_scale": float(1.0 if lr_scale is None else lr_scale),
              "from_batch_size": int(from_batch_size or 0), "why": why}
    if key is not None:
        fields[progress_key.SIG_FIELD] = progress_key.sign(key, job_id, now_s, fields)
    return Point(ADVICE, {"job_id": job_id}, fields, now_s)


def read_advice(client: InfluxClient, job_id: str, key: bytes | None = None,
                batch_range: tuple[int, int] | None = None) -> Advice | None:
    """The newest advice for ``job_id`` (None: none, not signed with ``key`` when given, or
    outside ``batch_range``). Raises ``TelemetryError``."""
    from .telemetry.bounds import Rejected, checked

    where = f"{ADVICE},job_id={job_id}"
    # grouped by the tag, so that job_id is no column of the row (not a signed field)
    for s in client.query(f'SELECT * FROM "{ADVICE}" WHERE "job_id" = {quote_str(job_id)} '
                          'GROUP BY "job_id" ORDER BY time DESC LIMIT 1'):
        for row in s.rows():
            if key is not None and not progress_key.verify(
                    key, job_id, float(row.get("time") or 0.0),
                    {k: v for k, v in row.items() if k not in ("time", "job_id")}):
                return None
            try:
                batch = int(checked(row.get("batch_size"), "batch_size", where))
                lr = checked(row.get("lr_scale"), "lr_scale", where, 1.0)
                base = int(checked(row.get("from_batch_size"), "batch_size", where, 0.0))
                taken = checked(row.get("time"), "time", where, 0.0)
            except Rejected:
                return None
            if batch < 1 or (batch_range is not None
                             and not batch_range[0] <= batch <= batch_range[1]):
                return None
            why = row.get("why")
            return Advice(batch, lr, base, taken, why if isinstance(why, str) else "")
    return None


def current_advice(job_id: str | None = None, *, client: InfluxClient | None = None
                   ) -> Advice | None:
    """The scheduler's current advice for the job (default ``$SLURM_JOB_ID``); None when there
    is none or it cannot be read (never raises: a training job must not stop for it). Where
    the job has a key (``progress_key``), only advice signed with it counts; where its script
    has ``$WATTBATCH_BATCH_RANGE``, only advice within that range."""
    job_id = job_id or os.environ.get("SLURM_JOB_ID", "")
    if not job_id:
        return None
    try:
        key_file = _key_file(job_id)
        key = progress_key.read_key_file(key_file, "job key") \
            if os.path.exists(key_file) else None
        return read_advice(client or _site_client(), job_id, key,
                           _batch_range(os.environ.get("WATTBATCH_BATCH_RANGE", "")))
    except Exception:       # noqa: BLE001 - InfluxDB down, a bad site config: no advice
        return None


def _key_file(job_id: str) -> str:
    return os.environ.get("WATTBATCH_PROGRESS_KEY_FILE") or \
        progress_key.job_key_path(config.load()["progress.job_key_dir"], job_id)


def _batch_range(text: str) -> tuple[int, int] | None:
    lo, _, hi = text.strip().partition("-")
    return (int(lo), int(hi)) if lo.isdigit() and hi.isdigit() else None


def report_progress(step: int, samples_per_s: float, *, epoch: int = 0,
                    steps_per_epoch: int = 0, total_steps: int = 0, job_id: str | None = None,
                    client: InfluxClient | None = None, now_s: float | None = None,
                    batch_size: int | None = None) -> Advice | None:
    """Write the job's progress now. ``job_id`` defaults to ``$SLURM_JOB_ID``. With
    ``batch_size`` (the global batch the job runs at now) the point records it and the call
    returns the scheduler's current advice (None: none, or not readable); without, None."""
    job_id = job_id or os.environ.get("SLURM_JOB_ID", "")
    if not job_id:
        raise InputError("progress: job_id: not given and $SLURM_JOB_ID is unset; run inside a "
                         "Slurm job or pass job_id=")
    if step < 0 or samples_per_s < 0:
        raise InputError(f"progress: step={step}, samples_per_s={samples_per_s}: must not be "
                         "negative")
    if batch_size is not None and (isinstance(batch_size, bool) or int(batch_size) != batch_size
                                   or batch_size < 1):
        raise InputError(f"progress: batch_size={batch_size!r}: give a whole number >= 1")
    now_s = int((time.time() if now_s is None else now_s) * 1000) / 1000   # signed to the ms
    started_s = _started_s.setdefault(job_id, now_s)
    restarts = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)
    point = progress_point(
        job_id, step, samples_per_s, epoch=epoch, steps_per_epoch=steps_per_epoch,
        total_steps=total_steps, restart_count=restarts, started_s=started_s, now_s=now_s,
        batch_size=batch_size)
    key_file = _key_file(job_id)
    if os.path.exists(key_file):
        key = progress_key.read_key_file(key_file, "job key")
        point = Point(point.measurement, point.tags, {
            **point.fields, progress_key.SIG_FIELD:
                progress_key.sign(key, job_id, now_s, point.fields)}, point.time_s)
    client = client or _site_client()
    client.write([point])
    return None if batch_size is None else current_advice(job_id, client=client)


def shell_lines(advice: Advice | None) -> str:
    """``export`` lines for a job script (``eval "$(wattbatch-progress --advice --shell)"``):
    nothing without advice."""
    if advice is None:
        return ""
    return (f"export WATTBATCH_BATCH_SIZE={advice.batch_size}\n"
            f"export WATTBATCH_LR_SCALE={advice.lr_scale:.6g}\n")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--step", type=click.IntRange(min=0), default=None, help="Steps done so far.")
@click.option("--samples-per-s", type=click.FloatRange(min=0), default=None,
              help="Current throughput.")
@click.option("--epoch", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--steps-per-epoch", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--total-steps", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=None,
              help="The global batch the job runs at now; prints the scheduler's advice.")
@click.option("--advice", "advice_only", is_flag=True,
              help="Only print the scheduler's current advice (JSON; null for none).")
@click.option("--shell", "as_shell", is_flag=True,
              help="With --advice: print export lines (WATTBATCH_BATCH_SIZE, "
                   "WATTBATCH_LR_SCALE) instead, nothing without advice.")
@click.option("--job-id", default=None, help="Default: $SLURM_JOB_ID.")
def cli(step: int | None, samples_per_s: float | None, epoch: int, steps_per_epoch: int,
        total_steps: int, batch_size: int | None, advice_only: bool, as_shell: bool,
        job_id: str | None) -> None:
    """Report a training job's progress (a job_progress point in InfluxDB); with
    --batch-size, or --advice alone, print the scheduler's batch-size advice as JSON."""
    if advice_only:
        advice = current_advice(job_id)
        if as_shell:
            click.echo(shell_lines(advice), nl=False)
        else:
            click.echo(json.dumps(None if advice is None else advice.as_dict()))
        return
    if step is None or samples_per_s is None:
        raise click.UsageError("give --step and --samples-per-s (or --advice)")
    advice = report_progress(step, samples_per_s, epoch=epoch, steps_per_epoch=steps_per_epoch,
                             total_steps=total_steps, job_id=job_id, batch_size=batch_size)
    if batch_size is not None:
        click.echo(json.dumps(None if advice is None else advice.as_dict()))


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except WattError as exc:
        click.echo(f"wattbatch-progress: error: {exc}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
