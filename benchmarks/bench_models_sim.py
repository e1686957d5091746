#!/usr/bin/env python3
"""Every policy on clusters of one GPU model and of several: what ``wattctl simulate --compare``
prints, on the Philly trace, per cluster: each policy's energy against slurm-default's (%),
its average and median JCT (and the average against slurm-default's), the jobs finished, the
placements that fell back to Slurm's, and the simulator's speed (jobs/s).

Clusters (``--nodes`` x ``--gpus-per-node``, 64 x 8 by default): all A100, all H100, and the
``--mixed`` groups (V100:22,A100:21,H100:21 by default: 64 nodes, a job runs on one model).
Each run is ``wattctl simulate --trace TRACE --gpu-type MODEL[:NODES,...] --gpus-per-node 8
--policy NAME`` with the site config's policy settings, the built-in carbon series of the
site's zone, seed 0 and class mix ``all``; ``oracle-bound`` is the computed lower bound, as
``--compare`` shows it. ``--limit-jobs N`` runs the first N jobs only (said in the header).

Usage::

    python benchmarks/bench_models_sim.py --trace ../shared/data/traces/philly/philly-2017-09-10.csv \\
        [--policies slurm-default,eaco,...] [--limit-jobs N] [--workers 2] \\
        [--nodes 64] [--gpus-per-node 8] [--mixed V100:22,A100:21,H100:21] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from slurm_plugin.config import load as load_config, policy_settings  # noqa: E402
from slurm_plugin.errors import ConfigError  # noqa: E402
from slurm_plugin.physics.classes import class_mix  # noqa: E402
from slurm_plugin.policy.registry import builtin_policy_names  # noqa: E402
from slurm_plugin.sim.carbon import load_carbon  # noqa: E402
from slurm_plugin.sim.cluster import ClusterSpec, parse_groups  # noqa: E402
from slurm_plugin.sim.run import ORACLE, Inputs, load_jobs, oracle_metrics, simulate  # noqa: E402

from benchmarks._common import (input_errors, input_file, num,  # noqa: E402
                               positive_int)

BASE = "slurm-default"
ALIASES = {"baseline"}


def _inputs(trace: Path, spec: ClusterSpec, limit: int | None, seed: int) -> Inputs:
    return Inputs(trace, "philly", spec, load_config()["carbon.zone"], seed=seed,
                  limit_jobs=limit, class_mix=class_mix("all"))


def one(trace: Path, spec: ClusterSpec, policy: str, limit: int | None, seed: int) -> dict:
    """One ``wattctl simulate --policy`` run (the oracle bound computed as ``--compare`` does)."""
    inputs = _inputs(trace, spec, limit, seed)
    cfg = load_config()
    t0 = time.perf_counter()
    jobs = load_jobs(inputs)
    carbon = load_carbon(None, inputs.zone, jobs[0].submit_s, default_zone=cfg["carbon.zone"])
    if policy == ORACLE:
        r = oracle_metrics(jobs, spec.resolved(), carbon, seed, inputs.class_mix)
    else:
        # as wattctl simulate builds them, for a site that shares by default
        settings = policy_settings(cfg, policy, allow_share=True,
                                   shards_per_gpu=spec.resolved().shards_per_gpu)
        r = simulate(inputs, policy, settings=settings, jobs=jobs, carbon=carbon)
    wall = time.perf_counter() - t0
    return {"energy_kwh": r["energy_kwh"], "avg_jct_s": r["avg_jct_s"],
            "p50_jct_s": r["p50_jct_s"], "jobs": r["jobs"], "finished": r["jobs_finished"],
            "fallbacks": r.get("policy_fallbacks"), "timed_out": r.get("jobs_timed_out"),
            "jobs_per_s": None if policy == ORACLE else r["jobs"] / wall}


def _pct(v: float, base: float | None) -> str:
    """``v`` against ``base`` in percent (``n/a`` without a base)."""
    return f"{100 * (v / base - 1):+.1f} %" if base else "n/a"


def _cluster(label: str, spec: ClusterSpec, policies: list[str], got: dict, trace: Path,
             limit: int | None) -> list[str]:
    base = got.get((label, BASE))
    gt = spec.gpu_type if spec.groups else f"{spec.gpu_type} --nodes {spec.nodes}"
    out = [f"cluster {label}: {spec.nodes} nodes x {spec.gpus_per_node} GPUs"
           + (f" ({', '.join(f'{n} {m}' for m, n in spec.groups)})" if spec.groups else ""),
           f"  = WATTBATCH_POLICY_ALLOW_SHARE=true wattctl simulate --trace {trace} --gpu-type {gt} --gpus-per-node "
           f"{spec.gpus_per_node}" + (f" --limit-jobs {limit}" if limit else "")
           + f" --compare {','.join(policies)}",
           f"  {'policy':16} {'energy kWh':>12} {'energy vs default':>18} {'avg JCT s':>12} "
           f"{'JCT vs default':>18} {'p50 JCT s':>10} {'finished':>9} {'fallbacks':>9} "
           f"{'jobs/s':>7}"]
    for p in policies:
        r = got[(label, p)]
        jct_x = num(r["avg_jct_s"] / base["avg_jct_s"] if base and base["avg_jct_s"] else None,
                    ".3f") + "x"
        out.append(f"  {p:16} {r['energy_kwh']:>12,.0f} "
                   f"{_pct(r['energy_kwh'], base and base['energy_kwh']):>18} "
                   f"{r['avg_jct_s']:>12,.0f} {jct_x:>18} {r['p50_jct_s']:>10,.0f} "
                   f"{r['finished']:>9,} {num(r['fallbacks'], 'd', width=9)} "
                   f"{num(r['jobs_per_s'], ',.0f', width=7)}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, required=True, help="the Philly trace CSV")
    ap.add_argument("--policies", default=",".join(p for p in builtin_policy_names()
                                                   if p not in ALIASES))
    ap.add_argument("--limit-jobs", type=positive_int, default=None,
                    help="only the first N jobs by submit time (default: all)")
    ap.add_argument("--workers", type=positive_int, default=2, help="runs at once")
    ap.add_argument("--nodes", type=positive_int, default=64)
    ap.add_argument("--gpus-per-node", type=positive_int, default=8)
    ap.add_argument("--mixed", default="V100:22,A100:21,H100:21",
                    help="the mixed cluster's groups, MODEL:NODES comma-separated")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    input_file(ap, "--trace", args.trace, "a Philly trace CSV")
    policies = [p.strip() for p in args.policies.split(",")]
    known = builtin_policy_names()
    for p in policies:
        if p not in known:
            ap.error(f"--policies {args.policies}: {p!r} is no policy; choose from: "
                     f"{', '.join(known)}")
    if BASE not in policies:
        policies.insert(0, BASE)
    try:
        groups = parse_groups(args.mixed)
    except ValueError as exc:
        ap.error(f"--mixed {args.mixed}: {exc}")
    if len(groups) < 2:
        ap.error(f"--mixed {args.mixed}: give two groups or more, MODEL:NODES,...")
    gpn = args.gpus_per_node
    clusters = {"A100": ClusterSpec(nodes=args.nodes, gpus_per_node=gpn, gpu_type="A100"),
                "H100": ClusterSpec(nodes=args.nodes, gpus_per_node=gpn, gpu_type="H100"),
                "mixed": ClusterSpec(gpus_per_node=gpn, groups=groups)}
    try:
        clusters["mixed"].resolved()
    except ConfigError as exc:
        ap.error(f"--mixed {args.mixed}: {exc.value!r}: {exc.fix}")
    with input_errors(ap):      # a bad trace, or a job no cluster holds: one error line
        for spec in clusters.values():
            jobs = load_jobs(_inputs(args.trace, spec, args.limit_jobs, args.seed))
    print(f"trace {args.trace.name}: {len(jobs):,} jobs"
          + (f" (the first {args.limit_jobs:,}: --limit-jobs)" if args.limit_jobs else
             " (all of it)") + f"; seed {args.seed}, class mix all, site config settings")
    cells = [(label, p) for label in clusters for p in policies]
    got: dict[tuple[str, str], dict] = {}
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        futures = {cell: pool.submit(one, args.trace, clusters[cell[0]], cell[1],
                                     args.limit_jobs, args.seed) for cell in cells}
        for cell, f in futures.items():
            got[cell] = f.result()
            r = got[cell]
            print(f"{cell[0]:6} {cell[1]:16} {r['energy_kwh']:>12,.0f} kWh avg JCT "
                  f"{r['avg_jct_s']:>10,.0f} s " + (f"{r['jobs_per_s']:,.0f} jobs/s"
                                                     if r["jobs_per_s"] else ""),
                  file=sys.stderr, flush=True)
    for label, spec in clusters.items():
        print()
        print("\n".join(_cluster(label, spec, policies, got, args.trace, args.limit_jobs)))
    print()
    print(f"energy against {BASE} (%) and avg JCT against {BASE} (x), per cluster")
    print(f"  {'policy':16}" + "".join(f" {label:>22}" for label in clusters))
    for p in policies:
        cells_out = []
        for label in clusters:
            r, b = got[(label, p)], got[(label, BASE)]
            jct_x = r["avg_jct_s"] / b["avg_jct_s"] if b["avg_jct_s"] else None
            cells_out.append(f"{_pct(r['energy_kwh'], b['energy_kwh'])} {num(jct_x, '.2f')}x")
        print(f"  {p:16}" + "".join(f" {c:>22}" for c in cells_out))
    rates = [(r["jobs_per_s"], cell) for cell, r in got.items() if r["jobs_per_s"]]
    if rates:
        rate, (label, p) = min(rates)
        print(f"slowest run: {rate:,.0f} jobs/s ({p} on {label}, trace reading included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
