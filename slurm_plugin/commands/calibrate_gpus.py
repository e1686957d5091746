"""``wattctl calibrate-gpus -p PARTITION [--minutes M] [--json] [--site-file F]``: measure each
GPU model of a partition through Slurm and write its fitted constants into the site's own GPU
model file (``calibrate_run.py``; docs/gpu-models.md, "Calibrating a site's GPUs")."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click


@click.command("calibrate-gpus")
@click.option("--partition", "-p", required=True, help="Calibrate the GPU models of this "
              "partition's nodes (one job per model).")
@click.option("--minutes", type=click.FloatRange(2, 120), default=10, show_default=True,
              help="The whole run ends within this many minutes: each job's time limit, and "
                   "how long the jobs are waited for (pending time included).")
@click.option("--site-file", type=click.Path(path_type=Path), default=None,
              help="The site's GPU model file to write (default: the site key "
                   "physics.site_gpu_models).")
@click.option("--work-dir", type=click.Path(path_type=Path), default=None,
              help="Where the jobs write their results: a directory every node sees "
                   "(default: a new one beside the site file).")
@click.option("--python", "python", default=sys.executable, show_default=True,
              help="Python with wattbatch installed, as the nodes see it.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON: per model "
              "each constant shipped and calibrated, with its fit error.")
def calibrate_gpus(partition: str, minutes: float, site_file: Path | None,
                   work_dir: Path | None, python: str, as_json: bool) -> None:
    """One short job per GPU model of a partition: idle power, power at stepped load, a fixed
    workload's time and power under caps over the settable range; the fitted constants go
    into the site's GPU model file (the shipped catalogue is not changed). Nothing is written
    unless every model's measurements are sane."""
    from .. import config
    from ..errors import ConfigError
    from ..physics.site_models import SITE_KEY
    from .calibrate_run import print_summary, run_calibration

    cfg = config.load()
    if site_file is not None:
        path, origin = str(site_file.resolve()), "--site-file"
    else:
        path, origin = cfg[SITE_KEY], cfg.source(SITE_KEY)
    if not path:
        raise ConfigError(origin, SITE_KEY, path, "no site GPU model file to write: set the "
                          "key (an absolute path) or give --site-file")
    summary = run_calibration(cfg, partition, minutes, path, origin, work_dir, python,
                              lambda line: click.echo(line, err=True))
    if as_json:
        click.echo(json.dumps(summary, indent=1))
    else:
        print_summary(summary, click.echo)
