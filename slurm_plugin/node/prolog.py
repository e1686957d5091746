"""Slurm prolog (node side): record the job's GPU energy counters at its start.

Run by ``contrib/slurm/prolog.sh`` as ``python3 -m slurm_plugin.node.prolog``. When the site
signs progress (``progress.site_key_file``) it first writes the job's progress key. It never fails
the job: a non-zero prolog exit would drain the node, so every problem is one line on stderr
(slurmd's log) and exit 0.
"""

from __future__ import annotations

import sys
import time
from typing import Mapping

from .. import config, progress_key
from . import ledger
from .jobenergy import job_gpus, record_start, run_hook
from .source import make_source, node_name


def allocated_gpus(cfg: config.SiteConfig, job_id: str, node: str) -> tuple[int, ...]:
    """The GPU indexes a job holds on ``node`` from its allocation in Slurm (``squeue
    --json`` ``gres_detail``, read by the version-tolerant snapshot). Slurm sets no
    ``SLURM_JOB_GPUS`` for shard and MPS jobs (22.05), and the allocation is the one source
    that names their GPU on every release."""
    from ..slurm.snapshot import snapshot

    job = snapshot(cfg).jobs.get(job_id)
    return tuple(sorted({u.index for u in job.uses if u.node == node})) if job else ()


def job_key(environ: Mapping[str, str], cfg: config.SiteConfig) -> str:
    """With ``progress.site_key_file`` set: the job's progress key, readable by the job's
    user (``SLURM_JOB_UID``/``SLURM_JOB_GID``) only (``progress_key``)."""
    if not cfg["progress.site_key_file"]:
        return ""
    job_id = environ.get("SLURM_JOB_ID", "")
    path = progress_key.write_job_key(cfg["progress.site_key_file"], cfg["progress.job_key_dir"],
                                      job_id, int(environ["SLURM_JOB_UID"]),
                                      int(environ.get("SLURM_JOB_GID") or -1))
    return f"job {job_id}: progress key {path}; "


def prolog(environ: Mapping[str, str]) -> str:
    """Write the job's progress key (when the site signs progress) and record the start
    energy of the job named by ``SLURM_JOB_ID``; returns what it did."""
    job_id = environ.get("SLURM_JOB_ID", "")
    cfg = config.load(environ=environ)
    keyed = job_key(environ, cfg)
    gpus = job_gpus(environ)
    if not gpus and environ.get("SLURM_JOB_GRES") not in (None, "", "(null)"):
        gpus = allocated_gpus(cfg, job_id, node_name())     # shard / MPS jobs
    if not gpus:
        return f"{keyed}job {job_id}: no GPUs, nothing to record"
    source = make_source(cfg["node.gpu_source"], node_name(), cfg,
                         cfg.source("node.gpu_source"))
    ledger.reopen(cfg["node.state_dir"], job_id)        # a run after a requeue: a new ledger
    record_start(source, job_id, gpus, cfg["node.state_dir"], time.time())
    return f"{keyed}job {job_id}: recorded start energy of GPUs {list(gpus)}"


def main() -> int:
    return run_hook("prolog", prolog)


if __name__ == "__main__":
    sys.exit(main())
