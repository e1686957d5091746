#!/usr/bin/env python3
"""Simulator speed: a trace on a cluster with one policy, repeated; prints jobs/s, wall time and
peak RSS of each run and the median.

Usage: ``python benchmarks/bench_simulate.py --trace ../shared/data/traces/philly/philly-2017-09-10.csv
[--policy slurm-default] [--class-mix all] [--nodes 64] [--gpus-per-node 8] [--repeat 3]``
(default trace: the built-in 1,000-job slice). Goal on the full Philly trace with 64 x 8 V100 and
slurm-default: at most 20 s and 2 GB. Each run is a fresh process, so RSS is per run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from slurm_plugin.proc import run  # noqa: E402

_CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from slurm_plugin.physics.classes import class_mix
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.run import Inputs, default_trace, simulate
a = json.loads(sys.argv[1])
inputs = Inputs(Path(a["trace"]) if a["trace"] else default_trace(), "philly",
                ClusterSpec(nodes=a["nodes"], gpus_per_node=a["gpus_per_node"]), "GB",
                class_mix=class_mix(a["class_mix"]))
t0 = time.perf_counter()
r = simulate(inputs, a["policy"])
wall = time.perf_counter() - t0
print(json.dumps({"jobs": r["jobs"], "events": r["events"], "wall_s": wall,
                  "sim_wall_s": r["sim_wall_s"],
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="")
    ap.add_argument("--policy", default="slurm-default")
    ap.add_argument("--class-mix", default="all", help="as wattctl simulate --class-mix")
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    cfg = json.dumps({"trace": args.trace, "policy": args.policy, "class_mix": args.class_mix,
                      "nodes": args.nodes, "gpus_per_node": args.gpus_per_node})
    runs = []
    for i in range(args.repeat):
        out = run([sys.executable, "-c", _CHILD, cfg], timeout_s=600,
                  cwd=str(Path(__file__).resolve().parent.parent))
        r = json.loads(out.stdout)
        runs.append(r)
        print(f"run {i + 1}: {r['jobs']} jobs, {r['events']} events, wall {r['wall_s']:.2f} s "
              f"(loop {r['sim_wall_s']:.2f} s), {r['jobs'] / r['wall_s']:,.0f} jobs/s, "
              f"peak RSS {r['rss_mib']:.0f} MiB")
    wall = statistics.median(r["wall_s"] for r in runs)
    print(f"median: wall {wall:.2f} s, {runs[0]['jobs'] / wall:,.0f} jobs/s, "
          f"peak RSS {max(r['rss_mib'] for r in runs):.0f} MiB "
          f"({args.policy}, class mix {args.class_mix}, {args.nodes} x {args.gpus_per_node} GPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
