#!/usr/bin/env python3
"""Configuration models: error on rows left out of the fit.

- Pollux (GPU count x batch size), per workload: throughput (samples/s) MAPE in-sample, leaving
  out each local batch size in turn (refit on the rest, predict its rows), and leaving out each
  GPU count (replicas) in turn.
- Zeus (power cap x batch size, one GPU) per GPU model and workload, and Perseus (power cap, one
  batch size) per GPU model and LLM: time and power MAPE in-sample, leaving out each batch size,
  and leaving out each power cap below the top one.

Usage: ``python benchmarks/bench_config_model.py [--data-dir ../shared/data]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO))

import fit_config_models as fcm  # noqa: E402


def thr(r: dict, step_s: float) -> float:
    return r["replicas"] * r["local_bsz"] / step_s


def held_out_scaling(rows: list[dict], key: str) -> float:
    pairs = []
    for v in sorted({r[key] for r in rows}):
        train = [r for r in rows if r[key] != v]
        if not train:
            continue
        fit = fcm.fit_scaling(train)
        pairs += [(thr(r, fcm.step_time_s(fit, r["replicas"], r["local_bsz"], r["nodes"])),
                   thr(r, r["step_time_s"])) for r in rows if r[key] == v]
    return fcm.mape(pairs)


def cap_errors(rows: list[dict], fit: dict) -> tuple[float, float]:
    t = fcm.mape([(fcm.cap_time_s(fit, r["batch"], r["cap_w"]), r["time_s"]) for r in rows])
    p = fcm.mape([(fcm.cap_power_w(fit, r["batch"], r["cap_w"]), r["power_w"]) for r in rows])
    return t, p


def held_out_caps(rows: list[dict], key: str) -> tuple[float, float]:
    top = max(r["cap_w"] for r in rows)
    values = sorted({r[key] for r in rows})
    if key == "cap_w":
        values = [v for v in values if v < top]
    if len(values) < 2 and key == "batch":
        return float("nan"), float("nan")
    tp, pp = [], []
    for v in values:
        train = [r for r in rows if r[key] != v]
        test = [r for r in rows if r[key] == v]
        fit = fcm.fit_caps(train, max_cap_w=top)
        tp += [(fcm.cap_time_s(fit, r["batch"], r["cap_w"]), r["time_s"]) for r in test]
        pp += [(fcm.cap_power_w(fit, r["batch"], r["cap_w"]), r["power_w"]) for r in test]
    return fcm.mape(tp), fcm.mape(pp)


def pair(x: tuple[float, float]) -> str:
    return "-" if x[0] != x[0] else f"{x[0]:.1f}/{x[1]:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    args = ap.parse_args()
    traces = args.data_dir / "workloads" / "pollux" / "traces"
    for need in (traces, args.data_dir / "power" / "zeus",
                 args.data_dir / "power" / "perseus" / "csv"):
        if not need.is_dir():
            ap.error(f"--data-dir {args.data_dir}: {need} is missing; give the folder holding "
                     "workloads/pollux/traces/ and power/{zeus,perseus}/")

    print("Pollux: throughput MAPE % (GPU count x batch size)")
    print(f"{'workload':<12}{'rows':>6}{'in-sample':>11}{'leave-1-batch':>15}{'leave-1-gpus':>14}")
    means = [[], [], []]
    for w in fcm.POLLUX_WORKLOADS:
        lacks = [f for f in ("scalability.csv", "placements.csv") if not (traces / w / f).is_file()]
        if lacks:           # the others are still measured; this one is out of the mean
            print(f"{w:<12}  left out: no {', '.join(f'{w}/{f}' for f in lacks)} in {traces}")
            continue
        try:
            rows = fcm.read_pollux(args.data_dir, w)
        except (OSError, KeyError, ValueError) as exc:
            ap.error(f"--data-dir {args.data_dir}: {traces / w}: cannot read ({exc!r})")
        fit = fcm.fit_scaling(rows)
        ins = fcm.mape([(thr(r, fcm.step_time_s(fit, r["replicas"], r["local_bsz"], r["nodes"])),
                         thr(r, r["step_time_s"])) for r in rows])
        lb, lg = held_out_scaling(rows, "local_bsz"), held_out_scaling(rows, "replicas")
        for m, v in zip(means, (ins, lb, lg)):
            m.append(v)
        print(f"{w:<12}{len(rows):>6}{ins:>11.1f}{lb:>15.1f}{lg:>14.1f}")
    if means[0]:
        print(f"{'mean':<18}" + "".join(f"{sum(m) / len(m):>{wd}.1f}"
                                        for m, wd in zip(means, (11, 15, 14))))
    else:
        print(f"{'mean':<18}  n/a (no Pollux workload with both files)")

    print("\nZeus / Perseus: time and power MAPE % (power cap x batch size, one GPU model)")
    print(f"{'source':<9}{'gpu':<9}{'workload':<32}{'rows':>5}  {'in-sample t/P':>14}"
          f"{'leave-1-batch t/P':>19}{'leave-1-cap t/P':>17}")
    groups = [("zeus", k, v) for k, v in sorted(fcm.read_zeus(args.data_dir).items())]
    groups += [("perseus", k, v) for k, v in sorted(fcm.read_perseus(args.data_dir).items())]
    acc: dict[str, list[list[float]]] = {}
    for src, (gpu, w), rows in groups:
        fit = fcm.fit_caps(rows)
        ins = cap_errors(rows, fit)
        lb = held_out_caps(rows, "batch")
        lc = held_out_caps(rows, "cap_w")
        a = acc.setdefault(src, [[] for _ in range(6)])
        for lst, v in zip(a, (*ins, *lb, *lc)):
            if v == v:
                lst.append(v)

        print(f"{src:<9}{gpu:<9}{w:<32}{len(rows):>5}  {pair(ins):>14}{pair(lb):>19}"
              f"{pair(lc):>17}")
    for src, a in acc.items():
        m = [sum(x) / len(x) if x else float("nan") for x in a]
        print(f"mean {src:<50}  {pair((m[0], m[1])):>14}{pair((m[2], m[3])):>19}"
              f"{pair((m[4], m[5])):>17}")


if __name__ == "__main__":
    main()
