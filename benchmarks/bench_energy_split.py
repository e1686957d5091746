"""Per-job GPU energy on shared GPUs: the reported split against the emulated GPUs' truth.

    eval "$(.venv/bin/wattctl localcluster env)"
    .venv/bin/python benchmarks/bench_energy_split.py [--duration 60] [--no-live] [--json]

``--no-live``: the model part alone, no cluster needed.

Live part: for 2, 3 and 4 jobs of mixed classes on one GPU of the local cluster (one shard
each), the relative error of each job's ``job_energy`` (collector split + epilog) against the
true split the emulated GPUs computed, and the error of the group's sum. The groups run at
once, on three nodes. Model part (no cluster): the same error for every mix of the
measured classes, when the split knows each job's watts per utilisation point (the class's)
and when it has utilisation alone, to show why the weight matters.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))      # the checkout's package, not an installed copy
from slurm_plugin.model import Gpu, GpuUse, Job  # noqa: E402
from slurm_plugin.node.emulated import gpu_state  # noqa: E402
from slurm_plugin.node.ledger import _class_rate  # noqa: E402
from slurm_plugin.node.split import split_interval  # noqa: E402
from slurm_plugin.physics import class_names, idle_power_w  # noqa: E402

from benchmarks._common import positive_int  # noqa: E402

GROUPS = {2: ["vgg16", "alexnet"], 3: ["lstm", "resnet18", "transformer"],
          4: ["aps", "wavenet", "alexnet", "vgg16"]}


def model_errors(weighted: bool) -> dict[int, float]:
    """Worst per-job error over every mix of 2, 3, 4 classes on one GPU (steady state)."""
    idle, worst = idle_power_w("V100"), {}
    for n in (2, 3, 4):
        for apps in itertools.combinations(class_names(), n):
            jobs = {str(k): Job(str(k), "RUNNING", app=a, uses=(GpuUse("g", 0, 1),))
                    for k, a in enumerate(apps)}
            st = gpu_state(Gpu("g", 0, shard_jobs=tuple(jobs)), jobs)
            rates = {r.job_id: (_class_rate(r.app, "V100") if weighted else 1.0)
                     for r in st.residents}
            got = split_interval(st.power_w, 1.0, idle, {r.job_id: 1 for r in st.residents},
                                 {r.job_id: r.util_pct for r in st.residents}, rates, {})
            err = max(abs(got[j].energy_j / st.job_power_w[j] - 1) for j in got)
            worst[n] = max(worst.get(n, 0.0), err)
    return worst


def live(duration_s: int) -> dict:
    from slurm_plugin import config
    from slurm_plugin.localcluster.energy_check import compare, submit_group, truth, wait_records

    cfg = config.load()
    groups = {n: submit_group(cfg, apps, f"gpu{k + 1}", "g2", duration_s)
              for k, (n, apps) in enumerate(GROUPS.items())}      # at once, on three nodes
    records = wait_records(cfg, [j for ids in groups.values() for j in ids],
                           timeout_s=duration_s + 120)
    true_j = truth(cfg)
    return {n: {**compare({j: records[j] for j in ids if j in records}, true_j),
                "apps": GROUPS[n]} for n, ids in groups.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=positive_int, default=60, help="seconds each job runs")
    ap.add_argument("--no-live", action="store_true", help="model part only")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    res = {"model_weighted": model_errors(True), "model_util_only": model_errors(False)}
    if not args.no_live:
        res["live"] = live(args.duration)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    for n in (2, 3, 4):
        print(f"model, {n} jobs/GPU, every class mix: worst per-job error "
              f"{res['model_weighted'][n]:.1%} (weighted), {res['model_util_only'][n]:.1%} "
              "(utilisation alone)")
    for n, r in res.get("live", {}).items():
        print(f"live, {n} jobs on one GPU ({'+'.join(r['apps'])}): worst per-job error "
              f"{r['max_abs_error']:.1%}, sum {r['sum_error']:+.2%}, split {','.join(r['splits'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
