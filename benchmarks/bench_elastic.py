#!/usr/bin/env python3
"""The elastic policy's figures: average JCT and makespan against slurm-default.

(a) Pollux workloads 1..8 on 64 GPUs (16 nodes x 4): avg JCT ratio (goal <= 0.35x) and
makespan ratio (goal <= 0.55x) of ``elastic`` and of the termination-based baseline
``elastic-restart``, per workload and mean/min/max over the eight; the worst wait of each
against slurm-default's (the fairness factor);
(b) Philly Sep-Oct on 64 x 8 GPUs with a seeded share of jobs elastic (``sim/elastic_share.py``,
``--elastic-share``, default 0.5): the same ratios;
(c) (a) and (b) again with the restart cost doubled, ``elastic`` told so by the site key and,
as ``elastic@site``, left with the site's ``--restart-s`` (its jobs measure the cost of their
own restarts);
and ``elastic@tiers``, ``elastic`` with ``order_queue = true`` (queue tiers by the GPU-time a
job asks for, aged every ``tier_age_s``): what the queue order adds, and its worst wait;
(d) ``elastic``'s speed on Philly, jobs per second of simulation (goal >= 2,000);
(e) the lower bounds no scheduler on whole GPUs can beat on the Pollux workloads (``sim/bounds.py``),
as ratios to slurm-default: how far (a)'s goals can be met at all.
Reconcile passes every ``--interval-s`` (60 s, Pollux's scheduling interval) on the Pollux
workloads and every ``--philly-interval-s`` (300 s, the simulator's default) on Philly.

Usage::

    python benchmarks/bench_elastic.py --pollux-dir ../shared/data/workloads/pollux/workloads \\
        --philly ../shared/data/traces/philly/philly-2017-09-10.csv
    python benchmarks/bench_elastic.py --philly-only \\
        --philly ../shared/data/traces/philly/philly-2017-09-10.csv      # (b) and (d) only
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
from slurm_plugin.policy.elastic.settings import ElasticSettings  # noqa: E402
from slurm_plugin.sim.bounds import lower_bounds  # noqa: E402
from slurm_plugin.sim.cluster import ClusterSpec  # noqa: E402
from slurm_plugin.sim.elastic_share import make_elastic  # noqa: E402
from slurm_plugin.sim.engine import Simulator  # noqa: E402
from slurm_plugin.sim.fluid import fluid_srpt_jct_s  # noqa: E402
from slurm_plugin.sim.trace import read_trace  # noqa: E402

from benchmarks._common import (read_traces, goal, input_errors, input_file,  # noqa: E402
                               nonneg_float, num, positive_float, positive_int, share,
                               workload_files)

POLICIES = ("slurm-default", "elastic-restart", "elastic")
SITE = "elastic@site"       # elastic with the site key at --restart-s whatever the restarts cost
TIERS = "elastic@tiers"     # elastic with queue tiers (order_queue = true)


def run_one(args: tuple) -> dict:
    path, fmt, nodes, gpn, interval, restart, share, seed, policy, site_restart = args
    jobs = read_trace(path, fmt)
    if share:
        jobs = make_elastic(jobs, share, seed)
    spec = ClusterSpec(nodes=nodes, gpus_per_node=gpn, reconcile_interval_s=interval,
                       restart_cost_s=restart)
    t0 = time.perf_counter()
    settings = {"restart_cost_s": restart} if policy == "elastic" else \
        {"restart_cost_s": site_restart} if policy == SITE else \
        {"restart_cost_s": restart, "order_queue": True} if policy == TIERS else None
    sim = Simulator(jobs, spec, get_policy(policy.split("@")[0]), seed=seed, settings=settings)
    r = sim.run()
    wall = time.perf_counter() - t0
    return {"trace": str(path), "policy": policy, "restart_s": restart,
            "avg_jct_s": r["avg_jct_s"], "makespan_s": r["makespan_s"],
            "max_wait_s": max(sim.metrics.queue, default=0.0), "jobs": r["jobs"],
            "finished": r["jobs_finished"], "timed_out": r["jobs_timed_out"],
            "resizes": r["actions"].get("resize", 0), "wall_s": wall,
            "jobs_per_s": r["jobs"] / wall if wall else 0.0}


def ratios(rows: list[dict], trace: str, restart: float, policy: str) -> tuple[float, float, float]:
    """avg JCT, makespan and worst-wait ratios to slurm-default's; the last is NaN when no job
    waited under slurm-default (``wait_na`` says why)."""
    by = {r["policy"]: r for r in rows if r["trace"] == trace and r["restart_s"] == restart}
    b, e = by["slurm-default"], by[policy]
    return (e["avg_jct_s"] / b["avg_jct_s"], e["makespan_s"] / b["makespan_s"],
            e["max_wait_s"] / b["max_wait_s"] if b["max_wait_s"] else float("nan"))


def wait_na(rows: list[dict], trace: str, restart: float, policy: str) -> str:
    """Why a worst-wait ratio is n/a: no job waited under slurm-default."""
    e = next(r for r in rows if r["trace"] == trace and r["restart_s"] == restart
             and r["policy"] == policy)
    return ("no job waited under slurm-default nor " + policy if not e["max_wait_s"] else
            f"no job waited under slurm-default; {policy}'s worst wait {e['max_wait_s']:.0f} s")


def spread(xs: list[float]) -> str:
    xs = [x for x in xs if x == x]          # NaN: no ratio (said where it is printed)
    if not xs:
        return "n/a (no slurm-default wait to compare with)"
    return f"{statistics.mean(xs):.3f} (min {min(xs):.3f}, max {max(xs):.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pollux-dir", default=None,
                    help="folder of workload-1..8.csv (every *.csv in it, workload-N by N)")
    ap.add_argument("--philly", default=None, help="Philly CSV (skipped when absent)")
    ap.add_argument("--elastic-share", type=share, default=0.5)
    ap.add_argument("--restart-s", type=nonneg_float, default=90.0)
    ap.add_argument("--interval-s", type=positive_float, default=60.0)
    ap.add_argument("--philly-interval-s", type=positive_float, default=300.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=positive_int, default=1)
    ap.add_argument("--philly-only", action="store_true",
                    help="only the Philly runs (figures (b) and (d): ratios and speed)")
    a = ap.parse_args()
    if not a.philly_only and not a.pollux_dir:
        ap.error("--pollux-dir is required (or --philly-only with --philly)")
    if a.philly_only and not a.philly:
        ap.error("--philly-only needs --philly")
    pollux = [] if a.philly_only else workload_files(ap, "--pollux-dir", a.pollux_dir)
    if a.philly:
        input_file(ap, "--philly", a.philly, "a Philly trace CSV")
    read_traces(ap, pollux, a.philly)
    wl = max([12] + [len(p.stem) + 2 for p in pollux])     # the workload column's width
    jobs = []
    for restart in (a.restart_s, 2 * a.restart_s):
        pols = POLICIES + ((SITE,) if restart != a.restart_s else (TIERS,))
        for p in pollux:
            jobs += [(p, "pollux", 16, 4, a.interval_s, restart, 0.0, a.seed, pol, a.restart_s)
                     for pol in pols]
        if a.philly:
            jobs += [(Path(a.philly), "philly", 64, 8, a.philly_interval_s, restart,
                      a.elastic_share, a.seed, pol, a.restart_s) for pol in pols]
    with input_errors(ap), ProcessPoolExecutor(a.workers) as ex:
        rows = list(ex.map(run_one, jobs))
    for restart in (a.restart_s, 2 * a.restart_s):
        print(f"\n== restart cost {restart:g} s" + (": Pollux workloads on 16 x 4 GPUs "
              "(ratios to slurm-default)" if pollux else ""))
        if pollux:
            print(f"{'workload':<{wl}}{'policy':<17}{'avg JCT':>9}{'makespan':>10}"
                  f"{'worst wait':>11}{'resizes':>9}{'timed out':>10}")
        pols = POLICIES[1:] + ((SITE,) if restart != a.restart_s else (TIERS,))
        agg: dict[str, list[tuple[float, float, float]]] = {p: [] for p in pols}
        nas: list[str] = []
        for p in pollux:
            for pol in pols:
                jr, mr, wr = ratios(rows, str(p), restart, pol)
                agg[pol].append((jr, mr, wr))
                r = next(x for x in rows if x["trace"] == str(p) and x["policy"] == pol
                         and x["restart_s"] == restart)
                if wr != wr:
                    nas.append(f"{p.stem} {pol}: {wait_na(rows, str(p), restart, pol)}")
                print(f"{p.stem:<{wl}}{pol:<17}{jr:>9.3f}{mr:>10.3f}{num(wr, '.2f', width=11)}"
                      f"{r['resizes']:>9}{r['timed_out']:>10}")
        for line in nas:
            print(f"worst wait n/a ({line})")
        for pol, xs in agg.items():
            if not xs:
                continue
            print(f"{pol}: avg JCT {spread([x[0] for x in xs])}  makespan "
                  f"{spread([x[1] for x in xs])}  worst wait {spread([x[2] for x in xs])}")
        if pollux:
            lows, fluid = [], []
            for p in pollux:
                b = next(x for x in rows if x["trace"] == str(p) and x["restart_s"] == restart
                         and x["policy"] == "slurm-default")
                jobs = read_trace(p, "pollux")
                low = lower_bounds(jobs, 16 * 4)
                lows.append((low.avg_jct_s / b["avg_jct_s"], low.makespan_s / b["makespan_s"]))
                fluid.append(fluid_srpt_jct_s(jobs, 16 * 4) / b["avg_jct_s"])
            print(f"lower bound for any scheduler on whole GPUs (sim/bounds.py): avg JCT "
                  f"{spread([x[0] for x in lows])}  makespan {spread([x[1] for x in lows])}")
            print(f"fluid shortest-remaining-first, every length known, free moves, no nodes "
                  f"(sim/fluid.py; a reference, not a bound): avg JCT {spread(fluid)}")
        pollux_names = {str(p) for p in pollux}
        if pollux and all(not x["resizes"] for x in rows if x["policy"] == "elastic-restart"
                          and x["restart_s"] == restart and x["trace"] in pollux_names):
            print("elastic-restart never restarts a job (0 resizes: each job's count is fixed "
                  "when it starts), so the restart cost does not apply to it"
                  + (": its rows repeat the first block's" if restart != a.restart_s else ""))
        if agg["elastic"]:
            waits = [x[2] for x in agg["elastic"] if x[2] == x[2]]
            bound = ElasticSettings().fairness_factor
            if waits:
                worst = max(waits)
                print(f"elastic worst wait {worst:.2f}x slurm-default's: "
                      f"{'within' if worst <= bound else 'OVER'} fairness_factor {bound:g}"
                      + (f" ({len(agg['elastic']) - len(waits)} workload(s) n/a: no job waited "
                         "under slurm-default)" if len(waits) < len(agg["elastic"]) else ""))
            else:
                print(f"elastic worst wait: n/a (no job waited under slurm-default on any "
                      f"workload): no verdict on fairness_factor {bound:g}")
            jct = statistics.mean(x[0] for x in agg["elastic"])
            mk = statistics.mean(x[1] for x in agg["elastic"])
            print(goal("elastic avg JCT <= 0.35x slurm-default (Pollux, mean)", jct <= 0.35,
                       f"{jct:.3f}x"))
            print(goal("elastic makespan <= 0.55x slurm-default (Pollux, mean)", mk <= 0.55,
                       f"{mk:.3f}x"))
        if a.philly:
            print(f"-- Philly on 64 x 8 GPUs, {a.elastic_share:.0%} of jobs elastic (seed {a.seed})")
            b = next(x for x in rows if x["trace"] == str(Path(a.philly))
                     and x["policy"] == "slurm-default" and x["restart_s"] == restart)
            print(f"{'slurm-default':<17} avg JCT {b['avg_jct_s']:.0f} s  makespan "
                  f"{b['makespan_s']:.0f} s  worst wait {b['max_wait_s']:.0f} s  "
                  f"{b['jobs_per_s']:.0f} jobs/s ({b['jobs']} jobs in {b['wall_s']:.1f} s)")
            for pol in pols:
                jr, mr, wr = ratios(rows, str(Path(a.philly)), restart, pol)
                r = next(x for x in rows if x["trace"] == str(Path(a.philly))
                         and x["policy"] == pol and x["restart_s"] == restart)
                why = "" if wr == wr else wait_na(rows, str(Path(a.philly)), restart, pol)
                print(f"{pol:<17} avg JCT {jr:.3f}  makespan {mr:.3f}  "
                      f"worst wait {num(wr, '.2f', why)}  "
                      f"resizes {r['resizes']}  timed out {r['timed_out']}  "
                      f"{r['jobs_per_s']:.0f} jobs/s ({r['jobs']} jobs in {r['wall_s']:.1f} s)")
                if pol == "elastic":
                    speed = r["jobs_per_s"]
            if restart == a.restart_s:
                print(goal("(d) elastic speed on Philly >= 2,000 jobs/s", speed >= 2000,
                           f"{speed:,.0f} jobs/s"))


if __name__ == "__main__":
    main()
