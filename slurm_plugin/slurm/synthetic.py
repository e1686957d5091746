"""Synthetic node-listing / ``squeue --json`` documents for parse and policy benchmarks.

Shapes follow what tests/golden/slurm/<release>/ recorded: typed GPUs ``g0..gN`` with shards,
running jobs holding whole GPUs or shards (``gres_detail`` with indexes), pending jobs. The
documents are made in Slurm 22.05's shape; ``current(doc, release)`` rewrites one into the
shape of 24.11 (data_parser v0.0.42) or 26.05 (v0.0.45): ``scontrol --json show nodes``
entries, ``{set, infinite, number}`` values, state lists, exit code objects.
"""

from __future__ import annotations

import random
from typing import Any

RELEASES = {"22.05": "v0.0.38", "24.11": "v0.0.42", "26.05": "v0.0.45"}
META_22_05 = {"plugin": {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"},
              "Slurm": {"version": {"major": 22, "micro": 8, "minor": 5}, "release": "22.05.8"}}
# Fields squeue prints for every job that the parser ignores; kept so the JSON is realistic.
_FILLER = {"account": "root", "admin_comment": "", "array_job_id": 0, "batch_flag": True,
           "cluster": "synthetic", "command": "/home/user/train.sh", "contiguous": False,
           "cpus_per_task": 1, "current_working_directory": "/home/user", "dependency": "",
           "derived_exit_code": 0, "eligible_time": 0, "excluded_nodes": "", "features": "",
           "flags": ["JOB_WAS_RUNNING"], "group_id": 1000, "group_name": "users",
           "licenses": "", "max_cpus": 0, "memory_per_node": 0, "nice": 0, "priority": 1000,
           "qos": "normal", "requeue": True, "shared": None, "standard_error": "",
           "standard_input": "/dev/null", "standard_output": "/home/user/slurm.out",
           "tasks": 1, "user_id": 1000, "wckey": ""}


def sinfo_json(nodes: int = 1000, gpus_per_node: int = 8, shards_per_gpu: int = 4) -> dict:
    gres = ",".join([f"gpu:g{i}:1" for i in range(gpus_per_node)]
                    + [f"shard:g{i}:{shards_per_gpu}" for i in range(gpus_per_node)])
    return {"meta": META_22_05, "errors": [], "nodes": [
        {"name": f"n{k:04d}", "state": "mixed", "state_flags": [], "cpus": 64,
         "real_memory": 512000, "features": "a100", "gres": gres, "partitions": ["gpu"]}
        for k in range(nodes)]}


def _job(job_id: int, rng: random.Random, now: int, **fields: Any) -> dict:
    job = dict(_FILLER)
    job.update({"job_id": job_id, "name": f"job{job_id}", "user_name": f"user{job_id % 50}",
                "partition": "gpu", "node_count": 1, "restart_cnt": 0, "exit_code": 0,
                "comment": f"app={rng.choice(['resnet50', 'bert', 'gpt2', 'yolo'])}",
                "submit_time": now - rng.randint(60, 86400), "time_limit": 1440,
                "state_reason": "None", "gres_detail": [], "nodes": "", "tres_per_job": ""})
    job.update(fields)
    return job


def squeue_json(nodes: int = 1000, gpus_per_node: int = 8, jobs: int = 10000,
                shards_per_gpu: int = 4, running_share: float = 0.7, now: int = 1_800_000_000,
                seed: int = 0) -> dict:
    """``jobs`` jobs: up to ``running_share`` of them running, filling nodes in order with
    whole GPUs or two shard jobs per GPU; the rest pending."""
    rng = random.Random(seed)
    out: list[dict] = []
    running = int(jobs * running_share)
    for k in range(nodes):
        node, free = f"n{k:04d}", list(range(gpus_per_node))
        while free and len(out) < running:
            if rng.random() < 0.25:   # two shard jobs on one GPU
                i = free.pop(0)
                for _ in range(2):
                    n = shards_per_gpu // 2
                    out.append(_job(len(out) + 1, rng, now, job_state="RUNNING", nodes=node,
                                    start_time=now - 600, tres_per_node=f"gres:shard:g{i}:{n}",
                                    gres_detail=[f"shard:g{i}:{n}(IDX:{i})"]))
                continue
            size = min(rng.choice((1, 1, 2, 4, 8)), len(free))
            held, free = free[:size], free[size:]
            detail = ",".join(f"gpu:g{i}:{int(i in held)}(IDX:{i if i in held else ''})"
                              for i in range(gpus_per_node))
            out.append(_job(len(out) + 1, rng, now, job_state="RUNNING", nodes=node,
                            start_time=now - 600, tres_per_node=f"gres:gpu:{size}",
                            gres_detail=[detail]))
    while len(out) < jobs:
        out.append(_job(len(out) + 1, rng, now, job_state="PENDING", start_time=0,
                        state_reason=rng.choice(["Resources", "Priority", "BeginTime"]),
                        tres_per_node=f"gres:gpu:{rng.choice((1, 2, 4, 8))}"))
    return {"meta": META_22_05, "errors": [], "jobs": out[:jobs]}


def _meta(release: str) -> dict:
    major, minor = release.split(".")
    return {"plugin": {"type": "", "name": "", "data_parser": f"data_parser/{RELEASES[release]}",
                       "accounting_storage": "accounting_storage/slurmdbd"},
            "command": [], "slurm": {"version": {"major": major, "minor": minor, "micro": "5"},
                                     "release": f"{release}.5", "cluster": "synthetic"}}


def _number(value: int | None, zero_unset: bool = True) -> dict:
    if value is None:
        return {"set": False, "infinite": True, "number": 0}
    return {"set": not (zero_unset and value == 0), "infinite": False, "number": value}


def _shares(detail: str, gpus_per_node: int) -> str:
    """22.05 ``shard:g1:2(IDX:1)`` -> 24.11 ``shard:g1:2(0/4,2/4,...)`` on this node."""
    head, _, idx = detail.partition("(IDX:")
    count, index = int(head.rsplit(":", 1)[1]), int(idx.rstrip(")"))
    return head + "(" + ",".join(f"{count if i == index else 0}/4"
                                 for i in range(gpus_per_node)) + ")"


def _current_job(job: dict, gpus_per_node: int) -> dict:
    out = dict(job)
    for key in ("submit_time", "start_time", "end_time", "deadline", "eligible_time"):
        out[key] = _number(int(job.get(key) or 0))
    out["time_limit"] = _number(job.get("time_limit"), zero_unset=False)
    out["node_count"] = _number(job.get("node_count") or 1)
    out["job_state"] = [job["job_state"]]
    out["exit_code"] = {"status": ["PENDING"] if job["job_state"] == "PENDING" else ["SUCCESS"],
                        "return_code": _number(0, zero_unset=False),
                        "signal": {"id": _number(0), "name": ""}}
    out["tres_per_node"] = str(job.get("tres_per_node") or "").replace("gres:", "gres/")
    out["gres_detail"] = [_shares(d, gpus_per_node) if d.startswith("shard") else d
                          for d in job.get("gres_detail") or ()]
    nodes = [n for n in str(job.get("nodes") or "").split(",") if n]
    out["job_resources"] = {"nodes": {"count": len(nodes), "list": job.get("nodes") or "",
                                      "allocation": [{"index": i, "name": n}
                                                     for i, n in enumerate(nodes)]}} \
        if nodes else {}
    return out


def current(doc: dict, release: str, gpus_per_node: int = 8) -> dict:
    """A 22.05-shaped synthetic document in the shape ``release`` (24.11, 26.05) writes."""
    if release not in RELEASES or release == "22.05":
        raise ValueError(f"synthetic: release {release!r}: choose 24.11 or 26.05")
    out = {"meta": _meta(release), "errors": [], "warnings": []}
    if "nodes" in doc:
        out["nodes"] = [dict(n, state=[n["state"].upper()], features=n["features"].split(","))
                        for n in doc["nodes"]]
    if "jobs" in doc:
        out["jobs"] = [_current_job(j, gpus_per_node) for j in doc["jobs"]]
    return out


def documents(release: str, nodes: int = 1000, gpus_per_node: int = 8, jobs: int = 10000,
              seed: int = 0) -> tuple[dict, dict]:
    """(node listing, squeue) of a synthetic cluster in the shape of ``release``."""
    listing = sinfo_json(nodes, gpus_per_node)
    queue = squeue_json(nodes, gpus_per_node, jobs, seed=seed)
    if release == "22.05":
        return listing, queue
    return current(listing, release, gpus_per_node), current(queue, release, gpus_per_node)
