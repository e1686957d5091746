"""The cluster view's records as JSON: a snapshot (``Cluster``) and GPU readings
(``Readings``) written by the reconciler and read back by every user's wattbatch.

Plain JSON, not pickle: a view is read by users other than the one who wrote it, and reading
it must never run code. Only what a policy reads is kept; a job's free-text comment is left out
(and, where the site hides jobs' owners, its user, account and name), so a view shows no more
of other users' jobs than ``squeue`` does."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from .model import Cluster, Gpu, GpuReading, GpuUse, Job, Node, Progress, Readings, Resident
from .record import asdict, fields

HIDDEN_OWNER = ("user", "account", "name")


def encode_job(job: Job, hide_owner: bool = False) -> dict[str, Any]:
    out = asdict(job)
    out["comment"] = ""
    if hide_owner:
        out.update({k: "" for k in HIDDEN_OWNER})
    return out


def decode_job(doc: dict[str, Any]) -> Job:
    d = {k: v for k, v in doc.items() if k in fields(Job)}
    d["nodes"] = tuple(d.get("nodes", ()))
    d["uses"] = tuple(GpuUse(**u) for u in d.get("uses", ()))
    d["pinned"] = tuple(tuple(p) for p in d.get("pinned", ()))
    return Job(**d)


def _decode_gpu(doc: dict[str, Any]) -> Gpu:
    d = {k: v for k, v in doc.items() if k in fields(Gpu)}
    d["shard_jobs"] = tuple(d.get("shard_jobs", ()))
    d["mig_profiles"] = tuple(d.get("mig_profiles", ()))
    return Gpu(**d)


def encode_cluster(cluster: Cluster, hide_owner: bool = False) -> dict[str, Any]:
    return {"name": cluster.name, "taken_s": cluster.taken_s, "limit_use": cluster.limit_use,
            "nodes": [asdict(n) for n in cluster.nodes],
            "jobs": [encode_job(j, hide_owner) for j in cluster.jobs.values()]}


def decode_cluster(doc: dict[str, Any]) -> Cluster:
    nodes = tuple(Node(name=n["name"], state=n.get("state", "idle"),
                       gpus=tuple(_decode_gpu(g) for g in n.get("gpus", ())),
                       cpus=n.get("cpus", 0), memory_mib=n.get("memory_mib", 0),
                       features=tuple(n.get("features", ()))) for n in doc["nodes"])
    jobs = {j["job_id"]: decode_job(j) for j in doc.get("jobs", ())}
    return Cluster(nodes=nodes, jobs=MappingProxyType(jobs), taken_s=float(doc["taken_s"]),
                   name=doc.get("name", "cluster"), limit_use=doc.get("limit_use"))


def encode_readings(r: Readings) -> dict[str, Any]:
    spent = r.period_spent_g
    return {"gpus": [asdict(g) for g in r.gpus.values()],
            "progress": [asdict(p) for p in r.progress.values()],
            "carbon_g_per_kwh": r.carbon_g_per_kwh,
            "carbon_forecast": [list(p) for p in r.carbon_forecast],
            "cluster_power_w": r.cluster_power_w,
            "period_spent_g": None if spent is None else [spent[0], spent[1], dict(spent[2])],
            "taken_s": r.taken_s, "warnings": list(r.warnings)}


def decode_readings(doc: dict[str, Any]) -> Readings:
    gpus = {}
    for g in doc.get("gpus", ()):
        d = {k: v for k, v in g.items() if k in fields(GpuReading)}
        d["residents"] = tuple(Resident(**x) for x in d.get("residents", ()))
        reading = GpuReading(**d)
        gpus[(reading.node, reading.index)] = reading
    progress = {p["job_id"]: Progress(**{k: v for k, v in p.items() if k in fields(Progress)})
                for p in doc.get("progress", ())}
    spent = doc.get("period_spent_g")
    return Readings(gpus=MappingProxyType(gpus), progress=MappingProxyType(progress),
                    carbon_g_per_kwh=doc.get("carbon_g_per_kwh"),
                    carbon_forecast=tuple(tuple(p) for p in doc.get("carbon_forecast", ())),
                    cluster_power_w=doc.get("cluster_power_w"),
                    period_spent_g=None if spent is None else
                    (spent[0], spent[1], MappingProxyType(spent[2])),
                    taken_s=float(doc.get("taken_s", 0.0)),
                    warnings=tuple(doc.get("warnings", ())))
