#!/usr/bin/env python3
"""GreenFlow's figures (issue 8) on a trace and carbon zones, printed as a table per zone.

Per zone: slurm-default, slurm-powersave, carbon-threshold, then greenflow twice: (a) with its
budget set to carbon-threshold's measured carbon (equal carbon within 1%: avg JCT at most 0.4x
carbon-threshold's), (b) with the budget at 0.6x slurm-default's carbon (avg JCT at most 1.0x
slurm-default's, every job finished); (c) the (b) run against slurm-powersave (carbon at most
0.75x at avg JCT at most 1.05x), and (c') greenflow with its budget at 0.75x slurm-powersave's
measured carbon, against the same goal; (d) greenflow's speed, jobs per second of simulation;
and the ceiling of time shifting (``sim/bounds.shift_ceiling``): the carbon of every job at its
best start within 6 h, 24 h, 3 and 7 days of its submission, as a share of running it at
submission, with the future known and no job waiting for GPUs; and the carbon floor
(``sim/bounds.carbon_floor``): the least carbon of the trace's GPU work on the cluster when its
last work may end 0, 7, 14 or 30 days after running every job as soon as it can, as a share of
that, work split and moved for free (what a schedule would need to give up in makespan).
Zones run in parallel processes (``--workers``).

The carbon series is aligned to the trace by hour of week (``sim/carbon.py``): the trace's first
week is scored against the carbon file's first whole week (from its first Monday, so January for
a calendar-year file), wrapping around at the file's end. Each zone's block says which carbon
dates were used when their months differ from the trace's; the carbon loader's warnings (hours
missing, rows skipped) and a run that outlasts the carbon file go to stderr.

Usage::

    python benchmarks/bench_greenflow.py \\
        --trace ../shared/data/traces/philly/philly-2017-09-10.csv \\
        --carbon-dir ../shared/data/carbon --year 2021 --zones DE-LU,GB,US-CAL-CISO
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from slurm_plugin.sim.bounds import carbon_floor, shift_ceiling  # noqa: E402
from slurm_plugin.sim.carbon import WEEK_S, load_carbon, week_start_s  # noqa: E402
from slurm_plugin.sim.cluster import ClusterSpec  # noqa: E402
from slurm_plugin.sim.elastic_share import make_elastic  # noqa: E402
from slurm_plugin.sim.run import Inputs, load_jobs, period_budget, simulate  # noqa: E402
from slurm_plugin.sim.trace import FORMATS, builtin_trace, read_trace  # noqa: E402
from slurm_plugin.formats.carbon_csv import load as load_carbon_csv  # noqa: E402

from benchmarks._common import (input_dir, input_errors, input_file,  # noqa: E402
                               positive_int, share)

SHIFT_H = (6, 24, 72, 168)    # the time-shift ceilings printed: every job within this many hours
FLOOR_DAYS = (0, 7, 14, 30)   # the carbon floors printed: the last work this many days later
KEYS = ("carbon_kg", "avg_jct_s", "jobs_finished", "jobs_timed_out", "unfinished_jobs",
        "sim_wall_s", "makespan_s")


def run_zone(args: tuple[str, str, str, str, int, int, float]) -> dict:
    trace, fmt, carbon_file, zone, nodes, gpn, elastic_share = args
    inputs = Inputs(Path(trace), fmt, ClusterSpec(nodes=nodes, gpus_per_node=gpn), zone,
                    carbon=Path(carbon_file))
    jobs = load_jobs(inputs)
    if elastic_share:       # these jobs may run on 1 to 2x their GPUs (as bench_elastic.py)
        jobs = make_elastic(jobs, elastic_share, 0)
    carbon = load_carbon(inputs.carbon, zone, jobs[0].submit_s)
    out = {}

    def one(policy: str, label: str, budget_kg: float | None = None) -> dict:
        settings = period_budget(jobs, budget_kg) if budget_kg is not None else None
        r = simulate(inputs, policy, settings=settings, jobs=jobs, carbon=carbon)
        out[label] = {k: r.get(k) for k in KEYS} | {"budget_kg": budget_kg}
        if budget_kg is not None:
            out[label]["carbon_over_budget"] = r["carbon_kg"] / budget_kg if budget_kg else None
        return r
    default = one("slurm-default", "slurm-default")
    ps = one("slurm-powersave", "slurm-powersave")
    ct = one("carbon-threshold", "carbon-threshold")
    one("greenflow", "greenflow (a)", ct["carbon_kg"])
    one("greenflow", "greenflow (b)", 0.6 * default["carbon_kg"])
    one("greenflow", "greenflow (c')", 0.75 * ps["carbon_kg"])
    ceiling = {h: shift_ceiling(jobs, carbon, h * 3600.0) for h in SHIFT_H}
    floor = {d: carbon_floor(jobs, carbon, nodes * gpn, d * 86400.0) for d in FLOOR_DAYS}
    span_s = max(v["makespan_s"] for v in out.values())
    return {"zone": zone, "jobs": len(jobs), "runs": out, "shift_ceiling": ceiling,
            "carbon_floor": floor,
            "carbon_warnings": list(carbon.warnings),
            "carbon_used": carbon_used(Path(carbon_file), carbon, jobs[0].submit_s, span_s)}


def carbon_used(path: Path, carbon, t0_s: float, span_s: float) -> dict:
    """The carbon dates the trace is scored against (hour-of-week alignment, sim/carbon.py):
    the trace's [t0, t0 + span] and the file's hours it maps to, and whether it wraps."""
    first = min(int(p.time_s // 3600) for p in load_carbon_csv(path).points) * 3600
    c0 = week_start_s(first)
    if c0 < first:
        c0 += WEEK_S
    n_s = len(carbon.hourly) * 3600
    off = t0_s - carbon.origin_s            # the trace's first submit in its first week
    day = "%Y-%m-%d"
    return {"trace_from": time.strftime(day, time.gmtime(t0_s)),
            "trace_to": time.strftime(day, time.gmtime(t0_s + span_s)),
            "carbon_from": time.strftime(day, time.gmtime(c0 + off % n_s)),
            "carbon_to": time.strftime(day, time.gmtime(c0 + min(off + span_s, n_s) - 1)),
            "carbon_days": n_s / 86400, "run_days": (off + span_s) / 86400,
            "wraps": off + span_s > n_s}


def figures(z: dict) -> list[str]:
    r = z["runs"]
    d, ps, ct = r["slurm-default"], r["slurm-powersave"], r["carbon-threshold"]
    a, b = r["greenflow (a)"], r["greenflow (b)"]
    lines = [f"zone {z['zone']}: {z['jobs']} jobs"]
    u = z["carbon_used"]
    if u["trace_from"][5:7] != u["carbon_from"][5:7] or u["trace_to"][5:7] != u["carbon_to"][5:7]:
        lines.append(f"  carbon: the trace's {u['trace_from']} to {u['trace_to']} is scored "
                     f"against the carbon of {u['carbon_from']} to {u['carbon_to']} (hour of week "
                     f"from each one's first Monday)"
                     + (", wrapping around at the file's end" if u["wraps"] else ""))
    for name, v in r.items():
        lines.append(f"  {name:18s} carbon {v['carbon_kg']:>10,.0f} kg  avg JCT "
                     f"{v['avg_jct_s']:>10,.0f} s  finished {v['jobs_finished']}/{z['jobs']} "
                     f"({v['jobs_timed_out']} killed at their time limit)  "
                     f"{z['jobs'] / v['sim_wall_s']:>7,.0f} jobs/s")

    def check(ok: bool) -> str:
        return "PASS" if ok else "FAIL"
    ca, ja = a["carbon_kg"] / ct["carbon_kg"], a["avg_jct_s"] / ct["avg_jct_s"]
    lines.append(f"  (a) vs carbon-threshold at equal carbon: carbon {ca:.3f}x (within 1%: "
                 f"{check(abs(ca - 1) <= 0.01)}), avg JCT {ja:.3f}x (<= 0.4: {check(ja <= 0.4)})")
    cb, jb = b["carbon_kg"] / d["carbon_kg"], b["avg_jct_s"] / d["avg_jct_s"]
    lines.append(f"  (b) budget 0.6x slurm-default: carbon {cb:.3f}x, avg JCT {jb:.3f}x "
                 f"(<= 1.0: {check(jb <= 1.0)}), all finished: "
                 f"{check(b['jobs_finished'] == z['jobs'] and not b['jobs_timed_out'])}")
    cc, jc = b["carbon_kg"] / ps["carbon_kg"], b["avg_jct_s"] / ps["avg_jct_s"]
    lines.append(f"  (c) (b) vs slurm-powersave: carbon {cc:.3f}x (<= 0.75: {check(cc <= 0.75)}),"
                 f" avg JCT {jc:.3f}x (<= 1.05: {check(jc <= 1.05)})")
    c2 = r["greenflow (c')"]
    cc2, jc2 = c2["carbon_kg"] / ps["carbon_kg"], c2["avg_jct_s"] / ps["avg_jct_s"]
    lines.append(f"  (c') budget 0.75x slurm-powersave: carbon {cc2:.3f}x (<= 0.75: "
                 f"{check(cc2 <= 0.75)}), avg JCT {jc2:.3f}x (<= 1.05: {check(jc2 <= 1.05)})")
    over = {k[len("greenflow "):]: v["carbon_over_budget"] for k, v in r.items()
            if v.get("carbon_over_budget") is not None}
    late = [k for k, x in over.items() if x > 1.01]
    lines.append("  greenflow carbon / its own budget: "
                 + ", ".join(f"{k} {x:.3f}x" for k, x in over.items())
                 + (f" (over budget: {', '.join(late)})" if late else " (all within 1%)"))
    lines.append("  time shifting's ceiling (sim/bounds.py: each job at its best start within "
                 "the window, the future known, no wait for GPUs; of running at submission): "
                 + ", ".join(f"{h} h {v:.3f}x" for h, v in z["shift_ceiling"].items()))
    lines.append("  carbon floor (sim/bounds.py: the GPU work on the cluster, split and moved for "
                 "free, its last work ending later than as soon as possible by; of as soon as "
                 "possible): " + ", ".join(f"{d} days {v:.3f}x"
                                          for d, v in z["carbon_floor"].items()))
    speed = min(z["jobs"] / a["sim_wall_s"], z["jobs"] / b["sim_wall_s"])
    lines.append(f"  (d) greenflow speed {speed:,.0f} jobs/s (>= 2,000: {check(speed >= 2000)})")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=str(builtin_trace()))
    ap.add_argument("--trace-format", default="philly", choices=FORMATS)
    ap.add_argument("--carbon-dir", required=True, help="folder of ZONE/YEAR/ZONE_YEAR_hourly.csv")
    ap.add_argument("--year", default="2021")
    ap.add_argument("--zones", default="DE-LU,GB,US-CAL-CISO")
    ap.add_argument("--nodes", type=positive_int, default=64)
    ap.add_argument("--gpus-per-node", type=positive_int, default=8)
    ap.add_argument("--workers", type=positive_int, default=3)
    ap.add_argument("--elastic-share", type=share, default=0.0,
                    help="share of jobs given an elastic range (1 to 2x their GPUs; seeded)")
    ap.add_argument("--json", action="store_true", help="also print the raw figures as JSON")
    a = ap.parse_args()
    input_file(ap, "--trace", a.trace, f"a {a.trace_format} trace CSV")
    carbon_dir = input_dir(ap, "--carbon-dir", a.carbon_dir,
                           "the folder of ZONE/YEAR/ZONE_YEAR_hourly.csv files")
    cells = []
    for zone in (z.strip() for z in a.zones.split(",")):
        if not zone:
            ap.error(f"--zones {a.zones}: an empty zone; give comma-separated zones (DE-LU,GB)")
        # the folder in any case, as the simulator matches zones
        zdir = next((d for d in sorted(carbon_dir.iterdir())
                     if d.is_dir() and d.name.upper() == zone.upper()), carbon_dir / zone)
        f = zdir / a.year / f"{zdir.name}_{a.year}_hourly.csv"
        if not f.is_file():
            have = sorted(d.name for d in carbon_dir.iterdir()
                          if (d / a.year / f"{d.name}_{a.year}_hourly.csv").is_file())
            years = sorted(y.name for y in zdir.glob("*") if y.is_dir()) if zdir.is_dir() else []
            ap.error(f"--zones {zone} --year {a.year}: no {f}; zones with {a.year} in "
                     f"{carbon_dir}: {', '.join(have) or 'none'}"
                     + (f"; years of {zdir.name}: {', '.join(years)}" if years else ""))
        cells.append((a.trace, a.trace_format, str(f), zone, a.nodes, a.gpus_per_node,
                      a.elastic_share))
    with input_errors(ap):          # the trace read once here: a bad one is one error line
        if not read_trace(a.trace, a.trace_format):
            ap.error(f"--trace {a.trace}: no jobs in it")
    with input_errors(ap), ProcessPoolExecutor(a.workers) as pool:
        zones = list(pool.map(run_zone, cells))
    for z in zones:
        u = z["carbon_used"]
        for w in z["carbon_warnings"]:
            print(f"warning: zone {z['zone']}: {w}", file=sys.stderr)
        if u["wraps"]:
            print(f"warning: zone {z['zone']}: the runs last {u['run_days']:.1f} days from the "
                  f"trace's first Monday, the carbon file {u['carbon_days']:.1f} (whole weeks): "
                  "the carbon series wraps around to its start", file=sys.stderr)
        print("\n".join(figures(z)))
    if a.json:
        print(json.dumps(zones, indent=1))


if __name__ == "__main__":
    main()
