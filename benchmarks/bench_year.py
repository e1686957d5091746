#!/usr/bin/env python3
"""The simulator at a year's scale: a million jobs on 10,000 nodes x 8 GPUs, every policy and
the stack, each in a process of its own (one core): wall time, jobs/s and peak memory, against
the goal of 15 minutes and 2 GB per policy.

The workload is a trace repeated (``wattctl simulate --repeat K``: K copies overlaid on the
trace's own span, copy i shifted by i/K of it, ids renumbered): the Philly trace's 52,849 jobs
19 times make 1,004,131, arriving 19 times as fast as on Philly's cluster. Settings as the
wrapper builds them for a site that shares by default, the site's carbon zone, seed 0, class
mix ``all``, the variability profile where given. ``--limit-jobs N`` runs the first N jobs
only (a quick look; the goal verdicts then say n/a).

Usage::

    python benchmarks/bench_year.py --trace ../shared/data/traces/philly/philly-2017-09-10.csv \\
        --variability ../shared/data/variability/32gpu-variability.csv \\
        [--repeat 19] [--nodes 10000] [--policies eaco,pal+eaco+greenflow+elastic] \\
        [--limit-jobs N] [--timeout-s 1800] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from _common import goal, input_file, num, positive_int  # (the checkout on sys.path)

GOAL_S = 15 * 60
GOAL_MB = 2048
STACK = "pal+eaco+greenflow+elastic"


def every_policy() -> list[str]:
    from slurm_plugin.policy.registry import policy_names
    return [p for p in policy_names() if p not in ("oracle-bound", "baseline")] + [STACK]


def one(a: argparse.Namespace) -> dict:
    """Run ``a.one`` in this process; its figures (the parent reads them from stdout)."""
    os.environ["WATTBATCH_POLICY_ALLOW_SHARE"] = "true"
    from slurm_plugin.config import load as load_config, policy_settings
    from slurm_plugin.physics.classes import class_mix
    from slurm_plugin.sim.carbon import load_carbon
    from slurm_plugin.sim.cluster import ClusterSpec
    from slurm_plugin.sim.run import Inputs, load_jobs, simulate
    cfg = load_config()
    spec = ClusterSpec(nodes=a.nodes, gpus_per_node=8)
    inputs = Inputs(Path(a.trace), a.trace_format, spec, cfg["carbon.zone"],
                    variability=Path(a.variability) if a.variability else None, seed=0,
                    limit_jobs=a.limit_jobs, class_mix=class_mix("all"), repeat=a.repeat)
    t0 = time.perf_counter()
    jobs = load_jobs(inputs)
    carbon = load_carbon(None, inputs.zone, jobs[0].submit_s, default_zone=cfg["carbon.zone"])
    load_s = time.perf_counter() - t0
    settings = policy_settings(cfg, a.one, allow_share=True,
                               shards_per_gpu=spec.resolved().shards_per_gpu)
    t1 = time.perf_counter()
    shown = [t1]

    def progress(done: int, total: int) -> None:      # a line a minute on stderr
        now = time.perf_counter()
        if now - shown[0] >= 60:
            shown[0] = now
            print(f"{a.one}: {done:,} of {total:,} jobs finished after {now - t1:,.0f} s, "
                  f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB",
                  file=sys.stderr, flush=True)

    r = simulate(inputs, a.one, settings=settings, jobs=jobs, carbon=carbon, progress=progress)
    sim_s = time.perf_counter() - t1
    return {"policy": a.one, "jobs": r["jobs"], "finished": r["jobs_finished"],
            "load_s": load_s, "sim_s": sim_s, "wall_s": load_s + sim_s,
            "jobs_per_s": r["jobs"] / max(sim_s, 1e-9),
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "energy_kwh": r["energy_kwh"], "avg_jct_s": r["avg_jct_s"],
            "avg_queue_s": r["avg_queue_s"], "fallbacks": r["policy_fallbacks"]}


def run(a: argparse.Namespace, policy: str) -> dict:
    argv = [sys.executable, __file__, "--one", policy, "--trace", a.trace, "--trace-format",
            a.trace_format, "--repeat", str(a.repeat), "--nodes", str(a.nodes)]
    if a.variability:
        argv += ["--variability", a.variability]
    if a.limit_jobs:
        argv += ["--limit-jobs", str(a.limit_jobs)]
    t0 = time.perf_counter()
    try:       # the child's progress lines go straight to this stderr
        p = subprocess.run(argv, stdout=subprocess.PIPE, text=True, timeout=a.timeout_s)
    except subprocess.TimeoutExpired:
        return {"policy": policy, "error": f"over --timeout-s {a.timeout_s:g}",
                "wall_s": time.perf_counter() - t0}
    if p.returncode != 0:
        return {"policy": policy, "error": f"exit {p.returncode} (its error above)"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", required=True)
    ap.add_argument("--trace-format", default="philly")
    ap.add_argument("--variability", default=None)
    ap.add_argument("--repeat", type=positive_int, default=19)
    ap.add_argument("--nodes", type=positive_int, default=10_000)
    ap.add_argument("--policies", default=None,
                    help=f"comma-separated (default: every registered policy and {STACK})")
    ap.add_argument("--limit-jobs", type=positive_int, default=None)
    ap.add_argument("--timeout-s", type=positive_int, default=1800)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    input_file(ap, "--trace", a.trace, "a trace file")
    if a.variability:
        input_file(ap, "--variability", a.variability, "a variability profile CSV")
    if a.one:
        print(json.dumps(one(a)))
        return 0
    from slurm_plugin.errors import ConfigError, InputError
    from slurm_plugin.policy import get_policy
    names = [p.strip() for p in a.policies.split(",")] if a.policies else every_policy()
    for name in names:
        try:
            get_policy(name, "--policies")
        except (ConfigError, InputError) as exc:
            ap.error(str(exc))
    full = a.limit_jobs is None
    print(f"{a.repeat} x {Path(a.trace).name} on {a.nodes:,} nodes x 8 GPUs"
          + ("" if full else f", the first {a.limit_jobs:,} jobs") + ", one process each",
          flush=True)
    print(f"{'policy':<28} {'jobs':>10} {'load s':>7} {'sim s':>8} {'jobs/s':>7} "
          f"{'peak MB':>8} {'energy MWh':>11} {'avg wait s':>10}", flush=True)
    rows = []
    for name in names:
        r = run(a, name)
        rows.append(r)
        if "error" in r:
            print(f"{name:<28} failed: {r['error']}", flush=True)
            continue
        print(f"{name:<28} {r['jobs']:>10,} {r['load_s']:>7.1f} {r['sim_s']:>8.1f} "
              f"{r['jobs_per_s']:>7,.0f} {r['peak_mb']:>8,.0f} "
              f"{num(r['energy_kwh'] / 1000, ',.1f', width=11)} {r['avg_queue_s']:>10,.0f}",
              flush=True)
    ok = [r for r in rows if "error" not in r]
    for r in ok:
        if r["fallbacks"]:
            print(f"warning: {r['policy']}: the policy (or a stage of it) failed "
                  f"{r['fallbacks']:,} times and the job went in as before it: its time is "
                  "not the policy's", flush=True)
    slowest = max(ok, key=lambda r: r["wall_s"], default=None)
    largest = max(ok, key=lambda r: r["peak_mb"], default=None)
    print(goal("every policy within 15 minutes", (len(ok) == len(rows) and slowest is not None
                                                  and slowest["wall_s"] <= GOAL_S)
               if full else None,
               f"slowest {slowest['policy']} {slowest['wall_s']:,.0f} s" if slowest else
               "none ran"))
    print(goal("every policy within 2 GB", (len(ok) == len(rows) and largest is not None
                                            and largest["peak_mb"] <= GOAL_MB)
               if full else None,
               f"largest {largest['policy']} {largest['peak_mb']:,.0f} MB" if largest else
               "none ran"))
    if a.json:
        print(json.dumps(rows, indent=1))
    return 0 if len(ok) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
