"""Snapshot of the live cluster (model.Cluster) and the accounting history.

Two calls: ``sinfo --json`` for nodes and ``squeue --json`` for jobs. ``squeue --json`` is the
only source of per-job GPU indexes (``gres_detail``) short of one ``scontrol show job -d`` per
job; it returns every job whatever ``-j``/``-t`` say (Slurm 22.05: ~236 ms and 6 MB at 2,000
jobs), against 16 ms for ``squeue -h -o``, which has no GPU indexes. A policy needs to know which
job holds which GPU (co-location, shards pinned by index), so the snapshot pays for the JSON once
per decision; parsing 10,000 jobs takes well under a second (benchmarks/bench_parse.py).
"""

from __future__ import annotations

import time
from types import MappingProxyType

from ..config import SiteConfig
from ..model import Cluster
from .cli import slurm, slurm_json
from .parse import SACCT_FIELDS, AcctRecord, attach_jobs, parse_jobs, parse_nodes, parse_sacct


def build_cluster(sinfo: dict, squeue: dict, name: str, taken_s: float,
                  gpu_model: str = "V100") -> Cluster:
    """Pure: the two JSON documents -> Cluster with GPU holders filled and active jobs only."""
    jobs = parse_jobs(squeue, active_only=True)
    nodes = attach_jobs(parse_nodes(sinfo, gpu_model), jobs)
    return Cluster(nodes=nodes, jobs=MappingProxyType({j.job_id: j for j in jobs}),
                   taken_s=taken_s, name=name)


def snapshot(cfg: SiteConfig, gpu_model: str = "V100") -> Cluster:
    """Nodes (state, GPUs by index and type, who holds them) and pending/running jobs."""
    taken_s = time.time()
    sinfo, squeue = slurm_json("sinfo", [], cfg), slurm_json("squeue", [], cfg)
    return build_cluster(sinfo, squeue, cfg["cluster.name"], taken_s, gpu_model)


def history(cfg: SiteConfig, since: str = "now-1days", users: str | None = None
            ) -> tuple[AcctRecord, ...]:
    """Finished and running jobs from ``sacct -P`` (exit codes are right there, unlike
    ``sacct --json``). ``since`` is any sacct ``--starttime``; held jobs are absent."""
    args = ["-P", "-X", f"--format={','.join(SACCT_FIELDS)}", f"--starttime={since}"]
    args += [f"--user={users}"] if users else ["--allusers"]
    return parse_sacct(slurm("sacct", args, cfg).stdout)
