#!/usr/bin/env python3
"""The cluster view at scale: its size, the reconciler's write and wattbatch's read
(``cluster_view.publish`` / ``read``) of the synthetic snapshot of one Slurm release, at each
size (nodes x jobs, 8 GPUs a node), with a GPU reading of every GPU and the carbon intensity.
Goal (issue on scale): a submission's view read and decision within 30 ms at 10,000 nodes and
100,000 jobs.

``--calls N`` also runs ``wattbatch --wb-dry-run`` N times on each view, as a user would
(this checkout's ``wattbatch`` entry point, with its own warm server in a temporary runtime
directory; no Slurm: the view is the whole snapshot and its readings), for each
``--policies`` (the co-location path ``--wb-share --wb-app resnet18`` for eaco), and prints
the median time of a whole call. That time is all the call costs besides sbatch's own: the
client, the view read (the warm server keeps the view decoded: ``view.keep_in_server``), the
decision and the rendered script, so it bounds the goal's "view read and decision".

    python benchmarks/bench_view.py [--release 24.11] [--size 1000x10000,10000x100000]
        [--calls 30] [--policies eaco,pal+eaco+greenflow+elastic]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import MappingProxyType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))      # the checkout's package, not an installed copy
from slurm_plugin import cluster_view  # noqa: E402
from slurm_plugin.model import Cluster, GpuReading, Readings  # noqa: E402
from slurm_plugin.slurm.snapshot import build_cluster  # noqa: E402
from slurm_plugin.slurm.synthetic import RELEASES, documents  # noqa: E402

from benchmarks._common import goal, positive_int  # noqa: E402

READ_GOAL_S = 0.030
SCRIPT = "#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --time=2:00:00\ntrue\n"


def readings_of(cluster: Cluster, now_s: float) -> Readings:
    """What a pass publishes of InfluxDB: a reading of every GPU (busy ones drawing more) and
    the carbon intensity with a day's forecast."""
    gpus = {}
    for node in cluster.nodes:
        for g in node.gpus:
            busy = bool(g.job_ids)
            gpus[(g.node, g.index)] = GpuReading(
                g.node, g.index, 180.0 if busy else 40.0, 1e9, 60.0 if busy else 0.0,
                8000.0 if busy else 0.0, 300.0, now_s - 20.0)
    return Readings(gpus=MappingProxyType(gpus), carbon_g_per_kwh=300.0,
                    carbon_forecast=tuple((now_s + 3600.0 * h, 300.0 + 10 * h)
                                          for h in range(24)),
                    taken_s=now_s - 20.0)


def wattbatch_calls(path: str, folder: str, policies: list[str], calls: int) -> None:
    """Median time of ``wattbatch --wb-dry-run`` deciding from the view at ``path``."""
    site = os.path.join(folder, "site.toml")
    Path(site).write_text(f'[cluster]\nname = "synthetic"\n[view]\npath = "{path}"\n'
                          "max_age_s = 86400\n[policy]\nallow_share = true\n"
                          "[wrapper]\nserver_idle_s = 60\n")
    script = os.path.join(folder, "job.sh")
    Path(script).write_text(SCRIPT)
    runtime = tempfile.mkdtemp(prefix="wattbatch-run-")
    env = dict(os.environ, WATTBATCH_SITE_CONFIG=site, XDG_RUNTIME_DIR=runtime,
               PYTHONPATH=str(ROOT))
    wb = [sys.executable, "-c", "from wrapper.server_client import main; main()"]
    try:
        for policy in policies:
            argv = [*wb, "--wb-dry-run", "--wb-policy", policy,
                    *(["--wb-share", "--wb-app", "resnet18"] if policy == "eaco" else []),
                    script]
            first = subprocess.run([*argv, "--wb-explain"], capture_output=True, text=True,
                                   env=env)
            if first.returncode != 0 or f"cluster view {path}" not in first.stdout + first.stderr:
                sys.exit(f"bench: {' '.join(argv)} did not decide from the view "
                         f"({first.returncode}):\n{(first.stdout + first.stderr)[-800:]}")
            times = []
            for _ in range(calls + 1):      # the first after the view is kept is not counted
                t0 = time.perf_counter()
                done = subprocess.run(argv, capture_output=True, text=True, env=env)
                times.append(time.perf_counter() - t0)
                if done.returncode != 0:
                    sys.exit(f"bench: {' '.join(argv)} failed ({done.returncode}): "
                             f"{done.stderr.strip()[-800:]}")
            median = statistics.median(times[1:])
            print(f"  wattbatch --wb-dry-run --wb-policy {policy}: median of {calls} calls "
                  f"{median * 1000:,.1f} ms (first {times[0] * 1000:,.0f} ms)")
            print("    " + goal(f"view read and decision within {READ_GOAL_S * 1000:.0f} ms",
                                median <= READ_GOAL_S, f"whole call {median * 1000:,.1f} ms"))
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", default="24.11", choices=sorted(RELEASES))
    ap.add_argument("--size", default="1000x10000,10000x100000",
                    help="NODESxJOBS, comma-separated")
    ap.add_argument("--calls", type=positive_int, default=None,
                    help="also time N wattbatch dry runs deciding from each view")
    ap.add_argument("--policies", default="eaco,pal+eaco+greenflow+elastic")
    args = ap.parse_args()
    cfg = {"cluster.name": "synthetic", "view.max_age_s": 1e9, "view.owner": "",
           "view.hide_job_owners": False}
    for size in args.size.split(","):
        nodes, jobs = (int(x) for x in size.split("x"))
        now_s = time.time()
        cluster = build_cluster(*documents(args.release, nodes, 8, jobs), "synthetic", now_s)
        folder = tempfile.mkdtemp(prefix="wattbatch-view-")
        os.chmod(folder, 0o755)
        path = os.path.join(folder, "cluster.json")
        t0 = time.perf_counter()
        cluster_view.publish(path, cfg, cluster, readings_of(cluster, now_s))
        t1 = time.perf_counter()
        cluster_view.read(path, cfg, time.time())
        t2 = time.perf_counter()
        print(f"{args.release} {nodes:,} nodes x 8 GPUs, {jobs:,} jobs: view "
              f"{os.path.getsize(path) / 1e6:,.1f} MB, write {t1 - t0:.2f} s, read {t2 - t1:.3f} s")
        print("  " + goal(f"read within {READ_GOAL_S * 1000:.0f} ms", t2 - t1 <= READ_GOAL_S,
                          f"{(t2 - t1) * 1000:,.0f} ms"))
        if args.calls:
            wattbatch_calls(path, folder, args.policies.split(","), args.calls)
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
