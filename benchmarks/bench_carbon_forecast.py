#!/usr/bin/env python3
"""Carbon forecast error: MAPE at 1, 6 and 24 h ahead of every built-in forecaster on every
carbon series in the shared data (Electricity Maps hourly files per zone and year, and the
"Let's Wait Awhile" 15/30-minute series, averaged per hour).

Rolling origin: every ``--stride-h`` hours (13 by default: coprime with 24, so origins visit every
hour of day) after the first ``HISTORY_DAYS`` days of a file, each forecaster sees only the hours
before the origin and predicts the next 24. MAPE is over hours whose actual value is valid and
above 1 gCO2eq/kWh; the header names the default forecaster (``DEFAULT_FORECASTER``).
A series shorter than ``HISTORY_DAYS`` days + 24 h is left out (said on its row) and out of the
mean; a cell with no valid hour prints ``n/a``. The "Let's Wait Awhile" rows are labelled with
the years they span (from 2019-12-20) and have one unlabelled column: ``--basis`` does not apply.

Usage: ``python benchmarks/bench_carbon_forecast.py [--data-dir ../shared/data] [--stride-h 13]
[--basis lca|direct] [--only SUBSTRING]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from slurm_plugin.physics.carbon_forecast import (DEFAULT_FORECASTER, FORECASTERS,  # noqa: E402
                                                  HISTORY_DAYS, HourlySeries)
from slurm_plugin.formats.carbon_csv import load  # noqa: E402

from benchmarks._common import input_errors, positive_int  # noqa: E402

HORIZONS_H = (1, 6, 24)
CELL = 14           # a cell: "12.3/45.6/78.9"
LWA = "lets-wait-awhile"


def series_files(ap: argparse.ArgumentParser, data_dir: Path) -> list[tuple[str, Path]]:
    carbon = data_dir / "carbon"
    if not carbon.is_dir():
        ap.error(f"--data-dir {data_dir}: {carbon} is missing; give the folder holding "
                 "carbon/<zone>/<year>/<zone>_<year>_hourly.csv and carbon/lets-wait-awhile/")
    out = [(f"{p.parent.parent.name} {p.parent.name}", p)
           for p in sorted(carbon.glob("*/*/*_hourly.csv"))]
    out += [(f"LWA {p.stem.split('_')[0]}", p) for p in sorted((carbon / LWA).glob("*_ci.csv"))]
    if not out:
        ap.error(f"--data-dir {data_dir}: no carbon series in {carbon}; expected "
                 "<zone>/<year>/<zone>_<year>_hourly.csv (Electricity Maps) or "
                 f"{LWA}/<zone>_ci.csv files")
    return out


def evaluate(series: HourlySeries, stride_h: int) -> dict[str, dict[int, tuple[float, int]]]:
    """{forecaster: {horizon: (MAPE %, points)}} over rolling origins."""
    vals = series.values
    errs = {name: {h: [0.0, 0] for h in HORIZONS_H} for name in FORECASTERS}
    hmax = max(HORIZONS_H)
    for end in range(HISTORY_DAYS * 24, len(vals) - hmax + 1, stride_h):
        for name, f in FORECASTERS.items():
            pred = f.predict_at(vals, end, hmax)
            for h in HORIZONS_H:
                actual, p = vals[end - 1 + h], pred[h - 1]
                if actual is None or p is None or actual <= 1.0:
                    continue
                e = errs[name][h]
                e[0] += abs(p - actual) / actual
                e[1] += 1
    return {n: {h: (100 * s / c if c else float("nan"), c) for h, (s, c) in d.items()}
            for n, d in errs.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--stride-h", type=positive_int, default=13)
    ap.add_argument("--basis", choices=("lca", "direct"), default="lca")
    ap.add_argument("--only", default="", help="only series whose label contains this")
    args = ap.parse_args()
    names = list(FORECASTERS)
    files, loaded = [], {}
    for label, path in series_files(ap, args.data_dir):
        if path.parent.name == LWA:     # labelled with the years it spans: read first
            with input_errors(ap, "--data-dir: "):
                loaded[path] = load(path, args.basis).points
            years = sorted({time.gmtime(p.time_s).tm_year for p in loaded[path]})
            if years:
                label = f"{label} {years[0]}" + (f"-{years[-1]}" if years[-1] != years[0] else "")
        if not args.only or args.only.lower() in label.lower():
            files.append((label, path))
    no_match = (f"--only {args.only}: no series matched; labels are ZONE YEAR (GB 2024) or "
                "LWA <zone> <years> (LWA gb 2019-2021)")
    if not files:
        ap.error(no_match)
    need_h = HISTORY_DAYS * 24 + max(HORIZONS_H)
    head = f"{'series':<18}{'hours':>6}{'gaps':>5}  " + "  ".join(
        f"{n[:CELL]:>{CELL}}" for n in names)
    print(f"MAPE % at 1 / 6 / 24 h ahead (basis {args.basis}, origins every {args.stride_h} h, "
          f"default forecaster: {DEFAULT_FORECASTER})")
    print(head)
    totals = {n: {h: [] for h in HORIZONS_H} for n in names}
    t0 = time.perf_counter()
    lwa_shown = 0
    for label, path in files:
        if path in loaded:
            points = loaded[path]
            lwa_shown += 1
        else:
            with input_errors(ap, "--data-dir: "):
                points = load(path, args.basis).points
        s = HourlySeries.from_points((p.time_s, p.gco2_per_kwh) for p in points)
        if len(s.values) < need_h:
            print(f"{label:<18}{len(s.values):>6}{s.gap_hours:>5}  too short, left out "
                  f"(needs {HISTORY_DAYS} days + {max(HORIZONS_H)} h = {need_h} h)")
            continue
        res = evaluate(s, args.stride_h)
        cells = []
        for n in names:
            cells.append("n/a" if all(res[n][h][0] != res[n][h][0] for h in HORIZONS_H) else
                         "/".join(f"{res[n][h][0]:.1f}" for h in HORIZONS_H))
            for h in HORIZONS_H:
                if res[n][h][0] == res[n][h][0]:         # NaN: no valid hour, out of the mean
                    totals[n][h].append(res[n][h][0])
        best = {}
        for h in HORIZONS_H:
            valid = [n for n in names if res[n][h][0] == res[n][h][0]]
            best[h] = min(valid, key=lambda n: res[n][h][0]) if valid else "n/a"
        print(f"{label:<18}{len(s.values):>6}{s.gap_hours:>5}  "
              + "  ".join(f"{c:>{CELL}}" for c in cells)
              + "   best: " + ",".join(best[h] for h in HORIZONS_H)
              + ("" if any(b != "n/a" for b in best.values()) else
                 " (no hour with a valid value above 1 gCO2eq/kWh)"))

    def mean(v: list[float]) -> str:
        return f"{sum(v) / len(v):.1f}" if v else "n/a"
    if any(v[h] for n in names for v in (totals[n],) for h in HORIZONS_H):
        print(f"{'mean over series':<29}  " + "  ".join(
            f"{'/'.join(mean(v[h]) for h in HORIZONS_H):>{CELL}}"
            for v in (totals[n] for n in names)))
    else:
        print(f"{'mean over series':<29}  n/a (no series long enough)")
    if lwa_shown and args.basis:
        print(f"(LWA series: one unlabelled column, so --basis {args.basis} does not apply to "
              "them)")
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
