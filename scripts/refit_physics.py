#!/usr/bin/env python3
"""Refit the GPU physics constants from the measurements in ``../shared/data``.

Usage: ``python scripts/refit_physics.py --data-dir ../shared/data [--out slurm_plugin/data/physics.json]``

Prints every fit with its error and writes the JSON the package loads at run time.
``docs/physics.md`` explains each constant and the files and rows it comes from.
Standard library only.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
from pathlib import Path

# ---- measured job classes: the eight single-job trainings of the Haghshenas nvidia-smi logs ----
CLASS_LOGS = {
    "alexnet": "outputs/Alexnet/alextnet_epoch0&1/logs/gpu_nvidia-smi.csv",
    "aps": "outputs/APS/aps_epochs50/logs/gpu_nvidia-smi.csv",
    "lstm": "outputs/LSTM/lstm_40epochs/logs/gpu_nvidia-smi.csv",
    "nas": "outputs/NAS/NAS_36100steps/logs/gpu_nvidia-smi.csv",
    "resnet18": "outputs/Resnet18/resnet18_epoch0/logs/gpu_nvidia-smi.csv",
    "transformer": "outputs/Transformer_base/Transformer_base_50000steps/logs/gpu_nvidia-smi.csv",
    "vgg16": "outputs/VGG16/vgg16_epoch0/logs/gpu_nvidia-smi.csv",
    "wavenet": "outputs/Wavenet/wavenet_steps1000/logs/gpu_nvidia-smi.csv",
}
PAIR_LOG = "outputs_multi_jobs/power_logs_aps_lstm/gpu_nvidia.csv"
NGPU_DIR = "outputs_n_GPUs/vgg16/batch_128"
# Co-location proxies: the measured pairwise job type closest to each class (same network family).
GAVEL_PROXY = {"resnet18": "('ResNet-18 (batch size 64)', 1)",
               "transformer": "('Transformer (batch size 64)', 1)",
               "lstm": "('LM (batch size 20)', 1)"}
PAL_PROXY = {"vgg16": "vgg19"}
RAW_SINGLE_PROXY = {"vgg16": "vgg19", "resnet18": "resnet50", "alexnet": "vgg19"}
# PAL application classes (profiles.json: A resnet, B/C bert, D pagerank): convolutional -> A,
# attention/recurrent -> B, others -> C.
VARIABILITY_CLASS = {"alexnet": "A", "resnet18": "A", "vgg16": "A", "nas": "A", "wavenet": "A",
                     "transformer": "B", "lstm": "B", "aps": "C"}
RESIDENT_MIB = 100  # a GPU holds a job while more than this much memory is used


def _num(text: str) -> float:
    return float(text.strip().split()[0].rstrip("%"))


def read_smi(path: Path) -> list[dict]:
    """nvidia-smi CSV rows as dicts: gpu, power_w, util_pct, mem_used_mib (two header styles)."""
    rows = []
    with path.open() as fh:
        reader = csv.reader(fh)
        next(reader)
        for line, rec in enumerate(reader, start=2):
            if len(rec) < 14:
                continue
            try:
                rows.append({"gpu": int(rec[0]), "power_w": _num(rec[2]), "util_pct": _num(rec[7]),
                             "mem_used_mib": _num(rec[13]), "line": line})
            except ValueError:
                continue
    return rows


def active_samples(rows: list[dict]) -> list[dict]:
    """Samples of each GPU between its first and last non-zero utilisation while the job's
    memory is resident; GPUs whose mean utilisation there is under 1% are not the job's."""
    out = []
    for gpu in sorted({r["gpu"] for r in rows}):
        mine = [r for r in rows if r["gpu"] == gpu and r["mem_used_mib"] > RESIDENT_MIB]
        busy = [i for i, r in enumerate(mine) if r["util_pct"] > 0]
        if not busy:
            continue
        span = mine[busy[0]:busy[-1] + 1]
        if statistics.fmean(r["util_pct"] for r in span) >= 1:
            out += span
    return out


def linfit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


def rmse(pairs: list[tuple[float, float]]) -> float:
    return math.sqrt(statistics.fmean((p - m) ** 2 for p, m in pairs))


def mape(pairs: list[tuple[float, float]]) -> float:
    return 100 * statistics.fmean(abs(p - m) / abs(m) for p, m in pairs if m)


def fit_power(logs: Path) -> tuple[dict, dict]:
    idle, samples, classes = [], [], {}
    for name, rel in CLASS_LOGS.items():
        rows = read_smi(logs / rel)
        idle += [r["power_w"] for r in rows if r["util_pct"] == 0 and r["mem_used_mib"] == 0]
        act = active_samples(rows)
        gpus = sorted({r["gpu"] for r in act})
        samples += [(r["util_pct"], r["power_w"]) for r in act]
        classes[name] = {
            "util_pct": round(statistics.fmean(r["util_pct"] for r in act), 2),
            "power_w": round(statistics.fmean(r["power_w"] for r in act), 2),
            "memory_mib": int(max(r["mem_used_mib"] for r in act)),
            "measured_gpus": len(gpus),
            "rows": f"{rel}: {len(act)} samples on GPUs {gpus} (first to last non-zero utilization.gpu "
                    f"with memory.used > {RESIDENT_MIB} MiB)",
        }
    idle_w = statistics.median(idle)
    a, b = linfit([u for u, _ in samples], [p for _, p in samples])
    # P(u) = idle + (p100 - idle) * (u/100)^gamma, grid search on gamma
    best = None
    for g10 in range(30, 251, 5):
        g = g10 / 100
        xs = [(u / 100) ** g for u, _ in samples]
        num = sum(x * (p - idle_w) for x, (_, p) in zip(xs, samples))
        den = sum(x * x for x in xs)
        span = num / den
        err = rmse([(idle_w + span * x, p) for x, (_, p) in zip(xs, samples)])
        if best is None or err < best[0]:
            best = (err, g, span)
    err, gamma, span = best
    print(f"power curve V100: idle {idle_w:.1f} W (median of {len(idle)} idle samples); "
          f"P(u) = idle + {span:.1f} * (u/100)^{gamma:.2f}; RMSE {err:.1f} W over {len(samples)} "
          f"samples (linear a+b*u: a={a:.1f} b={b:.2f}, RMSE "
          f"{rmse([(a + b * u, p) for u, p in samples]):.1f} W)")
    cls_err = [(idle_w + span * (c['util_pct'] / 100) ** gamma, c["power_w"]) for c in classes.values()]
    print(f"  class mean power from the curve vs measured: MAPE {mape(cls_err):.1f}%")
    for n, c in classes.items():
        print(f"  class {n:12s} util {c['util_pct']:5.1f}%  power {c['power_w']:6.1f} W  "
              f"mem {c['memory_mib']:6d} MiB  gpus {c['measured_gpus']}")
    curve = {"idle_power_w": round(idle_w, 2), "dynamic_power_w": round(span, 2),
             "util_gamma": gamma, "fit_rmse_w": round(err, 2), "fit_samples": len(samples)}
    return curve, classes


def fit_cap(zeus: Path, idle_w: float) -> dict:
    """Slowdown under a power cap: T(c)/T0 = ((P0 - idle) / (c - idle))^beta for c < P0."""
    groups: dict[tuple, list[dict]] = {}
    with (zeus / "summary_power_v100.csv").open() as fh:
        for line, r in enumerate(csv.DictReader(fh), start=2):
            groups.setdefault((r["dataset"], r["network"], r["batch_size"], r["optimizer"]), []).append(
                {"cap": float(r["power_limit"]), "t": float(r["time_per_epoch"]),
                 "p": float(r["average_power"]), "line": line})
    pts, pw = [], []
    for rows in groups.values():
        top = max(rows, key=lambda r: r["cap"])
        for r in rows:
            pw.append((min(top["p"], r["cap"]), r["p"]))
            if r["cap"] < top["p"]:
                pts.append(((top["p"] - idle_w) / (r["cap"] - idle_w), r["t"] / top["t"]))
    best = min(((rmse([(x ** (b / 100), y) for x, y in pts]), b / 100) for b in range(5, 201)))
    caps = sorted({r["cap"] for rows in groups.values() for r in rows})
    print(f"power cap V100 (Zeus summary_power_v100.csv, {sum(map(len, groups.values()))} rows, "
          f"{len(groups)} configs): beta {best[1]:.2f}, time-ratio RMSE {best[0]:.3f} over "
          f"{len(pts)} capped rows; power = min(P0, cap) MAPE {mape(pw):.1f}%")
    return {"cap_beta": best[1], "min_power_cap_w": caps[0], "max_power_w": caps[-1],
            "cap_fit_rmse": round(best[0], 4), "cap_fit_rows": len(pts)}


def read_pairs(colo: Path) -> tuple[dict, list]:
    """Measured normalised speeds of pairs sharing one V100: Gavel physical cluster + PAL."""
    gavel = json.loads((colo / "gavel" / "physical_cluster_throughputs.json").read_text())["v100"]
    inv = {v: k for k, v in GAVEL_PROXY.items()}
    pairs, points = {}, []
    for ka, row in gavel.items():
        if ka not in inv:
            continue
        for kb, val in row.items():
            if kb in inv and isinstance(val, list):
                sa, sb = val[0] / row["null"], val[1] / gavel[kb]["null"]
                pairs[f"{inv[ka]}|{inv[kb]}"] = [round(sa, 4), round(sb, 4)]
    pal_inv = {v: k for k, v in PAL_PROXY.items()}
    with (colo / "norm_speed.csv").open() as fh:
        for r in csv.DictReader(fh):
            a, b = r["model1"], r["model2"]
            if r["gpu_num1"] == "1" and a in pal_inv and b in pal_inv:
                pairs[f"{pal_inv[a]}|{pal_inv[b]}"] = [float(r["speed1"]), float(r["speed2"])]
    return pairs, points


def pair_log_slowdown(logs: Path, classes: dict) -> float:
    """The common slowdown that explains the measured utilisation of the co-located APS+LSTM GPU."""
    rows = [r for r in active_samples(read_smi(logs / PAIR_LOG)) if r["gpu"] == 0]
    u = statistics.fmean(r["util_pct"] for r in rows)
    return (classes["aps"]["util_pct"] + classes["lstm"]["util_pct"]) / u


def fit_interference(pairs: dict, classes: dict, log_slowdown: float) -> dict:
    """slowdown_a = 1 + k * (u_b/100) * max(0, (u_a + u_b)/100 - t): fit k, t on measured pairs
    (plus the slowdown implied by the co-located APS+LSTM log, for both jobs)."""
    ua, ub = classes["aps"]["util_pct"], classes["lstm"]["util_pct"]
    obs = [(ua, ub, log_slowdown), (ub, ua, log_slowdown)]
    for key, (sa, sb) in pairs.items():
        a, b = key.split("|")
        obs.append((classes[a]["util_pct"], classes[b]["util_pct"], 1 / sa))
        obs.append((classes[b]["util_pct"], classes[a]["util_pct"], 1 / sb))

    def pred(ua: float, ub: float, k: float, t: float) -> float:
        return 1 + k * (ub / 100) * max(0.0, (ua + ub) / 100 - t)

    best = min((rmse([(pred(ua, ub, k / 20, t / 100), s) for ua, ub, s in obs]), k / 20, t / 100)
               for k in range(0, 201) for t in range(0, 151, 5))
    const = statistics.median(s for _, _, s in obs)
    print(f"interference: constant median slowdown {const:.2f} has RMSE "
          f"{rmse([(const, s) for _, _, s in obs]):.3f}")
    print(f"interference: k {best[1]:.2f}, t {best[2]:.2f}; slowdown RMSE {best[0]:.3f} over "
          f"{len(obs)} measured (job, partner) points; pairs {sorted(pairs)}")
    return {"k": best[1], "util_threshold": best[2], "fit_rmse": round(best[0], 4),
            "fit_points": len(obs)}


def check_pair_log(logs: Path, curve: dict, classes: dict, inter: dict, pairs: dict) -> dict:
    rows = [r for r in active_samples(read_smi(logs / PAIR_LOG)) if r["gpu"] == 0]
    u = statistics.fmean(r["util_pct"] for r in rows)
    p = statistics.fmean(r["power_w"] for r in rows)
    a, b = classes["aps"], classes["lstm"]
    ua, ub = a["util_pct"], b["util_pct"]
    k, t = inter["k"], inter["util_threshold"]
    sa = 1 + k * ub / 100 * max(0, (ua + ub) / 100 - t)
    sb = 1 + k * ua / 100 * max(0, (ua + ub) / 100 - t)
    pu = min(100.0, ua / sa + ub / sb)
    pp = curve["idle_power_w"] + (a["power_w"] - curve["idle_power_w"]) / sa + \
        (b["power_w"] - curve["idle_power_w"]) / sb
    print(f"co-located APS+LSTM on GPU 0 ({PAIR_LOG}, {len(rows)} samples): measured util "
          f"{u:.1f}% power {p:.1f} W; predicted util {pu:.1f}% power {pp:.1f} W "
          f"(errors {pu - u:+.1f} pts, {100 * (pp - p) / p:+.1f}%)")
    return {"measured_util_pct": round(u, 2), "measured_power_w": round(p, 2),
            "predicted_util_pct": round(pu, 2), "predicted_power_w": round(pp, 2)}


def fit_scaling(colo: Path, logs: Path) -> dict:
    speeds: dict[str, dict[int, float]] = {}
    with (colo / "raw_single.csv").open() as fh:
        for r in csv.DictReader(fh):
            if r["pipeline_strategy"] == "NA":
                speeds.setdefault(r["model"], {})[int(r["gpu_num"])] = float(r["speed"])
    alpha = {}
    for m, s in speeds.items():
        xs = [math.log(n) for n in s if n > 1]
        ys = [math.log(s[n] / s[1]) for n in s if n > 1]
        alpha[m] = round(sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs), 4)
    util = {}
    for d in sorted((logs / NGPU_DIR).iterdir()):
        n = int(d.name.rstrip("gpu"))
        rows = active_samples(read_smi(d / "gpu_nvidia.csv"))
        util[n] = statistics.fmean(r["util_pct"] for r in rows)
    xs = [math.log(n) for n in util if n > 1]
    ys = [math.log(util[n] / util[1]) for n in util if n > 1]
    uexp = sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)
    err = rmse([(util[1] * n ** uexp, util[n]) for n in util])
    print(f"scaling: speedup(n) = n^alpha from raw_single.csv: {alpha}; default "
          f"{statistics.median(alpha.values()):.3f}")
    print(f"  per-GPU util vs GPU count (VGG16 batch 128, 1-8 GPUs): util(n) = util(1) * n^{uexp:.3f}, "
          f"RMSE {err:.1f} pts; measured {({n: round(u, 1) for n, u in sorted(util.items())})}")
    return {"alpha": alpha, "alpha_default": round(statistics.median(alpha.values()), 4),
            "util_exponent": round(uexp, 4), "util_fit_rmse_pct": round(err, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default="../shared/data", type=Path)
    ap.add_argument("--out", default=Path(__file__).resolve().parent.parent / "slurm_plugin" / "data"
                    / "physics.json", type=Path)
    args = ap.parse_args()
    d = args.data_dir
    logs = d / "power" / "haghshenas-colocated" / "Data_logs"
    if not logs.is_dir():
        print(f"refit_physics: {logs} not found; pass --data-dir pointing at the shared data",
              file=sys.stderr)
        return 2
    curve, classes = fit_power(logs)
    cap = fit_cap(d / "power" / "zeus", curve["idle_power_w"])
    pairs, _ = read_pairs(d / "colocation")
    inter = fit_interference(pairs, classes, pair_log_slowdown(logs, classes))
    pair_check = check_pair_log(logs, curve, classes, inter, pairs)
    scaling = fit_scaling(d / "colocation", logs)
    for name, c in classes.items():
        proxy = RAW_SINGLE_PROXY.get(name)
        c["scaling_alpha"] = scaling["alpha"][proxy] if proxy else scaling["alpha_default"]
        c["variability_class"] = VARIABILITY_CLASS[name]
    out = {
        "source": "scripts/refit_physics.py over ../shared/data (see docs/physics.md)",
        "gpu_models": {"V100": {**curve, **cap, "memory_mib": 32510}},
        "node": {"base_power_w": 400.0, "suspended_power_w": 15.0, "resume_delay_s": 300.0,
                 "note": "not in the data: assumptions, see docs/physics.md"},
        "classes": classes,
        "pairs": pairs,
        "interference": inter,
        "pair_log_check": pair_check,
        "scaling": {"util_exponent": scaling["util_exponent"],
                    "util_fit_rmse_pct": scaling["util_fit_rmse_pct"],
                    "alpha_measured": scaling["alpha"], "alpha_default": scaling["alpha_default"]},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
