#!/usr/bin/env python3
"""Carbon forecast error: MAPE at 1, 6 and 24 h ahead of every built-in forecaster on every
carbon series in the shared data (Electricity Maps hourly files per zone and year, and the
"Let's Wait Awhile" 15/30-minute series, averaged per hour).

Rolling origin: every ``--stride-h`` hours (13 by default: coprime with 24, so origins visit every
hour of day) after the first ``HISTORY_DAYS`` days of a file, each forecaster sees only the hours
before the origin and predicts the next 24. MAPE is over hours whose actual value is valid and
above 1 gCO2eq/kWh; the header names the default forecaster (``DEFAULT_FORECASTER``).

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
from slurm_plugin.telemetry.carbon_csv import load  # noqa: E402

HORIZONS_H = (1, 6, 24)


def series_files(data_dir: Path) -> list[tuple[str, Path]]:
    carbon = data_dir / "carbon"
    if not carbon.is_dir():
        raise SystemExit(f"bench_carbon_forecast: {carbon} is missing; give --data-dir, the "
                         "folder holding carbon/<zone>/<year>/*.csv and carbon/lets-wait-awhile/")
    out = [(f"{p.parent.parent.name} {p.parent.name}", p)
           for p in sorted(carbon.glob("*/*/*_hourly.csv"))]
    out += [(f"LWA {p.stem.split('_')[0]} 2020", p)
            for p in sorted((carbon / "lets-wait-awhile").glob("*_ci.csv"))]
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
    ap.add_argument("--stride-h", type=int, default=13)
    ap.add_argument("--basis", choices=("lca", "direct"), default="lca")
    ap.add_argument("--only", default="", help="only series whose label contains this")
    args = ap.parse_args()
    names = list(FORECASTERS)
    head = f"{'series':<18}{'hours':>6}{'gaps':>5}  " + "  ".join(
        f"{n[:13]:>13}" for n in names)
    print(f"MAPE % at 1 / 6 / 24 h ahead (basis {args.basis}, origins every {args.stride_h} h, "
          f"default forecaster: {DEFAULT_FORECASTER})")
    print(head)
    totals = {n: {h: [] for h in HORIZONS_H} for n in names}
    t0 = time.perf_counter()
    for label, path in series_files(args.data_dir):
        if args.only and args.only.lower() not in label.lower():
            continue
        s = HourlySeries.from_points((p.time_s, p.gco2_per_kwh) for p in load(path, args.basis).points)
        res = evaluate(s, args.stride_h)
        cells = []
        for n in names:
            cells.append("/".join(f"{res[n][h][0]:.1f}" for h in HORIZONS_H))
            for h in HORIZONS_H:
                totals[n][h].append(res[n][h][0])
        best = {h: min(names, key=lambda n: res[n][h][0]) for h in HORIZONS_H}
        print(f"{label:<18}{len(s.values):>6}{s.gap_hours:>5}  "
              + "  ".join(f"{c:>13}" for c in cells)
              + "   best: " + ",".join(best[h] for h in HORIZONS_H))
    print(f"{'mean over series':<29}  " + "  ".join(
        f"{'/'.join(f'{sum(v[h]) / max(1, len(v[h])):.1f}' for h in HORIZONS_H):>13}"
        for v in (totals[n] for n in names)))
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
