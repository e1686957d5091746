"""Builders of cluster snapshots for the EaCO tests (seeded random shapes, small fixtures).

Helpers only: imported by test_eaco.py and test_eaco_reconcile.py.
"""

from __future__ import annotations

import random
from types import MappingProxyType

from slurm_plugin.model import (
    Cluster,
    Gpu,
    GpuUse,
    Job,
    JobRequest,
    Node,
    Progress,
    Readings,
)
from slurm_plugin.physics import class_names
from slurm_plugin.policy.base import Context

APPS = class_names()
SHAREABLE = ("alexnet", "resnet18", "vgg16")     # classes the default limits let share


def pick_app(rng: random.Random, extra: tuple[str, ...] = ()) -> str:
    return rng.choice(SHAREABLE) if rng.random() < 0.6 else rng.choice(APPS + extra)
NOW = 1_000_000.0


def running(job_id: str, app: str, uses: list[tuple[str, int]], *, shards: int = 2,
            submit_s: float = NOW - 100, time_limit_s: float = 3600.0, user: str = "u") -> Job:
    return Job(job_id=job_id, state="RUNNING", user=user, app=app, shards=shards,
               gpus=0 if shards else len(uses), nodes=tuple(sorted({n for n, _ in uses})),
               uses=tuple(GpuUse(n, i, shards) for n, i in uses), submit_s=submit_s,
               start_s=submit_s, time_limit_s=time_limit_s)


def random_cluster(rng: random.Random) -> Cluster:
    """1-6 nodes of 1-8 GPUs; each GPU free, exclusive, or shared by 1-4 jobs (any class,
    sometimes an unknown one), with a few pending jobs."""
    nodes, jobs = [], {}
    shards_total = rng.choice([0, 2, 4, 4, 4, 8])
    for n in range(rng.randint(1, 6)):
        name = f"n{n}"
        gpus = []
        for i in range(rng.randint(1, 8)):
            kind = rng.random()
            excl, shard = None, ()
            if kind < 0.2:
                jid = f"x{len(jobs)}"
                jobs[jid] = running(jid, rng.choice(APPS), [(name, i)], shards=0)
                excl = jid
            elif kind < 0.7 and shards_total:
                ids = []
                for _ in range(rng.choice([1, 1, 2, 3, 4])):
                    jid = f"s{len(jobs)}"
                    app = pick_app(rng, ("mystery",))
                    jobs[jid] = running(jid, app, [(name, i)], shards=1,
                                        submit_s=NOW - rng.uniform(0, 20000),
                                        time_limit_s=rng.uniform(600, 20000))
                    ids.append(jid)
                shard = tuple(ids)
            used = min(shards_total, len(shard) * max(1, shards_total // 4))
            gpus.append(Gpu(node=name, index=i, gres_type=f"g{i}", memory_mib=32510,
                            shards_total=shards_total, shards_used=used, exclusive_job=excl,
                            shard_jobs=shard))
        nodes.append(Node(name=name, state=rng.choice(["idle", "mixed", "down"]) if n else "mixed",
                          gpus=tuple(gpus)))
    for k in range(rng.choice([0, 1, 3, 100, 100])):
        jobs[f"p{k}"] = Job(job_id=f"p{k}", state="PENDING", app=rng.choice(APPS), gpus=1)
    return Cluster(nodes=tuple(nodes), jobs=MappingProxyType(jobs), taken_s=NOW)


def random_request(rng: random.Random) -> JobRequest:
    deadline = rng.choice([None, None, NOW + rng.uniform(100, 40000)])
    return JobRequest(name="r", user="u", gpus=rng.choice([1, 1, 1, 2, 3]),
                      num_nodes=rng.choices([1, 2], [9, 1])[0], app=pick_app(rng, ("", "mystery")),
                      time_limit_s=rng.choice([None, rng.uniform(300, 20000)]),
                      deadline_s=deadline,
                      allow_share=rng.choices([None, True, False], [6, 3, 1])[0],
                      opt_out=rng.choices([frozenset(), frozenset({"share"})], [9, 1])[0],
                      memory_per_gpu_mib=rng.choice([None, None, rng.randint(500, 20000)]),
                      submit_s=NOW, repeat_key="u:r")


def random_settings(rng: random.Random) -> dict:
    return {"alpha": rng.choice([0.0, 0.5, 0.5, 1.0]),
            "util_threshold_pct": rng.choice([60.0, 100.0]),
            "mem_threshold_pct": rng.choice([50.0, 90.0, 90.0]),
            "max_jobs_per_gpu": rng.choice([1, 2, 4, 4]),
            "max_slowdown": rng.choice([1.05, 1.1, 1.1, 1.5]),
            "deadline_factor": rng.choice([1.0, 2.0]), "allow_share": rng.random() < 0.8}


def context(cluster: Cluster, settings: dict | None = None, history: dict | None = None,
            progress: dict[str, Progress] | None = None, now_s: float = NOW) -> Context:
    return Context(cluster=cluster, readings=Readings(progress=MappingProxyType(progress or {})),
                   now_s=now_s, settings=MappingProxyType(settings or {}),
                   history=MappingProxyType(history or {}))


def one_gpu(residents: dict[str, str], free_gpus: int = 1, shards_total: int = 4) -> Cluster:
    """Node ``a``: GPU 0 shared by ``residents`` (job id -> app), then ``free_gpus`` free GPUs."""
    jobs = {jid: running(jid, app, [("a", 0)], shards=1) for jid, app in residents.items()}
    gpus = (Gpu("a", 0, memory_mib=32510, shards_total=shards_total, shards_used=len(residents),
                shard_jobs=tuple(residents)),)
    gpus += tuple(Gpu("a", i, memory_mib=32510, shards_total=shards_total)
                  for i in range(1, free_gpus + 1))
    return Cluster(nodes=(Node("a", "mixed", gpus),), jobs=MappingProxyType(jobs), taken_s=NOW)
