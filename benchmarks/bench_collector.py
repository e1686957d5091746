"""Collector pass time: one node of 8 emulated GPUs (12 jobs, half of the GPUs shared by 2).

    .venv/bin/python benchmarks/bench_collector.py [--passes 200] [--live 20] [--json]

In-process: GPU readings from the physics, the per-job energy split into the ledger files and
the InfluxDB line protocol, with the cluster snapshot given (no Slurm call, no HTTP). Live
(with the local cluster's environment): ``wattctl collect``'s pass on the local cluster, the
Slurm snapshot and the InfluxDB write included.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))      # the checkout's package, not an installed copy
from slurm_plugin.model import Cluster, Gpu, GpuUse, Job, Node  # noqa: E402
from slurm_plugin.node.collector import gpu_point  # noqa: E402
from slurm_plugin.node.emulated import EmulatedSource  # noqa: E402
from slurm_plugin.node.ledger import Ledger  # noqa: E402
from slurm_plugin.physics import class_names, idle_power_w  # noqa: E402

from benchmarks._common import nonneg_int, positive_int  # noqa: E402


def node_of_8(t: list[float]) -> Cluster:
    apps, jobs, gpus = class_names(), {}, []
    for i in range(8):
        ids = [f"{i}{k}" for k in range(2 if i % 2 else 1)]
        for k, j in enumerate(ids):
            jobs[j] = Job(j, "RUNNING", app=apps[(i + k) % len(apps)],
                          uses=(GpuUse("n1", i, 2 if len(ids) > 1 else 0),))
        gpus.append(Gpu("n1", i, shard_jobs=tuple(ids) if len(ids) > 1 else (),
                        exclusive_job=ids[0] if len(ids) == 1 else None))
    return Cluster(nodes=(Node("n1", gpus=tuple(gpus)),), jobs=jobs)


def in_process(passes: int) -> float:
    t = [1000.0]
    cluster = node_of_8(t)
    with tempfile.TemporaryDirectory() as d:
        src = EmulatedSource("all", lambda: cluster, d, clock=lambda: t[0])
        book = Ledger(d, idle_power_w("V100"), intensity=lambda s: 250.0)
        times = []
        for _ in range(passes):
            t[0] += 2.0
            t0 = time.perf_counter()
            readings = src.read()
            book.update(readings)
            "".join(gpu_point(r, "c").to_line() for r in readings)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def live(passes: int) -> float:
    from slurm_plugin import config
    from slurm_plugin.commands.collect import _ledger
    from slurm_plugin.node.collector import collect_once
    from slurm_plugin.node.source import make_source
    from slurm_plugin.telemetry.influx import InfluxClient

    cfg = config.load()
    client = InfluxClient.from_config(cfg)
    source, book = make_source("emulated", "gpu1", cfg), _ledger(cfg, client)
    times = []
    for _ in range(passes):
        t0 = time.perf_counter()
        collect_once(source, client, cfg["cluster.name"], book)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=positive_int, default=200)
    ap.add_argument("--live", type=nonneg_int, default=0, help="live passes (0: skip)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    res = {"in_process_pass_s": in_process(args.passes)}
    if args.live:
        res["live_pass_s"] = live(args.live)
    if args.json:
        print(json.dumps(res))
        return 0
    print(f"collector pass, 8 emulated GPUs, 12 jobs: {res['in_process_pass_s'] * 1000:.1f} ms "
          "median (readings + energy split + ledger + line protocol)")
    if "live_pass_s" in res:
        print(f"live pass on the local cluster (Slurm snapshot + InfluxDB write): "
              f"{res['live_pass_s'] * 1000:.0f} ms median")
    return 0


if __name__ == "__main__":
    sys.exit(main())
