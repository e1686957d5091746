#!/usr/bin/env python3
"""Simulator speed: every policy x class mix x trace/cluster, each run in a fresh process;
prints a table of jobs/s (trace jobs over the whole run's wall time, trace reading included)
and peak RSS, and the slowest cell; each run's line also gives jobs per CPU-second, which
another load on the host moves less than wall time.

Usage::

    python benchmarks/bench_simulate.py --trace ../shared/data/traces/philly/philly-2017-09-10.csv \\
        [--policies eaco,slurm-default] [--class-mixes all,eaco-paper] [--shapes 64x8,32x8] \\
        [--concat 4] [--repeat 1] [--trace-format philly|canonical|pollux] [--gpu-types V100,H100]

Default trace: the built-in 1,000-job slice. ``--concat N`` adds the trace repeated N times
back to back (each copy shifted by the trace's span: about 211,000 jobs for the Sep-Oct trace
with N = 4) on the first shape (Philly traces only). Policies default to every registered name
but aliases. ``--class-mixes``: comma-separated mixes, each a named mix (all, eaco-paper) or
classes joined with ``+`` (``alexnet+vgg16``). ``--gpu-types``: the GPU model of every GPU
(any catalogued model: V100, A100, H100, ...), one column per model and shape; a cluster of
several models is its groups joined with ``+`` (``V100:22+A100:21+H100:21``: the groups give
the nodes, the shape the GPUs per node). A second table
gives each cell's energy (kWh) and, where slurm-default ran, its ratio to slurm-default's.
Goal: every cell at least 2,000 jobs/s and under 1 GB peak RSS.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from slurm_plugin.errors import CommandError, ConfigError, InputError  # noqa: E402
from slurm_plugin.physics.constants import gpu_constants  # noqa: E402
from slurm_plugin.physics.classes import class_mix  # noqa: E402
from slurm_plugin.policy.registry import policy_names  # noqa: E402
from slurm_plugin.sim.cluster import parse_groups  # noqa: E402
from slurm_plugin.proc import run  # noqa: E402
from slurm_plugin.sim.trace import FORMATS, builtin_trace, read_trace  # noqa: E402

from benchmarks._common import (goal, input_errors, input_file,  # noqa: E402
                               nonneg_int, positive_int)

ALIASES = {"baseline"}      # other names of a policy already in the table

_CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from slurm_plugin.physics.classes import class_mix
from slurm_plugin.sim.cluster import ClusterSpec, parse_groups
from slurm_plugin.sim.run import Inputs, simulate
a = json.loads(sys.argv[1])
t0, c0 = time.perf_counter(), time.process_time()
inputs = Inputs(Path(a["trace"]), a["trace_format"],
                ClusterSpec(nodes=a["nodes"], gpus_per_node=a["gpus_per_node"],
                            gpu_type=a["gpu_type"],
                            groups=parse_groups(a["gpu_type"].replace("+", ","))), "GB",
                class_mix=class_mix(a["class_mix"]))
r = simulate(inputs, a["policy"])
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"jobs": r["jobs"], "unfinished": r.get("unfinished_jobs", 0), "wall_s": wall,
                  "cpu_s": cpu, "energy_kwh": r["energy_kwh"], "avg_jct_s": r["avg_jct_s"],
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def concatenated(trace: Path, copies: int, out_dir: Path) -> Path:
    """The Philly trace ``copies`` times back to back, each copy shifted by the trace's span."""
    with trace.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    fmt = "%Y-%m-%d %H:%M:%S"
    times = [datetime.strptime(r["timestamp"].strip(), fmt) for r in rows]
    span = max(times) - min(times) + timedelta(hours=1)
    out = out_dir / f"{trace.stem}-x{copies}.csv"
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        for k in range(copies):
            for r, t in zip(rows, times):
                w.writerow({**r, "timestamp": (t + k * span).strftime(fmt)})
    return out


def one(trace: Path, fmt: str, nodes: int, gpn: int, policy: str, mix: str,
        gpu_type: str = "V100") -> dict:
    cfg = json.dumps({"trace": str(trace), "trace_format": fmt, "nodes": nodes,
                      "gpus_per_node": gpn, "policy": policy, "class_mix": mix,
                      "gpu_type": gpu_type})
    try:
        out = run([sys.executable, "-c", _CHILD, cfg], timeout_s=3600, cwd=str(ROOT))
    except CommandError as exc:     # the child's last line (its error), not its traceback
        last = (exc.stderr.strip().splitlines() or ["(no output)"])[-1]
        sys.exit(f"bench_simulate: {policy}, class mix {mix}, {trace} on {nodes}x{gpn}: "
                 f"the run failed (exit {exc.returncode}): {last}")
    return json.loads(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=builtin_trace())
    ap.add_argument("--trace-format", default="philly", choices=FORMATS)
    ap.add_argument("--policies", default=",".join(p for p in policy_names() if p not in ALIASES))
    ap.add_argument("--class-mixes", default="all,eaco-paper",
                    help="comma-separated mixes: all, eaco-paper, or classes joined with + "
                         "(alexnet+vgg16)")
    ap.add_argument("--shapes", default="64x8,32x8", help="NODESxGPUS_PER_NODE, comma-separated")
    ap.add_argument("--concat", type=nonneg_int, default=0,
                    help="also the trace N times back to back (N >= 2; 0: not)")
    ap.add_argument("--repeat", type=positive_int, default=1, help="runs per cell (median jobs/s)")
    ap.add_argument("--gpu-types", default="V100",
                    help="comma-separated GPU models of the cluster (any catalogued: V100, A100, "
                         "H100, ...; wattctl gpu-models), one column each; several models in "
                         "one cluster: MODEL:NODES groups joined with + (V100:22+A100:21)")
    args = ap.parse_args()
    gpu_types = [t.strip() for t in args.gpu_types.split(",")]
    for gt in gpu_types:
        try:
            for model, _ in parse_groups(gt.replace("+", ",")) or ((gt, 1),):
                gpu_constants(model)
        except ValueError as exc:
            ap.error(f"--gpu-types {args.gpu_types}: {exc} (groups joined with +)")
        except ConfigError as exc:
            ap.error(f"--gpu-types {args.gpu_types}: {exc.value!r}: {exc.fix}")
    try:
        shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    except ValueError:
        shapes = []
    if not shapes or any(len(s) != 2 or min(s) < 1 for s in shapes):
        ap.error(f"--shapes {args.shapes}: give comma-separated NODESxGPUS_PER_NODE, "
                 "each a positive integer (64x8,32x8)")
    if args.concat == 1:
        ap.error("--concat 1: the trace once is already in the table; give N >= 2 copies "
                 "back to back, or 0 for none")
    if args.concat and args.trace_format != "philly":
        ap.error(f"--concat {args.concat}: only a Philly trace can be repeated back to back; "
                 f"this one is --trace-format {args.trace_format}")
    known = policy_names()
    for policy in args.policies.split(","):
        if policy not in known:
            ap.error(f"--policies {args.policies}: {policy!r} is no policy; choose from: "
                     f"{', '.join(known)}")
    mixes = args.class_mixes.split(",")
    for mix in mixes:
        try:
            class_mix(mix.replace("+", ","))
        except InputError as exc:
            ap.error(f"--class-mixes {args.class_mixes}: {exc} (here mixes are comma-separated: "
                     "join one mix's classes with +, e.g. alexnet+vgg16)")
    mw = max([11] + [len(m) for m in mixes])        # the class mix column's width
    input_file(ap, "--trace", args.trace, f"a {args.trace_format} trace CSV")
    with input_errors(ap):          # a bad trace is one error line, before any run
        if not read_trace(args.trace, args.trace_format):
            ap.error(f"--trace {args.trace}: no jobs in it")
    with tempfile.TemporaryDirectory() as tmp:
        named = gpu_types != ["V100"]
        traces = [(args.trace, n, g, gt, f"{args.trace.stem} {n}x{g}" + (f" {gt}" if named else ""))
                  for n, g in shapes for gt in gpu_types]
        most_rss = 0.0
        if args.concat > 1:
            big = concatenated(args.trace, args.concat, Path(tmp))
            n, g = shapes[0]
            traces += [(big, n, g, gt, f"{args.trace.stem} x{args.concat} {n}x{g}"
                        + (f" {gt}" if named else "")) for gt in gpu_types]
        cols = [label for *_, label in traces]
        rows = []
        energy: dict[tuple[str, str, str], float] = {}    # (policy, mix, column) -> kWh
        worst = None
        for policy in args.policies.split(","):
            for mix in mixes:
                cells = []
                for path, n, g, gt, label in traces:
                    runs = [one(path, args.trace_format, n, g, policy, mix.replace("+", ","), gt)
                            for _ in range(args.repeat)]
                    energy[(policy, mix, label)] = runs[0]["energy_kwh"]
                    wall = statistics.median(r["wall_s"] for r in runs)
                    cpu = statistics.median(r["cpu_s"] for r in runs)
                    rate = runs[0]["jobs"] / wall
                    rss = max(r["rss_mib"] for r in runs)
                    most_rss = max(most_rss, rss)
                    cells.append(f"{rate:>8,.0f} {rss:>5.0f}M")
                    if worst is None or rate < worst[0]:
                        worst = (rate, policy, mix, label, rss)
                    print(f"{policy:16} {mix:{mw}} {label:28} {runs[0]['jobs']:>7} jobs "
                          f"{wall:7.1f} s {rate:8,.0f} jobs/s ({runs[0]['jobs'] / cpu:,.0f} per "
                          f"CPU-second) peak RSS {rss:5.0f} MiB "
                          f"unfinished {runs[0]['unfinished']} energy "
                          f"{runs[0]['energy_kwh']:,.0f} kWh avg JCT "
                          f"{runs[0]['avg_jct_s']:,.0f} s", file=sys.stderr, flush=True)
                rows.append((policy, mix, cells))
    print("jobs/s and peak RSS per policy x class mix x trace (cluster nodes x GPUs)")
    print(f"{'policy':16} {'class mix':{mw}}" + "".join(f" {c:>30}" for c in cols))
    for policy, mix, cells in rows:
        print(f"{policy:16} {mix:{mw}}" + "".join(f" {c:>30}" for c in cells))
    print("energy kWh (x slurm-default's, same column and class mix)")
    print(f"{'policy':16} {'class mix':{mw}}" + "".join(f" {c:>30}" for c in cols))
    for policy, mix, _ in rows:
        out = []
        for c in cols:
            kwh, base = energy[(policy, mix, c)], energy.get(("slurm-default", mix, c))
            out.append(f"{kwh:,.0f}" + (f" ({kwh / base:.3f}x)" if base else ""))
        print(f"{policy:16} {mix:{mw}}" + "".join(f" {c:>30}" for c in out))
    if worst:
        print(f"slowest: {worst[0]:,.0f} jobs/s ({worst[1]}, {worst[2]}, {worst[3]}), "
              f"peak RSS up to {worst[4]:.0f} MiB")
        print(goal("every cell >= 2,000 jobs/s", worst[0] >= 2000,
                   f"slowest {worst[0]:,.0f} jobs/s"))
        print(goal("every cell under 1 GB peak RSS", most_rss < 1024,
                   f"largest {most_rss:,.0f} MiB"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
