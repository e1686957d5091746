"""Slurm epilog (node side): report the job's GPU energy and CO2.

Closes the job's ledger (kept by the collector; ``ledger``), writes one ``job_energy`` point
per node to InfluxDB and the summary ``wb-energy:energy_j=..;co2_g=..;shared_gpu_s=..;split=..`` into
the job's AdminComment, which ``sacct -o AdminComment`` shows and users cannot set (any other
text there is kept). Without a ledger entry it falls back to the prolog's energy counters. If
InfluxDB is down the point waits in ``<node.state_dir>/spool/`` and the next collector pass
sends it. Never fails the job: problems are one line on stderr, exit 0.
"""

from __future__ import annotations

import sys
import time
from typing import Mapping

from .. import config, progress_key
from ..errors import CommandError, TelemetryError, WattError
from ..telemetry.carbon import provider_from_config
from ..telemetry.influx import InfluxClient
from . import ledger, spool
from .jobenergy import (SUMMARY_PREFIX, JobEnergy, finish, forget, from_ledger, run_hook,
                        state_path)
from .source import make_source, node_name


def epilog(environ: Mapping[str, str]) -> JobEnergy | None:
    """Remove the job's progress key; report the job named by ``SLURM_JOB_ID`` on this
    node; None when it used no GPU."""
    job_id = environ.get("SLURM_JOB_ID", "")
    cfg = config.load(environ=environ)
    progress_key.remove_job_key(cfg["progress.job_key_dir"], job_id)
    state_dir, node, now_s = cfg["node.state_dir"], node_name(), time.time()
    if cfg["node.gpu_source"] == "nvml":
        _reset_caps(cfg, node, job_id)
    client = InfluxClient.from_config(cfg)
    carbon = provider_from_config(cfg, client)
    entry = ledger.close(state_dir, job_id)
    mine = (entry.get("nodes") or {}).get(node)
    if mine:
        result = from_ledger(job_id, node, {**mine, "app": entry.get("app", "")}, now_s, carbon,
                             cfg["carbon.max_age_s"])
    elif state_path(state_dir, job_id).exists():
        source = make_source(cfg["node.gpu_source"], node, cfg, cfg.source("node.gpu_source"))
        result = finish(source, node, job_id, state_dir, now_s, carbon, cfg["carbon.max_age_s"])
        print(f"wattbatch epilog: job {job_id}: no collector ledger on {node}; energy from the "
              "GPU counters since the prolog (a shared GPU is charged in full)", file=sys.stderr)
    else:
        return None
    forget(state_dir, job_id)
    point = result.point(environ.get("SLURM_JOB_USER", "") or environ.get("USER", ""),
                         cfg["cluster.name"], environ.get("SLURM_JOB_ACCOUNT", ""),
                         environ.get("SLURM_JOB_PARTITION", ""))
    try:
        client.write([point])
    except TelemetryError as exc:
        spool.keep(state_dir, f"{job_id}-{node}", [point])
        print(f"wattbatch epilog: job {job_id}: InfluxDB: {exc}; kept for the collector",
              file=sys.stderr)
    _admin_comment(cfg, job_id, result.summary())
    return result


def _reset_caps(cfg: config.SiteConfig, node: str, job_id: str) -> None:
    """The job's GPUs back to what the node's other jobs ask (the board's default when none
    asks a cap): at once, not at the collector's next refresh."""
    from ..telemetry.nvml import Nvml
    from .power_cap import apply_caps, desired_caps, model_clamped, node_jobs
    from .source import nvml_model
    try:
        with Nvml() as nvml:
            desired = desired_caps(node_jobs(cfg, node), node, range(nvml.count()),
                                   leaving=job_id, gpu_model="")
            failed = apply_caps(nvml, model_clamped(desired, lambda i: nvml_model(nvml, i)))
    except WattError as exc:
        failed = [f"power caps not reset: {exc}"]
    for line in failed:
        print(f"wattbatch epilog: job {job_id}: {line}", file=sys.stderr)


def _admin_comment(cfg: config.SiteConfig, job_id: str, summary: str) -> None:
    """Put ``summary`` into the job's AdminComment in the accounting database (the job has
    ended for slurmctld by now, so ``sacctmgr modify job``), replacing an earlier energy
    summary and keeping anything else there (``job_submit.lua``'s ``wb:uid=..`` record). What
    is there is read from slurmctld while it still lists the job: the database may not have
    the record yet (a short job on a busy controller), and writing over it would lose it.
    Users cannot set AdminComment."""
    from ..slurm.actions import admin_comment_now
    from ..slurm.cli import slurm

    try:
        try:
            old = admin_comment_now(job_id, cfg)
        except CommandError:
            old = None          # slurmctld not answering: the database's copy
        if old is None:
            old = slurm("sacct", ["-n", "-X", "-P", "-o", "AdminComment", "-j", job_id],
                        cfg).stdout.strip()
        kept = [p for p in old.split(" ") if p and not p.startswith(SUMMARY_PREFIX)]
        slurm("sacctmgr", ["-i", "modify", "job", "where", f"jobid={job_id}", "set",
                           f"AdminComment={' '.join([*kept, summary])}"], cfg)
    except CommandError as exc:
        print(f"wattbatch epilog: job {job_id}: AdminComment not set: {exc}", file=sys.stderr)


def main() -> int:
    return run_hook("epilog", epilog)


if __name__ == "__main__":
    sys.exit(main())
