#!/usr/bin/env python3
"""Builds slurm_plugin/data/pollux_profiles.json from the Pollux (OSDI'21) artifact's traces.

Source: github.com/petuum/adaptdl, branch osdi21-artifact, commit c793c708 (Apache-2.0),
``simulator/traces/<app>/{placements,scalability,validation-<B>}.csv``.

Per application:
- ``samples``: per global batch size B (one per validation file), samples to target = the last
  iteration of ``validation-B.csv`` times B (the run Pollux measured to its target metric);
- ``step_s[n-1][i]``: seconds per step on n = 1..64 GPUs on nodes of 4 GPUs, packed (fewest
  nodes measured), at local batch ``local_bsz[i]`` (a grid of powers of sqrt(2) over the measured
  range; log-interpolated between measured local batch sizes, clamped to their range); a count
  with no measurement is interpolated linearly between the measured counts around it.

Usage: python scripts/pollux_profiles.py POLLUX_TRACES_DIR [OUT.json]
"""

from __future__ import annotations

import bisect
import csv
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

MAX_GPUS, GPUS_PER_NODE = 64, 4


def _interp_log(points: list[tuple[float, float]], x: float) -> float:
    points.sort()
    xs = [p[0] for p in points]
    if x <= xs[0]:
        return points[0][1]
    if x >= xs[-1]:
        return points[-1][1]
    i = bisect.bisect_left(xs, x)
    (x0, y0), (x1, y1) = points[i - 1], points[i]
    f = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
    return y0 + f * (y1 - y0)


def app_profile(d: Path) -> dict:
    # (replicas, nodes) -> [(local_bsz, step_time)]
    meas: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for r in csv.DictReader((d / "placements.csv").open()):
        p = r["placement"]
        meas[(sum(int(c) for c in p), len(p))].append((float(r["local_bsz"]), float(r["step_time"])))
    for r in csv.DictReader((d / "scalability.csv").open()):
        meas[(int(r["num_replicas"]), int(r["num_nodes"]))].append(
            (float(r["local_bsz"]), float(r["step_time"])))
    lo = min(x for v in meas.values() for x, _ in v)
    hi = max(x for v in meas.values() for x, _ in v)
    grid = [lo]
    while grid[-1] * 2 ** 0.5 < hi:
        grid.append(grid[-1] * 2 ** 0.5)
    grid.append(hi)
    measured: dict[int, list[float]] = {}
    for n in range(1, MAX_GPUS + 1):
        k = -(-n // GPUS_PER_NODE)
        cands = sorted(nodes for (rep, nodes) in meas if rep == n and nodes >= k)
        if cands:
            pts = list(meas[(n, cands[0])])
            measured[n] = [_interp_log(pts, b) for b in grid]
    ns = sorted(measured)
    step = []
    for n in range(1, MAX_GPUS + 1):
        if n in measured:
            step.append(measured[n])
            continue
        i = bisect.bisect_left(ns, n)
        if i == len(ns):
            step.append(measured[ns[-1]])
        else:
            n0, n1 = ns[i - 1], ns[i]
            f = (n - n0) / (n1 - n0)
            step.append([a + f * (b - a) for a, b in zip(measured[n0], measured[n1])])
    samples = {}
    for f in sorted(d.glob("validation-*.csv"), key=lambda p: int(p.stem.split("-")[1])):
        b = int(f.stem.split("-")[1])
        rows = list(csv.DictReader(f.open()))
        samples[str(b)] = int(rows[-1]["iteration"]) * b
    return {"samples": samples, "local_bsz": [round(x, 2) for x in grid],
            "step_s": [[round(x, 5) for x in row] for row in step]}


def main() -> None:
    src = Path(sys.argv[1])
    dst = Path(sys.argv[2]) if len(sys.argv) > 2 else \
        Path(__file__).resolve().parents[1] / "slurm_plugin/data/pollux_profiles.json"
    apps = {d.name: app_profile(d) for d in sorted(src.iterdir()) if (d / "placements.csv").exists()}
    doc = {"source": "Pollux OSDI'21 artifact, github.com/petuum/adaptdl@c793c708 "
                     "(osdi21-artifact), simulator/traces; Apache-2.0; built by "
                     "scripts/pollux_profiles.py",
           "gpus_per_node": GPUS_PER_NODE, "apps": apps}
    dst.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"{dst}: {len(apps)} applications")


if __name__ == "__main__":
    main()
