#!/usr/bin/env python3
"""EaCO with MIG instances beside time-sliced sharing: on clusters of one MIG-capable model
(all A100, all H100 by default; ``--models``), the Philly trace through slurm-default and
through eaco with each ``--share-modes`` setting (``shard`` as shipped, ``shard,mig``): energy,
average JCT, both against slurm-default, and the placements eaco made in MIG instances.

Each run is ``wattctl simulate --trace TRACE --gpu-type MODEL --nodes N --gpus-per-node G
--policy P`` with the site config's eaco settings, ``eaco.share_modes`` set per row (as
``WATTBATCH_EACO_SHARE_MODES=shard,mig`` sets it for ``wattctl``), the built-in carbon series
of the site's zone, seed 0 and class mix ``all`` (``--class-mix``). ``--limit-jobs N`` runs
the first N jobs only (said in the header).

Usage::

    python benchmarks/bench_mig_sim.py --trace ../shared/data/traces/philly/philly-2017-09-10.csv \\
        [--models A100,H100] [--share-modes shard/shard,mig] [--limit-jobs N] [--workers 2] \\
        [--nodes 64] [--gpus-per-node 8] [--class-mix all] [--seed 0]
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
from slurm_plugin.errors import ConfigError, InputError  # noqa: E402
from slurm_plugin.physics.classes import class_mix  # noqa: E402
from slurm_plugin.physics.mig import supports_mig  # noqa: E402
from slurm_plugin.policy import get_policy  # noqa: E402
from slurm_plugin.policy.eaco.settings import EacoSettings  # noqa: E402
from slurm_plugin.sim.carbon import load_carbon  # noqa: E402
from slurm_plugin.sim.cluster import ClusterSpec  # noqa: E402
from slurm_plugin.sim.engine import Simulator  # noqa: E402
from slurm_plugin.sim.run import Inputs, load_jobs  # noqa: E402

from benchmarks._common import input_errors, input_file, num, positive_int  # noqa: E402

BASE = "slurm-default"


class Counted:
    """A policy whose placements are counted by sharing mode (nothing else changes)."""

    def __init__(self, policy) -> None:
        self.policy, self.name = policy, policy.name
        self.slurm_settings = getattr(policy, "slurm_settings", {})
        self.modes: dict[str, int] = {}

    def advise(self, request, ctx):
        pl = self.policy.advise(request, ctx)
        self.modes[pl.share_mode] = self.modes.get(pl.share_mode, 0) + 1
        return pl

    def reconcile(self, ctx):
        return self.policy.reconcile(ctx)


def one(trace: Path, model: str, nodes: int, gpn: int, policy: str, modes: tuple[str, ...],
        limit: int | None, mix: str, seed: int) -> dict:
    cfg = load_config()
    inputs = Inputs(trace, "philly", ClusterSpec(nodes=nodes, gpus_per_node=gpn, gpu_type=model),
                    cfg["carbon.zone"], seed=seed, limit_jobs=limit, class_mix=class_mix(mix))
    t0 = time.perf_counter()
    jobs = load_jobs(inputs)
    carbon = load_carbon(None, inputs.zone, jobs[0].submit_s, default_zone=cfg["carbon.zone"])
    settings = dict(policy_settings(cfg, policy, allow_share=True,
                                    shards_per_gpu=inputs.spec.resolved().shards_per_gpu))
    if policy == "eaco":
        settings["share_modes"] = list(modes)
    counted = Counted(get_policy(policy))
    r = Simulator(jobs, inputs.spec, counted, carbon=carbon, seed=seed,
                  class_mix=inputs.class_mix, settings=settings).run()
    return {"energy_kwh": r["energy_kwh"], "avg_jct_s": r["avg_jct_s"], "jobs": r["jobs"],
            "finished": r["jobs_finished"], "stretch": r["avg_runtime_stretch"],
            "nodes_on": r["avg_nodes_on"], "mig": counted.modes.get("mig", 0),
            "jobs_per_s": r["jobs"] / (time.perf_counter() - t0)}


def _modes(ap: argparse.ArgumentParser, text: str) -> list[tuple[str, ...]]:
    out = []
    for part in text.split("/"):
        try:
            out.append(EacoSettings.from_mapping({"share_modes": part}).share_modes)
        except ConfigError as exc:
            ap.error(f"--share-modes {text}: {part!r}: {exc.fix}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, required=True, help="the Philly trace CSV")
    ap.add_argument("--models", default="A100,H100", help="one cluster per model, comma-separated")
    ap.add_argument("--share-modes", default="shard/shard,mig",
                    help="eaco's share_modes per row, rows separated by '/'")
    ap.add_argument("--limit-jobs", type=positive_int, default=None,
                    help="only the first N jobs by submit time (default: all)")
    ap.add_argument("--workers", type=positive_int, default=2, help="runs at once")
    ap.add_argument("--nodes", type=positive_int, default=64)
    ap.add_argument("--gpus-per-node", type=positive_int, default=8)
    ap.add_argument("--class-mix", default="all")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    input_file(ap, "--trace", args.trace, "a Philly trace CSV")
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in models:
        if not supports_mig(m):
            ap.error(f"--models {args.models}: {m!r} is no catalogued model with MIG")
    rows = _modes(ap, args.share_modes)
    try:
        class_mix(args.class_mix)
    except InputError as exc:
        ap.error(f"--class-mix {args.class_mix}: {exc}")
    with input_errors(ap):
        for m in models:
            load_jobs(Inputs(args.trace, "philly", ClusterSpec(
                nodes=args.nodes, gpus_per_node=args.gpus_per_node, gpu_type=m), "GB",
                limit_jobs=args.limit_jobs))
    cells = [(m, BASE, ()) for m in models] + [(m, "eaco", r) for m in models for r in rows]
    got: dict[tuple, dict] = {}
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        futures = {c: pool.submit(one, args.trace, c[0], args.nodes, args.gpus_per_node, c[1],
                                  c[2], args.limit_jobs, args.class_mix, args.seed)
                   for c in cells}
        for c, f in futures.items():
            got[c] = f.result()
            print(f"{c[0]} {c[1]} {','.join(c[2])}: {got[c]['energy_kwh']:,.0f} kWh, "
                  f"{got[c]['jobs_per_s']:,.0f} jobs/s", file=sys.stderr, flush=True)
    some = next(iter(got.values()))
    print(f"trace {args.trace.name}: {some['jobs']:,} jobs"
          + (f" (the first {args.limit_jobs:,}: --limit-jobs)" if args.limit_jobs else "")
          + f"; {args.nodes} nodes x {args.gpus_per_node} GPUs; seed {args.seed}, class mix "
          f"{args.class_mix}, site config settings")
    for m in models:
        base = got[(m, BASE, ())]
        print(f"\n{m}: WATTBATCH_POLICY_ALLOW_SHARE=true wattctl simulate --trace {args.trace} --gpu-type {m} --nodes {args.nodes} "
              f"--gpus-per-node {args.gpus_per_node}")
        print(f"  {'policy':26} {'energy kWh':>11} {'vs default':>11} {'avg JCT s':>11} "
              f"{'vs default':>10} {'stretch':>8} {'nodes on':>9} {'MIG jobs':>9} "
              f"{'finished':>9} {'jobs/s':>7}")
        for c in [(m, BASE, ())] + [(m, "eaco", r) for r in rows]:
            r = got[c]
            label = c[1] + (f" share_modes={','.join(c[2])}" if c[2] else "")
            e = 100 * (r["energy_kwh"] / base["energy_kwh"] - 1) if base["energy_kwh"] else None
            j = r["avg_jct_s"] / base["avg_jct_s"] if base["avg_jct_s"] else None
            print(f"  {label:26} {r['energy_kwh']:>11,.0f} {num(e, '+.1f'):>9} % "
                  f"{r['avg_jct_s']:>11,.0f} {num(j, '.3f'):>9}x {r['stretch']:>8.3f} "
                  f"{r['nodes_on']:>9.1f} {r['mig']:>9,} {r['finished']:>9,} "
                  f"{r['jobs_per_s']:>7,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
