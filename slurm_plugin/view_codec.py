"""The cluster view's records as JSON: a snapshot (``Cluster``) and GPU readings
(``Readings``) written by the reconciler and read back by every user's wattbatch.

Plain JSON, not pickle: a view is read by users other than the one who wrote it, and reading
it must never run code. Only what a policy reads is kept; a job's free-text comment is left out
(and, where the site hides jobs' owners, its user, account and name), so a view shows no more
of other users' jobs than ``squeue`` does.

Jobs, GPUs, GPU readings and progress are tables: the field names once (``*_fields``), then
one list of values per record in that order: at 1,000 nodes and 10,000 jobs a third of the
size of records with named keys, and a quarter of the time to read (benchmarks/bench_view.py). A reader whose records have the same fields builds each record from
its row directly; one whose fields differ (a view written by another wattbatch release) maps
the rows by name, taking its defaults for fields the writer did not know and leaving out
those it does not know.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Callable

from .model import Cluster, Gpu, GpuReading, GpuUse, Job, Node, Progress, Readings, Resident
from .record import asdict, fields

HIDDEN_OWNER = ("user", "account", "name")
JOB_FIELDS = fields(Job)
GPU_FIELDS = tuple(f for f in fields(Gpu) if f != "node")    # the node holds its GPUs
READING_FIELDS = fields(GpuReading)
PROGRESS_FIELDS = fields(Progress)
_USES, _NODES, _PINNED = (JOB_FIELDS.index(f) for f in ("uses", "nodes", "pinned"))
_SHARD_JOBS, _MIG = (GPU_FIELDS.index(f) for f in ("shard_jobs", "mig_profiles"))
_RESIDENTS = READING_FIELDS.index("residents")


# ---------------------------------------------------------------- one job (a user's own list)
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


# ---------------------------------------------------------------- tables
def _rows(fields_written: list[str], rows: list[list[Any]], ours: tuple[str, ...]) -> list[list[Any]]:
    """``rows`` in our field order: as they are when the writer's fields are ours; else mapped
    by name, each field the writer did not know left out (the record's default then), each it
    knew that we do not dropped."""
    if tuple(fields_written) == ours:
        return rows
    return [[{n: v for n, v in zip(fields_written, row) if n in ours}] for row in rows]


def _make(cls: Callable[..., Any], row: list[Any]) -> Any:
    """A record from a row of ``_rows``: positional, or the named values of a mapped row."""
    if len(row) == 1 and isinstance(row[0], dict):
        return cls(**row[0])
    return cls(*row)


def _named(row: list[Any]) -> tuple[dict[str, Any] | None, list[Any]]:
    """A mapped row's values by name (None for a positional one), and the row to fix up."""
    return (row[0], row) if len(row) == 1 and isinstance(row[0], dict) else (None, row)


def _job_row(job: Job, hide_owner: bool) -> list[Any]:
    row = [getattr(job, f) for f in JOB_FIELDS]
    row[_USES] = [[u.node, u.index, u.shards] for u in job.uses]
    row[JOB_FIELDS.index("comment")] = ""
    if hide_owner:
        for f in HIDDEN_OWNER:
            row[JOB_FIELDS.index(f)] = ""
    return row


def _job(row: list[Any]) -> Job:
    named, row = _named(row)
    if named is None:
        row[_USES] = tuple([GpuUse(*u) for u in row[_USES]])
        row[_NODES] = tuple(row[_NODES])
        row[_PINNED] = tuple(map(tuple, row[_PINNED])) if row[_PINNED] else ()
        return Job(*row)
    named["uses"] = tuple(GpuUse(*u) for u in named.get("uses", ()))
    named["nodes"] = tuple(named.get("nodes", ()))
    named["pinned"] = tuple(map(tuple, named.get("pinned", ())))
    return Job(**named)


def _gpu(node: str, row: list[Any]) -> Gpu:
    named, row = _named(row)
    if named is None:
        row[_SHARD_JOBS] = tuple(row[_SHARD_JOBS])
        row[_MIG] = tuple(row[_MIG])
        return Gpu(node, *row)
    named["shard_jobs"] = tuple(named.get("shard_jobs", ()))
    named["mig_profiles"] = tuple(named.get("mig_profiles", ()))
    return Gpu(node=node, **named)


# ---------------------------------------------------------------- the snapshot
def encode_cluster(cluster: Cluster, hide_owner: bool = False) -> dict[str, Any]:
    return {"name": cluster.name, "taken_s": cluster.taken_s, "limit_use": cluster.limit_use,
            "gpu_fields": GPU_FIELDS,
            "nodes": [[n.name, n.state, n.cpus, n.memory_mib, list(n.features),
                       [[getattr(g, f) for f in GPU_FIELDS] for g in n.gpus]]
                      for n in cluster.nodes],
            "job_fields": JOB_FIELDS,
            "jobs": [_job_row(j, hide_owner) for j in cluster.jobs.values()]}


def decode_cluster(doc: dict[str, Any]) -> Cluster:
    gpu_fields = doc["gpu_fields"]
    nodes = tuple(Node(name, state, tuple([_gpu(name, g)
                                           for g in _rows(gpu_fields, gpus, GPU_FIELDS)]),
                       cpus, memory_mib, tuple(features))
                  for name, state, cpus, memory_mib, features, gpus in doc["nodes"])
    jobs = {}
    pending = 0
    for row in _rows(doc["job_fields"], doc["jobs"], JOB_FIELDS):
        job = _job(row)
        jobs[job.job_id] = job
        pending += job.state == "PENDING"
    return Cluster(nodes=nodes, jobs=MappingProxyType(jobs), taken_s=float(doc["taken_s"]),
                   name=doc.get("name", "cluster"), limit_use=doc.get("limit_use"),
                   pending_count=pending)


# ---------------------------------------------------------------- readings
def encode_readings(r: Readings) -> dict[str, Any]:
    spent = r.period_spent_g
    gpus = []
    for g in r.gpus.values():
        row = [getattr(g, f) for f in READING_FIELDS]
        row[_RESIDENTS] = [[x.job_id, x.shares, x.util_pct, x.app] for x in g.residents]
        gpus.append(row)
    return {"reading_fields": READING_FIELDS, "gpus": gpus,
            "progress_fields": PROGRESS_FIELDS,
            "progress": [[getattr(p, f) for f in PROGRESS_FIELDS] for p in r.progress.values()],
            "carbon_g_per_kwh": r.carbon_g_per_kwh,
            "carbon_forecast": [list(p) for p in r.carbon_forecast],
            "cluster_power_w": r.cluster_power_w,
            "period_spent_g": None if spent is None else [spent[0], spent[1], dict(spent[2])],
            "taken_s": r.taken_s, "warnings": list(r.warnings), "carbon_read": r.carbon_read}


def _reading(row: list[Any]) -> GpuReading:
    named, row = _named(row)
    if named is None:
        row[_RESIDENTS] = tuple([Resident(*x) for x in row[_RESIDENTS]])
        return GpuReading(*row)
    named["residents"] = tuple(Resident(*x) for x in named.get("residents", ()))
    return GpuReading(**named)


def decode_readings(doc: dict[str, Any]) -> Readings:
    gpus = {}
    for row in _rows(doc["reading_fields"], doc.get("gpus", []), READING_FIELDS):
        reading = _reading(row)
        gpus[(reading.node, reading.index)] = reading
    progress = {}
    for row in _rows(doc["progress_fields"], doc.get("progress", []), PROGRESS_FIELDS):
        p = _make(Progress, row)
        progress[p.job_id] = p
    spent = doc.get("period_spent_g")
    return Readings(gpus=MappingProxyType(gpus), progress=MappingProxyType(progress),
                    carbon_g_per_kwh=doc.get("carbon_g_per_kwh"),
                    carbon_forecast=tuple(tuple(p) for p in doc.get("carbon_forecast", ())),
                    cluster_power_w=doc.get("cluster_power_w"),
                    period_spent_g=None if spent is None else
                    (spent[0], spent[1], MappingProxyType(spent[2])),
                    taken_s=float(doc.get("taken_s", 0.0)),
                    warnings=tuple(doc.get("warnings", ())),
                    carbon_read=bool(doc.get("carbon_read", False)))
