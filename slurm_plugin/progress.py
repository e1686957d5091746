"""Progress reporting for training jobs: one ``job_progress`` point per call.

From Python::

    from slurm_plugin.progress import report_progress
    report_progress(step, samples_per_s, epoch=e, steps_per_epoch=n, total_steps=t)

From a shell: ``wattbatch-progress --step 10 --samples-per-s 250``. The job id defaults to
``$SLURM_JOB_ID``; InfluxDB is the site's (``influx.*``, e.g. ``$WATTBATCH_INFLUX_URL``).
Point: ``job_progress,job_id=.. step=..i,samples_per_s=..,epoch=..i,steps_per_epoch=..i,
total_steps=..i,restart_count=..i,started_s=..`` where ``started_s`` is when this process
first reported (the start of this run of the job, after a requeue too).
A failure raises ``TelemetryError``: a training loop should catch it and carry on.
When the prolog gave the job a key (``progress_key``), the point carries its signature
``sig``: only then does reconcile attribute it to the job on a site that requires it.
"""

from __future__ import annotations

import functools
import os
import sys
import time

import click

from . import config, progress_key
from .errors import InputError, WattError
from .telemetry.influx import InfluxClient
from .telemetry.lineproto import Point

MEASUREMENT = "job_progress"
_started_s: dict[str, float] = {}


@functools.lru_cache(maxsize=1)
def _site_client() -> InfluxClient:
    return InfluxClient.from_config(config.load())


def progress_point(job_id: str, step: int, samples_per_s: float, *, epoch: int = 0,
                   steps_per_epoch: int = 0, total_steps: int = 0, restart_count: int = 0,
                   started_s: float, now_s: float) -> Point:
    return Point(MEASUREMENT, {"job_id": job_id},
                 {"step": int(step), "samples_per_s": float(samples_per_s), "epoch": int(epoch),
                  "steps_per_epoch": int(steps_per_epoch), "total_steps": int(total_steps),
                  "restart_count": int(restart_count), "started_s": float(started_s)}, now_s)


def report_progress(step: int, samples_per_s: float, *, epoch: int = 0,
                    steps_per_epoch: int = 0, total_steps: int = 0, job_id: str | None = None,
                    client: InfluxClient | None = None, now_s: float | None = None) -> None:
    """Write the job's progress now. ``job_id`` defaults to ``$SLURM_JOB_ID``."""
    job_id = job_id or os.environ.get("SLURM_JOB_ID", "")
    if not job_id:
        raise InputError("progress: job_id: not given and $SLURM_JOB_ID is unset; run inside a "
                         "Slurm job or pass job_id=")
    if step < 0 or samples_per_s < 0:
        raise InputError(f"progress: step={step}, samples_per_s={samples_per_s}: must not be "
                         "negative")
    now_s = int((time.time() if now_s is None else now_s) * 1000) / 1000   # signed to the ms
    started_s = _started_s.setdefault(job_id, now_s)
    restarts = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)
    point = progress_point(
        job_id, step, samples_per_s, epoch=epoch, steps_per_epoch=steps_per_epoch,
        total_steps=total_steps, restart_count=restarts, started_s=started_s, now_s=now_s)
    key_file = os.environ.get("WATTBATCH_PROGRESS_KEY_FILE") or \
        progress_key.job_key_path(config.load()["progress.job_key_dir"], job_id)
    if os.path.exists(key_file):
        key = progress_key.read_key_file(key_file, "job key")
        point = Point(point.measurement, point.tags, {
            **point.fields, progress_key.SIG_FIELD:
                progress_key.sign(key, job_id, now_s, point.fields)}, point.time_s)
    (client or _site_client()).write([point])


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--step", type=click.IntRange(min=0), required=True, help="Steps done so far.")
@click.option("--samples-per-s", type=click.FloatRange(min=0), required=True,
              help="Current throughput.")
@click.option("--epoch", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--steps-per-epoch", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--total-steps", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--job-id", default=None, help="Default: $SLURM_JOB_ID.")
def cli(step: int, samples_per_s: float, epoch: int, steps_per_epoch: int, total_steps: int,
        job_id: str | None) -> None:
    """Report a training job's progress (a job_progress point in InfluxDB)."""
    report_progress(step, samples_per_s, epoch=epoch, steps_per_epoch=steps_per_epoch,
                    total_steps=total_steps, job_id=job_id)


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
