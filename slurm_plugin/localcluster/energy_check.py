"""Per-job GPU energy against the emulated GPUs' truth, on the local cluster.

Submits groups of jobs of mixed workload classes that share one GPU (one shard, or an MPS
percentage, each), waits for them to end, and compares each job's reported ``job_energy`` (the
collector's split and the epilog's record in InfluxDB) with the true split the emulated GPUs
computed (``<node.state_dir>/emulated/true_job_energy.json``). Used by the real-cluster tests
and by ``benchmarks/bench_energy_split.py``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ..config import SiteConfig
from ..errors import CommandError
from ..slurm import actions
from ..slurm.cli import slurm
from ..telemetry.influx import InfluxClient, quote_str


def submit_group(cfg: SiteConfig, apps: list[str], node: str, gres_type: str,
                 duration_s: int, gres: str = "shard", count: int = 1) -> list[str]:
    """One job per class on the GPU typed ``gres_type`` of ``node``, each holding ``count``
    of its ``gres`` (shards, or ``"mps"`` percent: ``gres="mps", count=50`` is half of it)."""
    return [actions.submit(["-J", f"energy-{app}", "-w", node,
                            f"--gres={gres}:{gres_type}:{count}",
                            f"--comment=app={app}", "-o", "/dev/null", "--wrap",
                            f"sleep {duration_s}"], None, cfg) for app in apps]


def wait_records(cfg: SiteConfig, job_ids: list[str], timeout_s: float) -> dict[str, dict]:
    """job id -> its ``job_energy`` fields, once every job has one."""
    client = InfluxClient.from_config(cfg)
    ids = " OR ".join(f'"job_id" = {quote_str(j)}' for j in job_ids)
    deadline = time.monotonic() + timeout_s
    while True:
        series = client.query(f'SELECT * FROM "job_energy" WHERE {ids}')
        rows = {}
        for s in series:
            for values in s.values:
                row = dict(zip(s.columns, values))
                rows[str(row["job_id"])] = row
        if set(rows) >= set(job_ids) or time.monotonic() > deadline:
            return rows
        time.sleep(1.0)


def truth(cfg: SiteConfig) -> dict[str, float]:
    path = Path(cfg["node.state_dir"]) / "emulated" / "true_job_energy.json"
    return json.loads(path.read_text())


def admin_comment(cfg: SiteConfig, job_id: str) -> str:
    try:
        return slurm("sacct", ["-n", "-X", "-P", "-o", "AdminComment", "-j", job_id],
                     cfg).stdout.strip()
    except CommandError:
        return ""


def compare(records: dict[str, dict], true_j: dict[str, float]) -> dict:
    """Per-job relative error and the error of the group's sum."""
    errors = {j: r["energy_j"] / true_j[j] - 1 for j, r in records.items() if true_j.get(j)}
    total = sum(r["energy_j"] for r in records.values())
    true_total = sum(true_j.get(j, 0.0) for j in records)
    return {"jobs": len(records), "max_abs_error": max(map(abs, errors.values()), default=0.0),
            "errors": errors, "sum_error": total / true_total - 1 if true_total else None,
            "splits": sorted({str(r.get("split")) for r in records.values()})}
