#!/usr/bin/env python3
"""Policy time of EaCO on a synthetic snapshot: 1,000 nodes x 8 GPUs, 10,000 jobs.

    python benchmarks/bench_eaco.py [--nodes 1000] [--jobs 10000] [--repeat 20] [--seed 0]

Prints the median time of ``advise`` for a few kinds of job (goal: well under the 50 ms the
wrapper may add) and of one ``reconcile`` pass over every shared GPU, once when the groups are
first seen (marks) and once when they are judged (goal: at most 1 s). Standard library only.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import textwrap
import time
from pathlib import Path
from types import MappingProxyType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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
from slurm_plugin.policy.base import Context
from slurm_plugin.policy.eaco.decide import Eaco

from benchmarks._common import positive_int  # noqa: E402

APPS = ("alexnet", "resnet18", "vgg16", "aps", "lstm", "nas", "transformer", "wavenet")
LOW = ("alexnet", "resnet18")
NOW = 1_700_000_000.0


def snapshot(nodes: int, n_jobs: int, rng: random.Random) -> tuple[Cluster, dict[str, Progress]]:
    """Busy GPUs: 60% shared by 1-3 low-utilisation jobs, the rest exclusive; ~1% free;
    50 pending jobs; progress for every running job."""
    jobs: dict[str, Job] = {}
    progress: dict[str, Progress] = {}
    out = []

    def add(jid: str, app: str, node: str, idx: int, shards: int) -> None:
        start = NOW - rng.uniform(600, 20000)
        jobs[jid] = Job(job_id=jid, state="RUNNING", user="u", app=app, shards=shards,
                        gpus=0 if shards else 1, nodes=(node,), uses=(GpuUse(node, idx, shards),),
                        submit_s=start - 60, start_s=start, time_limit_s=40000.0)
        progress[jid] = Progress(job_id=jid, step=int((NOW - start) / 40), samples_per_s=10.0,
                                 epoch=int((NOW - start) / 400), steps_per_epoch=10,
                                 total_steps=1000, taken_s=NOW, started_s=start)

    for n in range(nodes):
        name = f"node{n:04d}"
        gpus = []
        for i in range(8):
            r = rng.random()
            if r < 0.01 or len(jobs) >= n_jobs - 50:
                gpus.append(Gpu(name, i, shards_total=4))
            elif r < 0.6:
                ids = []
                for _ in range(rng.choice((1, 2, 2, 3))):
                    jid = str(len(jobs) + 1)
                    add(jid, rng.choice(LOW), name, i, 1)
                    ids.append(jid)
                gpus.append(Gpu(name, i, shards_total=4, shards_used=len(ids),
                                shard_jobs=tuple(ids)))
            else:
                jid = str(len(jobs) + 1)
                add(jid, rng.choice(APPS), name, i, 0)
                gpus.append(Gpu(name, i, shards_total=4, exclusive_job=jid))
        out.append(Node(name, "mixed", tuple(gpus)))
    while len(jobs) < n_jobs:
        jid = str(len(jobs) + 1)
        jobs[jid] = Job(job_id=jid, state="PENDING", app=rng.choice(APPS), gpus=1,
                        submit_s=NOW - 10)
    return Cluster(tuple(out), MappingProxyType(jobs), NOW), progress


def median_s(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=positive_int, default=1000)
    ap.add_argument("--jobs", type=positive_int, default=10000)
    ap.add_argument("--repeat", type=positive_int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cluster, progress = snapshot(args.nodes, args.jobs, random.Random(args.seed))
    readings = Readings(progress=MappingProxyType(progress))
    policy = Eaco()
    ctx = Context(cluster, readings, NOW)
    shared = sum(1 for n in cluster.nodes for g in n.gpus if len(g.shard_jobs) > 1)
    print(f"snapshot: {len(cluster.nodes)} nodes, {cluster.gpu_count} GPUs, {len(cluster.jobs)} "
          f"jobs, {shared} GPUs shared by 2+ jobs")
    requests = {
        "alexnet, 1 GPU (packs)": JobRequest(gpus=1, app="alexnet", submit_s=NOW,
                                             time_limit_s=3600),
        "vgg16, 2 GPUs": JobRequest(gpus=2, app="vgg16", submit_s=NOW, time_limit_s=3600),
        "lstm, 1 GPU (cannot share)": JobRequest(gpus=1, app="lstm", submit_s=NOW),
        "opted out": JobRequest(gpus=1, app="alexnet", allow_share=False),
    }
    worst_advise = 0.0
    for label, req in requests.items():
        pl = policy.advise(req, ctx)
        t = median_s(lambda req=req: policy.advise(req, ctx), args.repeat)
        worst_advise = max(worst_advise, t)
        why = textwrap.shorten(pl.why[0], 90, placeholder=" ...")     # cut between words
        print(f"advise  {label:28s} {1000 * t:8.2f} ms  -> {why}")
    marks = policy.reconcile(ctx)
    t_mark = median_s(lambda: policy.reconcile(ctx), max(3, args.repeat // 4))
    history: dict[str, float] = {}
    for a in marks:
        # marked 2 epochs ago, at a pace of 1.05x the solo 40 s per step
        history.update({k: v - 840 if k.endswith(":t") else v - 20 if k.endswith(":step") else v
                        for k, v in a.predicted.items()})
    judged_ctx = Context(cluster, readings, NOW, history=MappingProxyType(history))
    judged = policy.reconcile(judged_ctx)
    t_judge = median_s(lambda: policy.reconcile(judged_ctx), max(3, args.repeat // 4))
    kinds = {k: sum(1 for a in judged if a.kind == k) for k in ("observe", "move_exclusive")}
    print(f"reconcile, groups first seen: {1000 * t_mark:8.1f} ms ({len(marks)} mark actions)")
    print(f"reconcile, groups judged:     {1000 * t_judge:8.1f} ms ({kinds})")
    worst = max(t_mark, t_judge)
    print(f"goal: reconcile <= 1 s of policy time: {'met' if worst <= 1.0 else 'NOT met'}")
    print(f"goal: advise well under the 50 ms the wrapper may add: "
          f"{'met' if worst_advise < 0.050 else 'NOT met'} (slowest median "
          f"{1000 * worst_advise:.2f} ms, {worst_advise / 0.050:.0%} of 50 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
