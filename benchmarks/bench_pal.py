#!/usr/bin/env python3
"""PAL's figures: pal against packed-sticky on a trace with a per-GPU variability profile.

For each profile (PAL's 32gpu-variability.csv, and the profile ``wattctl profile-gpus import``
builds from the raw Longhorn measurements) and each seed (class assignment, time limits and the
spread of the profile over the cluster all follow the seed): geomean JCT, makespan and GPU
utilisation (``gpu_alloc_of_installed``) of pal over packed-sticky. Goals: geomean JCT <= 0.55x,
makespan <= 0.6x; the two profiles' ratios within 5% of each other; pal at >= 2,000 jobs/s.
It also prints the makespan and geomean JCT no scheduler can beat (``sim/bounds.py``) over
packed-sticky's.
Runs go in parallel processes (``--workers``).

Usage::

    python benchmarks/bench_pal.py --trace ../shared/data/traces/philly/philly-2017-09-10.csv \\
        --variability-dir ../shared/data/variability --limit-jobs 10000 --seeds 5
    python benchmarks/bench_pal.py --trace .../pollux/workloads/workload-1.csv \
        --trace-format pollux --nodes 16 --gpus-per-node 4 --variability-dir ...
"""

from __future__ import annotations

import argparse
from dataclasses import replace as dc_replace
import shutil
import statistics
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from slurm_plugin.errors import InputError  # noqa: E402
from slurm_plugin.physics.gpu_profile import UNMEASURED, import_files  # noqa: E402
from slurm_plugin.physics.variability import CLASSES, load_profile  # noqa: E402
from slurm_plugin.sim.bounds import lower_bounds  # noqa: E402
from slurm_plugin.sim.cluster import ClusterSpec  # noqa: E402
from slurm_plugin.sim.run import Inputs, load_jobs, simulate  # noqa: E402

from benchmarks._common import (goal, input_dir, input_errors,  # noqa: E402
                               input_file, positive_int)

KEYS = ("geomean_jct_s", "makespan_s", "gpu_alloc_of_installed", "avg_runtime_stretch",
        "sim_wall_s", "jobs", "jobs_finished")


def run_one(args: tuple) -> dict:
    trace, fmt, profile, label, policy, seed, nodes, gpn, limit, settings = args
    inputs = Inputs(Path(trace), fmt, ClusterSpec(nodes=nodes, gpus_per_node=gpn), "GB",
                    variability=Path(profile), seed=seed, limit_jobs=limit)
    r = simulate(inputs, policy, jobs=load_jobs(inputs), settings=settings)
    return {"profile": label, "policy": policy, "seed": seed} | {k: r.get(k) for k in KEYS}


def spread(xs: list[float]) -> str:
    m = statistics.fmean(xs)
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{m:.3f} ± {sd:.3f} ({min(xs):.3f}-{max(xs):.3f})"


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="bench-pal-"))
    try:
        return run(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(tmp: Path) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", required=True)
    ap.add_argument("--trace-format", default="philly", choices=("philly", "canonical", "pollux"))
    ap.add_argument("--variability-dir", required=True,
                    help="folder with 32gpu-variability.csv and the *-longhorn-agg.csv files")
    ap.add_argument("--nodes", type=positive_int, default=64)
    ap.add_argument("--gpus-per-node", type=positive_int, default=8)
    ap.add_argument("--limit-jobs", type=positive_int, default=None, help="the first N jobs only")
    ap.add_argument("--seeds", type=positive_int, default=5, help="seeds 0..N-1")
    ap.add_argument("--workers", type=positive_int, default=2)
    ap.add_argument("--no-order-queue", action="store_true",
                    help="pal without its queue order by sensitivity (order_queue = false)")
    ap.add_argument("--tolerance", type=float, default=None, help="pal slowdown_tolerance")
    a = ap.parse_args()
    input_file(ap, "--trace", a.trace, f"a {a.trace_format} trace CSV")
    need = "the folder with PAL's 32gpu-variability.csv and the raw *-longhorn-agg.csv files"
    vdir = input_dir(ap, "--variability-dir", a.variability_dir, need)
    pal32 = vdir / "32gpu-variability.csv"
    if not pal32.is_file():
        ap.error(f"--variability-dir {vdir}: no 32gpu-variability.csv (PAL's profile) in it; "
                 f"give {need}")
    imported = tmp / "longhorn-imported.csv"
    raw = sorted(vdir.glob("*-longhorn-agg.csv"))
    if not raw:
        ap.error(f"--variability-dir {vdir}: no *-longhorn-agg.csv in it (the raw Longhorn "
                 f"measurements the imported profile is built from); give {need}")
    try:
        rows = import_files(raw, imported)
    except InputError as exc:
        ap.error(f"--variability-dir {vdir}: the *-longhorn-agg.csv files give no imported "
                 f"profile: {str(exc).split(': name the application')[0]} (the bench imports "
                 "resnet, bert and pagerank runs: files named resnet-, bert-, "
                 "pagerank-longhorn-agg.csv)")
    measured = [c for k, c in enumerate(CLASSES)
                if any(r.clusters[k] != UNMEASURED for r in rows)]
    profiles = {"32gpu": pal32, "imported": imported}
    with input_errors(ap):          # the profiles and the trace read here: one error line
        for path in profiles.values():
            load_profile(path)
        if not load_jobs(Inputs(Path(a.trace), a.trace_format,
                                ClusterSpec(nodes=a.nodes, gpus_per_node=a.gpus_per_node),
                                "GB", limit_jobs=a.limit_jobs)):
            ap.error(f"--trace {a.trace}: no jobs in it")
    settings = {}
    if a.no_order_queue:
        settings["order_queue"] = False
    if a.tolerance is not None:
        settings["slowdown_tolerance"] = a.tolerance
    cells = [(a.trace, a.trace_format, str(p), label, pol, seed, a.nodes, a.gpus_per_node, a.limit_jobs,
              settings if pol == "pal" else None)
             for label, p in profiles.items() for seed in range(a.seeds)
             for pol in ("pal", "packed-sticky")]
    with input_errors(ap), ProcessPoolExecutor(a.workers) as ex:
        res = list(ex.map(run_one, cells))
    by = {(r["profile"], r["policy"], r["seed"]): r for r in res}
    jobs = res[0]["jobs"]
    print(f"trace {a.trace}: {jobs} jobs"
          + (f" (the first {a.limit_jobs})" if a.limit_jobs else "")
          + f"; {a.nodes} x {a.gpus_per_node} V100; seeds 0-{a.seeds - 1}; pal settings "
          f"{settings or 'defaults'}")
    print()
    print("| profile | pal / packed-sticky: geomean JCT | makespan | utilisation "
          "| pal geomean JCT (h) | packed-sticky (h) | pal util | packed util | runtime stretch pal / packed |")
    print("|---|---|---|---|---|---|---|---|---|")
    ratios = {}
    for label in profiles:
        g, m, u, gp, gs, up, us, stp, sts = ([] for _ in range(9))
        for s in range(a.seeds):
            p, q = by[(label, "pal", s)], by[(label, "packed-sticky", s)]
            g.append(p["geomean_jct_s"] / q["geomean_jct_s"])
            m.append(p["makespan_s"] / q["makespan_s"])
            u.append(p["gpu_alloc_of_installed"] / q["gpu_alloc_of_installed"])
            gp.append(p["geomean_jct_s"] / 3600)
            gs.append(q["geomean_jct_s"] / 3600)
            up.append(p["gpu_alloc_of_installed"])
            us.append(q["gpu_alloc_of_installed"])
            stp.append(p["avg_runtime_stretch"])
            sts.append(q["avg_runtime_stretch"])
        ratios[label] = (g, m, u)
        print(f"| {label} | {spread(g)} | {spread(m)} | {spread(u)} | {statistics.fmean(gp):.2f} "
              f"| {statistics.fmean(gs):.2f} | {statistics.fmean(up):.3f} | {statistics.fmean(us):.3f} "
              f"| {statistics.fmean(stp):.4f} / {statistics.fmean(sts):.4f} |")
    if len(measured) < len(CLASSES):
        print(f"\nthe imported profile is partial: classes {', '.join(measured)} measured "
              f"(from {', '.join(p.name for p in raw)}); "
              f"{', '.join(c for c in CLASSES if c not in measured)} at the median GPU (1.0), "
              "so it is not PAL's profile remade: the comparison below is of unlike profiles")
    print()
    print("| figure | imported / 32gpu (mean over seeds) | within 5% |")
    print("|---|---|---|")
    for i, name in enumerate(("geomean JCT ratio", "makespan ratio", "utilisation ratio")):
        x = statistics.fmean(ratios["imported"][i]) / statistics.fmean(ratios["32gpu"][i])
        print(f"| {name} | {x:.3f} | {'yes' if abs(x - 1) <= 0.05 else 'no'} |")
    print()
    # what no scheduler can beat: every job alone on the fastest GPUs, the work spread perfectly,
    # each on the GPUs it asks for (neither policy changes a count)
    jobs_in = [dc_replace(j, min_gpus=None, max_gpus=None) for j in load_jobs(Inputs(Path(a.trace), a.trace_format, ClusterSpec(nodes=a.nodes,
                                                                     gpus_per_node=a.gpus_per_node),
                               "GB", limit_jobs=a.limit_jobs))]
    for label, path in profiles.items():
        fastest = min(f for g in load_profile(path).factors(a.nodes * a.gpus_per_node, 0)
                      for f in g.values())
        low = lower_bounds(jobs_in, a.nodes * a.gpus_per_node, time_factor=fastest)
        mk = [low.makespan_s / by[(label, "packed-sticky", s)]["makespan_s"]
              for s in range(a.seeds)]
        gm = [low.geomean_jct_s / by[(label, "packed-sticky", s)]["geomean_jct_s"]
              for s in range(a.seeds)]
        print(f"lower bound for any scheduler ({label}, fastest GPU x{fastest:.3f}; "
              f"sim/bounds.py): makespan {spread(mk)}, geomean JCT {spread(gm)} of "
              f"packed-sticky's")
    print()
    walls = [r["sim_wall_s"] for r in res if r["policy"] == "pal"]
    speeds = [r["jobs"] / w for r, w in zip([r for r in res if r["policy"] == "pal"], walls)]
    print(f"pal: {statistics.fmean(speeds):,.0f} jobs/s (min {min(speeds):,.0f}, "
          f"{len(speeds)} runs, {a.workers} at once)")
    gm = statistics.fmean(ratios["32gpu"][0])
    print(f"goals (32gpu profile): geomean JCT {gm:.3f}x (<= 0.55: "
          f"{'met' if gm <= 0.55 else 'not met'}), makespan "
          f"{statistics.fmean(ratios['32gpu'][1]):.3f}x (<= 0.6: "
          f"{'met' if statistics.fmean(ratios['32gpu'][1]) <= 0.6 else 'not met'})")
    print(goal("pal >= 2,000 jobs/s", min(speeds) >= 2000,
               f"mean {statistics.fmean(speeds):,.0f}, min {min(speeds):,.0f} jobs/s"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
