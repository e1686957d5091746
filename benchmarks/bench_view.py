#!/usr/bin/env python3
"""The cluster view at scale: its size, the reconciler's write and wattbatch's read
(``cluster_view.publish`` / ``read``) of the synthetic snapshot of one Slurm release, at each
size (nodes x jobs, 8 GPUs a node). Goal (issue on scale): a submission's view read and
decision within 30 ms at 10,000 nodes and 100,000 jobs.

    python benchmarks/bench_view.py [--release 24.11] [--size 1000x10000,10000x100000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))      # the checkout's package, not an installed copy
from slurm_plugin import cluster_view  # noqa: E402
from slurm_plugin.slurm.snapshot import build_cluster  # noqa: E402
from slurm_plugin.slurm.synthetic import RELEASES, documents  # noqa: E402

from benchmarks._common import goal  # noqa: E402

READ_GOAL_S = 0.030


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", default="24.11", choices=sorted(RELEASES))
    ap.add_argument("--size", default="1000x10000,10000x100000",
                    help="NODESxJOBS, comma-separated")
    args = ap.parse_args()
    cfg = {"cluster.name": "synthetic", "view.max_age_s": 1e9, "view.owner": "",
           "view.hide_job_owners": False}
    for size in args.size.split(","):
        nodes, jobs = (int(x) for x in size.split("x"))
        cluster = build_cluster(*documents(args.release, nodes, 8, jobs), "synthetic",
                                time.time())
        folder = tempfile.mkdtemp(prefix="wattbatch-view-")
        os.chmod(folder, 0o755)
        path = os.path.join(folder, "cluster.json")
        t0 = time.perf_counter()
        cluster_view.publish(path, cfg, cluster, None)
        t1 = time.perf_counter()
        cluster_view.read(path, cfg, time.time())
        t2 = time.perf_counter()
        print(f"{args.release} {nodes:,} nodes x 8 GPUs, {jobs:,} jobs: view "
              f"{os.path.getsize(path) / 1e6:,.1f} MB, write {t1 - t0:.2f} s, read {t2 - t1:.3f} s")
        print("  " + goal(f"read within {READ_GOAL_S * 1000:.0f} ms", t2 - t1 <= READ_GOAL_S,
                          f"{(t2 - t1) * 1000:,.0f} ms"))
        os.unlink(path)
        os.rmdir(folder)


if __name__ == "__main__":
    main()
