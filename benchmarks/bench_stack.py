#!/usr/bin/env python3
"""The policy stack against each of its policies alone, at several loads: energy, carbon,
average and geomean JCT, makespan, and the simulator's speed, per cluster size, with
slurm-default's average queue wait to say how loaded each size is, slurm-powersave and the
energy bound within the share limit (``oracle-bound`` with eaco's ``max_jobs_per_gpu``) beside
them, and the issue's goals as verdict lines:

- no single policy better than the stack by more than 2 % on energy, carbon or average JCT;
- the stack at least 5 % better than each single policy on one of the three;
- the stack's energy captures >= 50 % of the headroom between slurm-powersave and the bound,
  at average JCT no worse than slurm-default's. Beside it, the energy bound at that JCT
  (``sim/energy_bound.py``: no schedule whose average JCT is slurm-default's or less needs less)
  says how much of the headroom any such schedule can capture. Beside them, the headroom
  against the bound within the share limit priced with interference (``sim/shared_bound.py``:
  co-location slowdowns and a shared GPU's one power limit and throttle as the simulator has
  them; the oracle's bound within the limit prices neither, and simulated schedules can beat it);
- the stack simulates >= 2,000 jobs/s.

Each run is ``WATTBATCH_POLICY_ALLOW_SHARE=true wattctl simulate --trace TRACE --nodes N
--gpus-per-node 8 --variability PROFILE --policy NAME`` (settings as the wrapper builds them,
for a site that shares by default), the site's carbon zone, seed 0, class mix ``all``.

Usage::

    python benchmarks/bench_stack.py --trace ../shared/data/traces/philly/philly-2017-09-10.csv \\
        --variability ../shared/data/variability/32gpu-variability.csv --sizes 256,96,64 \\
        [--stack pal+eaco+greenflow+elastic] [--limit-jobs N] [--workers 2]
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
from slurm_plugin.physics.classes import class_mix  # noqa: E402
from slurm_plugin.sim.carbon import load_carbon  # noqa: E402
from slurm_plugin.physics.variability import load_profile  # noqa: E402
from slurm_plugin.sim.cluster import ClusterSpec  # noqa: E402
from slurm_plugin.sim.energy_bound import energy_within_jct  # noqa: E402
from slurm_plugin.sim.run import ORACLE, Inputs, load_jobs, oracle_metrics, simulate  # noqa: E402
from slurm_plugin.sim.shared_bound import shared_energy_bound_kwh  # noqa: E402

from benchmarks._common import goal, input_file, positive_int  # noqa: E402

METRICS = ("energy_kwh", "carbon_kg", "avg_jct_s", "geomean_jct_s", "makespan_s")
GOALS = ("energy_kwh", "carbon_kg", "avg_jct_s")


def one(trace: Path, variability: Path | None, nodes: int, policy: str, limit: int | None,
        seed: int) -> dict:
    cfg = load_config()
    spec = ClusterSpec(nodes=nodes, gpus_per_node=8)
    inputs = Inputs(trace, "philly", spec, cfg["carbon.zone"], variability=variability,
                    seed=seed, limit_jobs=limit, class_mix=class_mix("all"))
    jobs = load_jobs(inputs)
    carbon = load_carbon(None, inputs.zone, jobs[0].submit_s, default_zone=cfg["carbon.zone"])
    t0 = time.perf_counter()
    if policy == ORACLE:
        r = oracle_metrics(jobs, spec.resolved(), carbon, seed, inputs.class_mix,
                           int(cfg["eaco.max_jobs_per_gpu"]))
    else:
        settings = policy_settings(cfg, policy, allow_share=True,
                                   shards_per_gpu=spec.resolved().shards_per_gpu)
        r = simulate(inputs, policy, settings=settings, jobs=jobs, carbon=carbon)
    wall = time.perf_counter() - t0
    return {**{k: r[k] for k in METRICS}, "avg_queue_s": r["avg_queue_s"],
            "jobs": r["jobs"], "finished": r["jobs_finished"],
            "timed_out": r.get("jobs_timed_out", 0),
            "jobs_per_s": None if policy == ORACLE else r["jobs"] / max(wall, 1e-9)}


def jct_bound(trace: Path, variability: Path | None, nodes: int, limit: int | None, seed: int,
              avg_jct_s: float) -> float | None:
    """The energy bound (kWh) at slurm-default's average JCT, on the fastest GPU's time."""
    cfg = load_config()
    spec = ClusterSpec(nodes=nodes, gpus_per_node=8)
    inputs = Inputs(trace, "philly", spec, cfg["carbon.zone"], variability=variability,
                    seed=seed, limit_jobs=limit, class_mix=class_mix("all"))
    fastest = 1.0
    if variability is not None:
        fastest = min(min(g.values()) for g in load_profile(variability).factors(
            spec.resolved().gpu_count, seed))
    return energy_within_jct(load_jobs(inputs), spec, avg_jct_s, seed=seed,
                             mix=inputs.class_mix, max_jobs_per_gpu=int(cfg["eaco.max_jobs_per_gpu"]),
                             time_factor=min(1.0, fastest))


def priced_bound(trace: Path, variability: Path | None, nodes: int, limit: int | None,
                 seed: int) -> float:
    """The energy bound (kWh) within eaco's share limit, interference and the shared GPU's
    throttle priced as the simulator does (variability only slows a job: the bound holds with
    it)."""
    cfg = load_config()
    spec = ClusterSpec(nodes=nodes, gpus_per_node=8)
    inputs = Inputs(trace, "philly", spec, cfg["carbon.zone"], variability=variability,
                    seed=seed, limit_jobs=limit, class_mix=class_mix("all"))
    return shared_energy_bound_kwh(load_jobs(inputs), spec, seed=seed, mix=inputs.class_mix,
                                   max_jobs_per_gpu=int(cfg["eaco.max_jobs_per_gpu"]))


def _verdicts(stack: str, singles: list[str], got: dict, at_jct: float | None,
              priced: float) -> list[str]:
    s = got[stack]
    out = []
    worse = [(p, m, got[p][m] / s[m]) for p in singles for m in GOALS if got[p][m] < 0.98 * s[m]]
    out.append(goal("no single policy >2 % better than the stack", not worse,
                    "; ".join(f"{p} {m} {x:.3f}x" for p, m, x in worse) or "none"))
    lacking = [p for p in singles if not any(s[m] <= 0.95 * got[p][m] for m in GOALS)]
    out.append(goal("stack >=5 % better than each single on one of energy/carbon/JCT",
                    not lacking, ", ".join(lacking) or "all"))
    base, bound = got["slurm-powersave"]["energy_kwh"], got[ORACLE]["energy_kwh"]
    share = (base - s["energy_kwh"]) / (base - bound) if base > bound else None
    jct_ok = s["avg_jct_s"] <= got["slurm-default"]["avg_jct_s"]
    reach = (base - at_jct) / (base - bound) if at_jct is not None and base > bound else None
    out.append(goal("stack captures >=50 % of the energy headroom at JCT <= slurm-default's",
                    None if share is None else share >= 0.5 and jct_ok,
                    f"{share:.0%} of {base - bound:,.0f} kWh, JCT "
                    f"{s['avg_jct_s'] / got['slurm-default']['avg_jct_s']:.2f}x; any schedule at "
                    "slurm-default's JCT captures at most "
                    + (f"{reach:.0%}" if reach is not None else "n/a")
                    if share is not None else "no headroom"))
    priced_share = (base - s["energy_kwh"]) / (base - priced) if base > priced else None
    killed = f"; {s['timed_out']} jobs killed at their limits: the bound counts all their work" \
        if s["timed_out"] else ""
    out.append(goal("stack captures >=50 % of the energy headroom within the share limit, "
                    "priced with interference",
                    None if priced_share is None else priced_share >= 0.5,
                    f"{priced_share:.0%} of {base - priced:,.0f} kWh{killed}"
                    if priced_share is not None else "no headroom"))
    out.append(goal("stack >= 2,000 jobs/s", s["jobs_per_s"] >= 2000,
                    f"{s['jobs_per_s']:,.0f} jobs/s"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", type=Path, required=True)
    ap.add_argument("--variability", type=Path, default=None)
    ap.add_argument("--sizes", default="256,96,64", help="node counts, comma-separated")
    ap.add_argument("--stack", default="pal+eaco+greenflow+elastic")
    ap.add_argument("--limit-jobs", type=positive_int, default=None)
    ap.add_argument("--workers", type=positive_int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    input_file(ap, "--trace", args.trace, "a Philly trace CSV")
    if args.variability is not None:
        input_file(ap, "--variability", args.variability, "a variability profile CSV")
    sizes = [int(x) for x in args.sizes.split(",")]
    singles = args.stack.split("+")
    policies = ["slurm-default", "slurm-powersave", ORACLE, *singles, args.stack]
    runs = [(n, p) for n in sizes for p in policies]
    with ProcessPoolExecutor(args.workers) as pool:
        futures = {key: pool.submit(one, args.trace, args.variability, key[0], key[1],
                                    args.limit_jobs, args.seed) for key in runs}
        got = {key: f.result() for key, f in futures.items()}
    print(f"trace {args.trace}" + (f" (first {args.limit_jobs} jobs)" if args.limit_jobs else "")
          + f"; {args.stack} against each of its policies; seed {args.seed}")
    for n in sizes:
        row = {p: got[(n, p)] for p in policies}
        wait_h = row["slurm-default"]["avg_queue_s"] / 3600
        print(f"\n{n} nodes x 8 GPUs: slurm-default's average queue wait {wait_h:,.1f} h\n"
              f"  = WATTBATCH_POLICY_ALLOW_SHARE=true wattctl simulate --trace {args.trace} "
              f"--nodes {n} --gpus-per-node 8"
              + (f" --variability {args.variability}" if args.variability else "")
              + (f" --limit-jobs {args.limit_jobs}" if args.limit_jobs else "")
              + f" --compare {','.join(policies)}")
        print(f"  {'policy':28} {'energy kWh':>11} {'carbon kg':>10} {'avg JCT h':>10} "
              f"{'geo JCT h':>10} {'makespan h':>11} {'jobs/s':>8}")
        for p in policies:
            r = row[p]
            speed = f"{r['jobs_per_s']:,.0f}" if r["jobs_per_s"] else "bound"
            print(f"  {p:28} {r['energy_kwh']:>11,.0f} {r['carbon_kg']:>10,.0f} "
                  f"{r['avg_jct_s'] / 3600:>10,.2f} {r['geomean_jct_s'] / 3600:>10,.2f} "
                  f"{r['makespan_s'] / 3600:>11,.1f} {speed:>8}")
        at_jct = jct_bound(args.trace, args.variability, n, args.limit_jobs, args.seed,
                           row["slurm-default"]["avg_jct_s"])
        print(f"  {'energy bound at its avg JCT':28} "
              + (f"{at_jct:>11,.0f}" if at_jct is not None else f"{'none':>11}")
              + "   (at the oracle's prices, which throttled shared GPUs beat: an estimate "
              "of the least at slurm-default's average JCT)")
        priced = priced_bound(args.trace, args.variability, n, args.limit_jobs, args.seed)
        print(f"  {'bound priced w/ interference':28} {priced:>11,.0f}   (within the share "
              "limit, co-location and throttle priced as the simulator does)")
        for line in _verdicts(args.stack, singles, row, at_jct, priced):
            print(f"  {line}")


if __name__ == "__main__":
    main()
