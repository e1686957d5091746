"""Reconcile pass time: live on the local cluster, and parse + policy on a synthetic snapshot.

    .venv/bin/python benchmarks/bench_reconcile.py [--policy slurm-default,eaco] [--live N] [--json]

``--live`` defaults to 10 passes, which need the local cluster; ``--live 0`` runs the synthetic
part alone.

The synthetic snapshot is 1,000 nodes x 8 GPUs and 10,000 jobs in the JSON of each Slurm
release (``--release 22.05,24.11,26.05``: node listing + ``squeue --json``); one "pass" is JSON
decode + parse into a Cluster + ``policy.reconcile`` (dry run, no Slurm command).
The live part runs ``wattctl reconcile --dry-run`` N times against $SLURM_CONF /
$WATTBATCH_SITE_CONFIG (the local cluster) and reports the median wall time of the pass.
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
from slurm_plugin.model import Readings  # noqa: E402
from slurm_plugin.policy import get_policy  # noqa: E402
from slurm_plugin.proc import run  # noqa: E402
from slurm_plugin.reconcile import reconcile_pass  # noqa: E402
from slurm_plugin.slurm.snapshot import build_cluster  # noqa: E402
from slurm_plugin.slurm.synthetic import RELEASES, documents  # noqa: E402

from benchmarks._common import input_errors, nonneg_int, positive_int  # noqa: E402


class NoActuator:
    def __getattr__(self, name):  # dry run: never called
        raise AssertionError(f"dry run called {name}")


def synthetic_pass(policy_name: str, release: str, sinfo_text: str, squeue_text: str,
                   repeat: int) -> dict:
    policy = get_policy(policy_name)
    times, cpu_times, parse_times, policy_times = [], [], [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as state:
            c0 = time.process_time()
            t0 = time.perf_counter()
            holder = {}

            def snap():
                t = time.perf_counter()
                c = build_cluster(json.loads(sinfo_text), json.loads(squeue_text), "bench",
                                  time.time())
                holder["parse_s"] = time.perf_counter() - t
                return c

            res = reconcile_pass(policy=policy, snapshot=snap, readings=Readings,
                                 actuator=NoActuator(), state_dir=Path(state), dry_run=True)
            times.append(time.perf_counter() - t0)
            cpu_times.append(time.process_time() - c0)
            parse_times.append(holder["parse_s"])
            policy_times.append(res.policy_s)
    return {"policy": policy_name, "release": release, "pass_s": statistics.median(times),
            "pass_cpu_s": statistics.median(cpu_times),
            "parse_s": statistics.median(parse_times),
            "policy_s": statistics.median(policy_times), "jobs": res.jobs_seen,
            "nodes": res.nodes_seen, "actions": len(res.outcomes)}


def live_passes(n: int) -> dict:
    walls, totals = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        out = run([sys.executable, "-m", "slurm_plugin.cli", "reconcile", "--dry-run", "--json"],
                  timeout_s=60, cwd=str(ROOT)).stdout      # the checkout's wattctl
        walls.append(time.perf_counter() - t0)
        totals.append(json.loads(out)["total_s"])
    return {"passes": n, "pass_s": statistics.median(totals),
            "command_wall_s": statistics.median(walls)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", default="slurm-default,eaco")
    ap.add_argument("--release", default="22.05,24.11,26.05",
                    help="Slurm releases whose JSON shape the synthetic snapshot takes")
    ap.add_argument("--repeat", type=positive_int, default=3)
    ap.add_argument("--live", type=nonneg_int, default=10,
                    help="live passes on the local cluster (0: skip; the default needs it)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    for release in args.release.split(","):
        if release not in RELEASES:
            ap.error(f"--release {args.release}: {release!r} is not a Slurm release the synthetic "
                     f"snapshot knows; give comma-separated releases of: {', '.join(RELEASES)}")
    with input_errors(ap, f"--policy {args.policy}: "):
        for name in args.policy.split(","):
            get_policy(name)
    out: dict = {"synthetic": []}
    for release in args.release.split(","):
        nodes_doc, squeue = documents(release, nodes=1000, gpus_per_node=8, jobs=10000)
        nodes_text, squeue_text = json.dumps(nodes_doc), json.dumps(squeue)
        out["synthetic"] += [synthetic_pass(p, release, nodes_text, squeue_text, args.repeat)
                             for p in args.policy.split(",")]
    if args.live:
        out["live"] = live_passes(args.live)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    for r in out["synthetic"]:
        print(f"synthetic 1000x8 GPUs, {r['jobs']} jobs, Slurm {r['release']} JSON, "
              f"{r['policy']}: pass "
              f"{r['pass_s'] * 1000:.0f} ms, CPU {r['pass_cpu_s'] * 1000:.0f} ms (parse {r['parse_s'] * 1000:.0f} ms, policy "
              f"{r['policy_s'] * 1000:.0f} ms), {r['actions']} actions")
    if "live" in out:
        lv = out["live"]
        print(f"live local cluster: pass {lv['pass_s'] * 1000:.0f} ms median of {lv['passes']}"
              f" (whole wattctl command {lv['command_wall_s'] * 1000:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
