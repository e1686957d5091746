"""Slurm epilog (node side): write the job's GPU energy and CO2 to InfluxDB.

``job_energy,job_id=..,user=..,cluster=..,node=.. energy_j=..,co2_g=..,duration_s=..,gpus=..``
with CO2 from the mean grid carbon intensity over the job's run (``carbon.zone``; left out
when no intensity is known). Never fails the job: problems are one line on stderr, exit 0.
"""

from __future__ import annotations

import sys
import time
from typing import Mapping

from .. import config, progress_key
from ..telemetry.carbon import provider_from_config
from ..telemetry.influx import InfluxClient
from .jobenergy import JobEnergy, finish, forget, job_gpus, run_hook
from .source import make_source, node_name


def epilog(environ: Mapping[str, str]) -> JobEnergy | None:
    """Remove the job's progress key; finish the job named by ``SLURM_JOB_ID``; None for a
    job without GPUs."""
    job_id = environ.get("SLURM_JOB_ID", "")
    cfg = config.load(environ=environ)
    progress_key.remove_job_key(cfg["progress.job_key_dir"], job_id)
    if not job_gpus(environ):
        return None
    client = InfluxClient.from_config(cfg)
    node = node_name()
    source = make_source(cfg["node.gpu_source"], node, cfg)
    result = finish(source, node, job_id, cfg["node.state_dir"], time.time(),
                    provider_from_config(cfg, client))
    user = environ.get("SLURM_JOB_USER", "") or environ.get("USER", "")
    client.write([result.point(user, cfg["cluster.name"])])
    forget(cfg["node.state_dir"], job_id)
    return result


def main() -> int:
    return run_hook("epilog", epilog)


if __name__ == "__main__":
    sys.exit(main())
