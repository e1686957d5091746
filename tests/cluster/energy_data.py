"""Known accounting data for the report and dashboard tests, written to a real InfluxDB.

Three days up to ``end_s``: hourly GB carbon intensity, 4 nodes x 4 GPUs of ``gpu`` readings
every 10 minutes over the last 6 hours, ``job_energy`` points of 30 jobs (three accounts and
users, two partitions, exclusive jobs, pairs sharing a GPU, a two-node job, jobs with no app and
one with no co2_g) and ``reconcile_action`` points (from ``outcome_points``), and ``job_progress`` of two running jobs. ``expected`` says what each holds.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from slurm_plugin.telemetry.actions import outcome_points
from slurm_plugin.telemetry.lineproto import Point

ACCOUNTS = ("physics", "bio", "cs")
USERS = ("alice", "bob", "carol")
APPS = ("resnet18", "lstm", "vgg16", "")
NODES = ("gpu1", "gpu2", "gpu3", "gpu4")
CLUSTER = "wattbatch"
ZONE = "GB"
DAY_S = 86400.0


@dataclass
class Data:
    end_s: float
    points: list[Point] = field(default_factory=list)
    jobs: dict[str, list[dict]] = field(default_factory=dict)   # job id -> its records' fields+tags
    actions: list[dict] = field(default_factory=list)


def intensity(t_s: float) -> float:
    return 200.0 + 120.0 * math.sin(2 * math.pi * (t_s % DAY_S) / DAY_S)


def build(end_s: float) -> Data:
    end_s = end_s - end_s % 3600
    d = Data(end_s)
    start_s = end_s - 3 * DAY_S
    for h in range(0, 3 * 24 + 1):
        t = start_s + h * 3600
        d.points.append(Point("carbon_intensity", {"zone": ZONE},
                              {"gco2_per_kwh": intensity(t)}, t))
    for k in range(36):
        t = end_s - 6 * 3600 + k * 600
        for n, node in enumerate(NODES):
            for g in range(4):
                util = float((n * 4 + g) * 5 + k % 3)
                d.points.append(Point("gpu", {"cluster": CLUSTER, "node": node, "gpu": str(g)},
                                      {"power_w": 40.0 + 2.0 * util, "energy_j": 1000.0 * k,
                                       "util_pct": util, "mem_used_mib": 100.0,
                                       "power_limit_w": 250.0}, t))
    for k in range(12):                      # two running jobs report progress
        t = end_s - 2 * 3600 + k * 600
        for job_id in ("201", "202"):
            d.points.append(Point("job_progress", {"job_id": job_id},
                                  {"step": 100 * k, "samples_per_s": 50.0 + k,
                                   "epoch": k // 4, "steps_per_epoch": 400, "total_steps": 4800,
                                   "restart_count": 0, "started_s": end_s - 2 * 3600}, t))
    job = 100
    for i in range(24):                      # exclusive and shared jobs, 3 per 9 hours
        job += 1
        end = start_s + 3 * 3600 * (i + 1)
        duration = 2 * 3600.0
        shared = i % 3 == 0                  # jobs 101, 104, ... share with their twin below
        node = NODES[i % 4]
        # the epilog's split values (docs/energy.md): each one at least once
        split = ("util", "util-solo", "util-class", "shards")[i // 3 % 4] if shared else \
            "counters" if i in (7, 8) else "exclusive"
        rec = {"job_id": str(job), "user": USERS[i % 3], "account": ACCOUNTS[i % 3],
               "partition": "gpu" if i % 4 else "debug", "cluster": CLUSTER, "node": node,
               "app": APPS[i % 4], "energy_j": 150.0 * duration * (0.6 if shared else 1.0),
               "duration_s": duration, "gpus": 1, "gpu_s": duration,
               "shared_gpu_s": duration if shared else 0.0,
               "idle_j": 41.0 * duration * (0.5 if shared else 1.0),
               "split": split, "time": end}
        if i != 5:
            rec["co2_g"] = rec["energy_j"] / 3.6e6 * intensity(end - duration / 2)
        d.jobs[str(job)] = [rec]
        if shared:                           # its co-runner on the same GPU, other account
            job += 1
            twin = dict(rec, job_id=str(job), user=USERS[(i + 1) % 3],
                        account=ACCOUNTS[(i + 1) % 3], app="resnet18",
                        energy_j=60.0 * duration)
            twin["co2_g"] = twin["energy_j"] / 3.6e6 * intensity(end - duration / 2)
            d.jobs[str(job)] = [twin]
    job += 1                                 # one job on two nodes, 4 GPUs each
    two = [{"job_id": str(job), "user": "alice", "account": "physics", "partition": "gpu",
            "cluster": CLUSTER, "node": node, "app": "vgg16", "energy_j": 4 * 120.0 * 3600,
            "duration_s": 3600.0, "gpus": 4, "gpu_s": 4 * 3600.0, "shared_gpu_s": 0.0,
            "idle_j": 4 * 41.0 * 3600, "split": "counters", "time": end_s - 1800,
            "co2_g": 4 * 120.0 * 3600 / 3.6e6 * 200.0} for node in ("gpu3", "gpu4")]
    d.jobs[str(job)] = two
    tags = ("job_id", "user", "account", "partition", "cluster", "node", "app")
    for records in d.jobs.values():
        for r in records:
            fields = {k: v for k, v in r.items() if k not in tags and k != "time"}
            fields["gpus"] = int(fields["gpus"])
            d.points.append(Point("job_energy", {k: r[k] for k in tags}, fields, r["time"]))
    # reconcile outcomes, made into points as reconcile would (two in one pass, same tags)
    passes = [[("resize", "done", "101"), ("resize", "done", "102")], [("defer", "done", "103")],
              [("move_exclusive", "failed", "104")], [("defer", "dry-run", "105")]]
    for k, outcomes in enumerate(passes):
        t = end_s - 3600 * (k + 1)
        dicts = [{"kind": kind, "status": status, "policy": "eaco", "job_id": job_id,
                  "gpus": 2, "why": f"test action {job_id}",
                  "detail": "requeue_hold: exit 1" if status == "failed" else ""}
                 for kind, status, job_id in outcomes]
        for o, p in zip(dicts, outcome_points(dicts, CLUSTER, t)):
            d.actions.append({**o, "time": p.time_s})
            d.points.append(p)
    return d


@contextmanager
def stored(localcluster, prefix: str) -> Iterator[tuple[str, Data]]:
    """(database, data): ``build``'s points in a database of their own on the local cluster's
    InfluxDB, dropped afterwards."""
    db = f"{prefix}_{uuid.uuid4().hex[:8]}"
    client = localcluster.influx(db)
    client.create_database()
    data = build(time.time())
    client.write(data.points)
    try:
        yield db, data
    finally:
        client.drop_database()
