#!/usr/bin/env python3
"""The ones policy's figures: average JCT against tiresias, slurm-default and elastic.

(a) Pollux workloads 1..8 on 64 GPUs (16 nodes x 4), ``--trace-format pollux``, reconcile every
60 s, restart cost 90 s: average JCT of ``ones`` (population 8) over ``tiresias``'s (goal
<= 0.40x), ``slurm-default``'s and ``elastic``'s, per workload and seed, mean (min-max) over
the 8 workloads x ``--seeds`` seeds of ``ones``;
(b) the same with statistical efficiency off in the simulator and the policy (a bigger batch
needs no more samples): the gain that would be illusory;
(c) speed on Philly (64 x 8 GPUs, ``--elastic-share`` of jobs elastic, reconcile every 300 s):
jobs per second of simulation with ``ones`` (goal >= 1,000), wall-clock and per CPU-second
(``time.process_time``: less moved by other work on the machine), on the first ``--philly-jobs``;
(d) one reconcile pass of ``ones`` at 1,000 nodes x 8 GPUs and 10,000 jobs (goal <= 1 s);
with (a) and (b), the average JCT no scheduler choosing GPU counts and batch sizes beats
(``sim/bounds.batch_jct_bound``) over tiresias's, per workload.

Usage::

    python benchmarks/bench_ones.py --pollux-dir ../shared/data/workloads/pollux/workloads \\
        --philly ../shared/data/traces/philly/philly-2017-09-10.csv
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from slurm_plugin.policy import get_policy  # noqa: E402
from slurm_plugin.sim.bounds import batch_jct_bound  # noqa: E402
from slurm_plugin.sim.cluster import ClusterSpec  # noqa: E402
from slurm_plugin.sim.elastic_share import make_elastic  # noqa: E402
from slurm_plugin.sim.engine import Simulator  # noqa: E402
from slurm_plugin.sim.fluid import fluid_srpt_jct_s  # noqa: E402
from slurm_plugin.sim.trace import read_trace  # noqa: E402

from benchmarks._common import (read_traces, goal, input_errors, input_file,  # noqa: E402
                               nonneg_int, positive_int, share, workload_files)

BASELINES = ("slurm-default", "tiresias", "elastic")


def run_one(args: tuple) -> dict:
    path, fmt, nodes, gpn, interval, share, seed, policy, stat_eff, limit = args
    jobs = read_trace(path, fmt)
    if limit:
        jobs = jobs[:limit]
    if share:
        jobs = make_elastic(jobs, share, 0)
    spec = ClusterSpec(nodes=nodes, gpus_per_node=gpn, reconcile_interval_s=interval,
                       restart_cost_s=90.0)
    settings = None
    if policy == "ones":
        settings = {"seed": seed, "restart_cost_s": 90.0, "statistical_efficiency": int(stat_eff)}
    t0, cpu0 = time.perf_counter(), time.process_time()
    sim = Simulator(jobs, spec, get_policy(policy), seed=0, settings=settings,
                    statistical_efficiency=stat_eff)
    r = sim.run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    bound = batch_jct_bound(jobs, nodes * gpn, stat_eff) if policy == "tiresias" else None
    fluid = fluid_srpt_jct_s(jobs, nodes * gpn) if policy == "tiresias" else None
    return {"trace": Path(path).stem, "policy": policy, "seed": seed, "stat_eff": stat_eff,
            "bound_s": bound, "fluid_s": fluid,
            "alone_s": statistics.fmean(j.duration_s for j in jobs),
            "avg_jct_s": r["avg_jct_s"], "makespan_s": r["makespan_s"], "jobs": r["jobs"],
            "finished": r["jobs_finished"], "timed_out": r["jobs_timed_out"],
            "resizes": r["actions"].get("resize", 0), "wall_s": wall, "cpu_s": cpu,
            "jobs_per_s": r["jobs"] / wall if wall else 0.0,
            "jobs_per_cpu_s": r["jobs"] / cpu if cpu else 0.0}


def spread(xs: list[float]) -> str:
    return f"{statistics.mean(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})"


def pollux_table(rows: list[dict], stat_eff: bool, seeds: list[int],
                 order: list[str]) -> float:
    """Prints the table; returns the mean of ones / tiresias."""
    print(f"\n== Pollux workloads, 16 x 4 GPUs, statistical efficiency "
          f"{'on' if stat_eff else 'OFF (illusory)'}: ones avg JCT over each baseline")
    wl = max([12] + [len(t) + 2 for t in order])
    print(f"{'workload':<{wl}}{'seed':>5}{'ones JCT s':>12}" + "".join(f"{b:>15}" for b in BASELINES)
          + f"{'resizes':>9}{'timed out':>10}")
    agg: dict[str, list[float]] = {b: [] for b in BASELINES}
    mine = [r for r in rows if r["policy"] == "ones" and r["stat_eff"] == stat_eff]
    for r in sorted(mine, key=lambda r: (order.index(r["trace"]), r["seed"])):
        base = {x["policy"]: x for x in rows if x["trace"] == r["trace"]
                and x["stat_eff"] == stat_eff and x["policy"] != "ones"}
        ratios = [r["avg_jct_s"] / base[b]["avg_jct_s"] for b in BASELINES]
        for b, x in zip(BASELINES, ratios):
            agg[b].append(x)
        print(f"{r['trace']:<{wl}}{r['seed']:>5}{r['avg_jct_s']:>12.0f}"
              + "".join(f"{x:>15.3f}" for x in ratios) + f"{r['resizes']:>9}{r['timed_out']:>10}")
    for b in BASELINES:
        print(f"ones / {b}: avg JCT {spread(agg[b])} over {len(agg[b])} runs")
    for b in BASELINES:
        xs = [x["avg_jct_s"] for x in rows if x["policy"] == b and x["stat_eff"] == stat_eff]
        print(f"{b}: mean avg JCT {statistics.mean(xs):.0f} s")
    bound = [x["bound_s"] / x["avg_jct_s"] for x in rows if x["policy"] == "tiresias"
             and x["stat_eff"] == stat_eff]
    alone = [x["alone_s"] / x["avg_jct_s"] for x in rows if x["policy"] == "tiresias"
             and x["stat_eff"] == stat_eff]
    if bound:
        print(f"lower bound for any scheduler choosing GPU counts and batch sizes "
              f"(sim/bounds.batch_jct_bound: each job alone from its submission at its fastest "
              f"count and batch) / tiresias: avg JCT {spread(bound)} over {len(bound)} workloads")
        print(f"every job alone from its submission as it asked (no wait, no change) / "
              f"tiresias: avg JCT {spread(alone)}")
        fluid = [x["fluid_s"] / x["avg_jct_s"] for x in rows if x["policy"] == "tiresias"
                 and x["stat_eff"] == stat_eff]
        print(f"fluid shortest-remaining-first on whole-GPU counts at the trace's batches, every "
              f"length known, free moves, no nodes (sim/fluid.py; a reference, not a bound) / "
              f"tiresias: avg JCT {spread(fluid)}")
    return statistics.mean(agg["tiresias"])


def micro(nodes: int = 1000, gpn: int = 8, n_jobs: int = 10_000, repeat: int = 3) -> float:
    """Seconds of one ``ones`` reconcile pass on a synthetic full cluster."""
    from slurm_plugin.model import Cluster, Gpu, GpuUse, Job, Node, Progress, Readings
    from slurm_plugin.policy.base import Context
    now = 1e6
    jobs, progress, gpus_of = {}, {}, {}
    apps = (("cifar10", 512, 128, 4096), ("deepspeech2", 80, 20, 640), ("yolov3", 32, 8, 512))
    names = [f"n{i:04d}" for i in range(nodes)]
    slot = 0
    for i in range(n_jobs):
        app, b, lo, hi = apps[i % 3]
        size = (1, 2, 4, 8)[i % 4]
        jid = str(i)
        if slot + size <= nodes * gpn and (slot % gpn) + size <= gpn:
            node = names[slot // gpn]
            uses = tuple(GpuUse(node, slot % gpn + k) for k in range(size))
            for k in range(size):
                gpus_of[(node, slot % gpn + k)] = jid
            slot += size
            jobs[jid] = Job(job_id=jid, state="RUNNING", gpus=size, nodes=(node,), uses=uses,
                            submit_s=float(i), start_s=now - 3600, time_limit_s=1e7, app=app,
                            min_gpus=1, max_gpus=16, batch_size=b * size, min_batch_size=lo,
                            max_batch_size=hi)
            progress[jid] = Progress(job_id=jid, step=(i * 37) % 900 + 10, samples_per_s=100.0,
                                     total_steps=1000, taken_s=now, started_s=now - 3600)
        else:
            jobs[jid] = Job(job_id=jid, state="PENDING", gpus=size, submit_s=float(i),
                            time_limit_s=1e7, app=app, min_gpus=1, max_gpus=16,
                            batch_size=b * size, min_batch_size=lo, max_batch_size=hi)
    node_views = tuple(Node(name=n, state="allocated", gpus=tuple(
        Gpu(node=n, index=k, exclusive_job=gpus_of.get((n, k))) for k in range(gpn)))
        for n in names)
    pending = sum(1 for j in jobs.values() if j.pending)
    ctx = Context(cluster=Cluster(nodes=node_views, jobs=jobs, taken_s=now, pending_count=pending),
                  readings=Readings(progress=progress), now_s=now)
    pol = get_policy("ones")
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        pol.reconcile(ctx)
        best = min(best, time.perf_counter() - t0)
    return best


def predictor_errors() -> None:
    """The step-time predictors' error on held-out rows (every 5th measured row), per
    application; the one ones uses is marked."""
    from slurm_plugin.physics.pollux import pollux_apps
    from slurm_plugin.policy.ones.predict import fit_errors, predictor
    print("\n== step-time predictors, error on held-out rows (mean / max; * the one used)")
    for app in sorted(pollux_apps()):
        errs = fit_errors(app)
        print(f"{app:<12}" + "".join(
            f"  {how} {e[0]:6.1%} / {e[1]:6.1%}{'*' if how == predictor(app) else ' '}"
            for how, e in errs.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pollux-dir", default=None, help="folder of workload-1..8.csv")
    ap.add_argument("--philly", default=None, help="Philly CSV (skipped when absent)")
    ap.add_argument("--philly-jobs", type=nonneg_int, default=10_000,
                    help="first N jobs (0: all)")
    ap.add_argument("--elastic-share", type=share, default=0.5)
    ap.add_argument("--seeds", type=nonneg_int, nargs="+", default=[0, 1, 2],
                    help="ones's seeds (each a run per workload)")
    ap.add_argument("--workers", type=positive_int, default=1)
    ap.add_argument("--philly-only", action="store_true",
                    help="only the speed figures (c) and (d), no Pollux runs")
    a = ap.parse_args()
    if not a.philly_only and not a.pollux_dir:
        ap.error("--pollux-dir is required (or --philly-only with --philly)")
    if a.philly_only and not a.philly:
        ap.error("--philly-only needs --philly (figure (c) runs on it)")
    pollux = [] if a.philly_only else workload_files(ap, "--pollux-dir", a.pollux_dir)
    if len({p.stem for p in pollux}) < len(pollux):
        ap.error(f"--pollux-dir {a.pollux_dir}: two workload files share a name")
    a.seeds = list(dict.fromkeys(a.seeds))          # a seed once
    if a.philly:
        input_file(ap, "--philly", a.philly, "a Philly trace CSV")
    read_traces(ap, pollux, a.philly)
    runs = []
    for stat_eff in (True, False):
        for p in pollux:
            runs += [(p, "pollux", 16, 4, 60.0, 0.0, 0, b, stat_eff, 0) for b in BASELINES]
            runs += [(p, "pollux", 16, 4, 60.0, 0.0, s, "ones", stat_eff, 0) for s in a.seeds]
    with input_errors(ap), ProcessPoolExecutor(a.workers) as ex:
        rows = list(ex.map(run_one, runs))
    order = [p.stem for p in pollux]
    over_tiresias = {}
    for stat_eff in (True, False):
        if pollux:
            over_tiresias[stat_eff] = pollux_table(rows, stat_eff, a.seeds, order)
    if pollux:
        x = over_tiresias[True]
        print(goal("(a) ones avg JCT <= 0.40x tiresias's (mean, statistical efficiency on)",
                   x <= 0.40, f"{x:.3f}x"))
    if a.philly:
        print(f"\n== Philly on 64 x 8 GPUs, {a.elastic_share:.0%} elastic, first "
              f"{a.philly_jobs or 'all'} jobs")
        with input_errors(ap):
            for pol in ("slurm-default", "ones"):
                r = run_one((Path(a.philly), "philly", 64, 8, 300.0, a.elastic_share, 0, pol,
                             True, a.philly_jobs))
                print(f"{pol:<15} {r['jobs_per_s']:>8.0f} jobs/s ({r['jobs']} jobs in "
                      f"{r['wall_s']:.1f} s; {r['jobs_per_cpu_s']:.0f} jobs per CPU-second, "
                      f"{r['cpu_s']:.1f} s), avg JCT {r['avg_jct_s']:.0f} s, resizes "
                      f"{r['resizes']}")
        print(goal("(c) ones speed on Philly >= 1,000 jobs/s", r["jobs_per_s"] >= 1000,
                   f"{r['jobs_per_s']:,.0f} jobs/s wall-clock, "
                   f"{r['jobs_per_cpu_s']:,.0f} per CPU-second"))
    predictor_errors()
    t = micro()
    print(f"\n== one ones reconcile pass, 1,000 nodes x 8 GPUs, 10,000 jobs: "
          f"{t:.3f} s (best of 3)")
    print(goal("(d) one ones pass <= 1 s", t <= 1.0, f"{t:.3f} s"))


if __name__ == "__main__":
    main()
