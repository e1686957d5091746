#!/usr/bin/env python3
"""Fit the per-workload configuration models (throughput and power versus GPU count, batch size
and power cap) from the measurements in ``../shared/data`` and write
``slurm_plugin/data/config_models.json``.

Usage: ``python scripts/fit_config_models.py [--data-dir ../shared/data] [--out FILE]``

- GPU count and batch size: the Pollux scalability and placement profiles
  (``workloads/pollux/traces/<workload>/{scalability,placements}.csv``), Pollux's own model:
  ``step = (grad ** gamma + sync ** gamma) ** (1 / gamma)`` with ``grad = a + b * local_batch``
  (fitted on the 1-GPU rows) and ``sync = a + b * (replicas - 2)``, one line within a node and
  one across nodes (fitted on the ``sync_time`` column), ``gamma`` by grid search.
- Power cap and batch size on one GPU: the Zeus power traces
  (``power/zeus/summary_power_<gpu>.csv``, every such file present) per GPU model and workload,
  and the Perseus ``power/perseus/csv/<gpu>/zeus_global.csv`` (every GPU folder present: A100
  and A40 in the shared data; one batch size, every stage at the same
  limit): ``time(b, cap_max) = ta + tb / b``; ``power(b, cap_max) = pa + pb * b / (b + bh)`` (``bh`` by grid search);
  ``power(b, cap) = (P0 ** -k + cap ** -k) ** (-1 / k)``;
  ``time(b, cap) / time(b, cap_max) = 1 + s * max(0, P0 / cap - 1) ** m``.
Fits minimise relative error (least squares weighted by 1/y^2). ``benchmarks/bench_config_model.py``
prints the error on rows left out of each fit. Standard library only.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from slurm_plugin.physics.config_model import CapFit, ScalingFit  # noqa: E402

# every file present is read: summary_power_<gpu>.csv (Zeus), csv/<GPU>/zeus_global.csv (Perseus)
ZEUS_PATTERN = "summary_power_*.csv"
PERSEUS_FILE = "zeus_global.csv"


def zeus_files(data_dir: Path) -> dict[str, Path]:
    """GPU name (upper case: summary_power_rtx6000.csv -> RTX6000) -> its Zeus file."""
    return {f.stem[len("summary_power_"):].upper(): f
            for f in sorted((data_dir / "power" / "zeus").glob(ZEUS_PATTERN))}


def perseus_files(data_dir: Path) -> dict[str, Path]:
    """GPU name (its folder) -> its Perseus zeus_global.csv."""
    return {f.parent.name: f
            for f in sorted((data_dir / "power" / "perseus" / "csv").glob(f"*/{PERSEUS_FILE}"))}
# Pollux workload -> the Zeus (dataset/network) it measures too ("" none: nearest used).
POLLUX_WORKLOADS = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")
ZEUS_OF = {"bert": "squad/bert_base_uncased", "cifar10": "cifar100/shufflenetv2",
           "deepspeech2": "librispeech/deepspeech2", "imagenet": "imagenet/resnet50",
           "ncf": "movielens-1m/ncf", "yolov3": "imagenet/resnet50"}
ZEUS_WHY = {"cifar10": "Zeus has no ResNet-18/CIFAR-10: its small CIFAR network (ShuffleNetV2 "
                       "on CIFAR-100) stands in",
            "yolov3": "Zeus has no YOLOv3: its ImageNet CNN (ResNet-50) stands in"}
# Job classes of physics/classes.py -> nearest measured workload (classes.py classes have no
# configuration sweeps of their own).
CLASS_MODEL = {
    "resnet18": ("cifar10", "measured: Pollux cifar10 is ResNet-18 on CIFAR-10"),
    "vgg16": ("imagenet", "nearest: ImageNet CNN (Pollux/Zeus ResNet-50); VGG-16 not swept"),
    "alexnet": ("imagenet", "nearest: ImageNet CNN (Pollux/Zeus ResNet-50); AlexNet not swept"),
    "nas": ("imagenet", "nearest: large-memory ImageNet CNN (ResNet-50); NAS not swept"),
    "lstm": ("deepspeech2", "nearest: recurrent network (DeepSpeech2); LSTM LM not swept"),
    "wavenet": ("deepspeech2", "nearest: speech model (DeepSpeech2); WaveNet not swept"),
    "transformer": ("bert", "nearest: transformer (BERT fine-tuning); Transformer-base not swept"),
    "aps": ("ncf", "nearest: low-utilisation model (NCF, util 44 % class); APS not swept"),
}


# ---------------------------------------------------------------- small least squares
def wls(xs: list[list[float]], ys: list[float], rel: bool = True) -> list[float]:
    """Least squares of y on the columns of xs, weighted by 1/y^2 when ``rel``."""
    n = len(xs[0])
    ata = [[0.0] * n for _ in range(n)]
    atb = [0.0] * n
    for x, y in zip(xs, ys):
        w = 1.0 / (y * y) if rel and y else 1.0
        for i in range(n):
            atb[i] += w * x[i] * y
            for j in range(n):
                ata[i][j] += w * x[i] * x[j]
    for i in range(n):
        ata[i][i] += 1e-12 * (ata[i][i] or 1.0)
    # Gaussian elimination
    m = [row[:] + [b] for row, b in zip(ata, atb)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        if abs(m[c][c]) < 1e-300:
            raise ValueError("singular least-squares system")
        for r in range(c + 1, n):
            f = m[r][c] / m[c][c]
            for k in range(c, n + 1):
                m[r][k] -= f * m[c][k]
    sol = [0.0] * n
    for c in range(n - 1, -1, -1):
        sol[c] = (m[c][n] - sum(m[c][k] * sol[k] for k in range(c + 1, n))) / m[c][c]
    return sol


def mape(pairs: list[tuple[float, float]]) -> float:
    pairs = [(p, y) for p, y in pairs if y > 0]
    return 100 * sum(abs(p - y) / y for p, y in pairs) / len(pairs) if pairs else float("nan")


# ---------------------------------------------------------------- Pollux: GPU count x batch
def read_pollux(data_dir: Path, workload: str) -> list[dict]:
    """Rows ``nodes, replicas, local_bsz, step_time_s, sync_time_s`` from both profile files."""
    base = data_dir / "workloads" / "pollux" / "traces" / workload
    rows = []
    with open(base / "scalability.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            rows.append({"nodes": int(r["num_nodes"]), "replicas": int(r["num_replicas"]),
                         "local_bsz": int(r["local_bsz"]), "step_time_s": float(r["step_time"]),
                         "sync_time_s": float(r["sync_time"])})
    with open(base / "placements.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            p = r["placement"].strip()
            rows.append({"nodes": len(p), "replicas": sum(int(c) for c in p),
                         "local_bsz": int(r["local_bsz"]), "step_time_s": float(r["step_time"]),
                         "sync_time_s": float(r["sync_time"])})
    return rows


def step_time_s(fit: dict, gpus: int, local_bsz: float, nodes: int) -> float:
    return ScalingFit(**fit).step_time_s(gpus, local_bsz, nodes)


def fit_scaling(rows: list[dict]) -> dict:
    one = [r for r in rows if r["replicas"] == 1]
    if len({r["local_bsz"] for r in one}) < 2:   # no 1-GPU rows at 2 batch sizes: use all
        one = rows
    ga, gb = wls([[1.0, r["local_bsz"]] for r in one], [r["step_time_s"] for r in one])
    fit = {"grad_a_s": ga, "grad_b_s": gb}
    for key, sel in (("local", lambda r: r["nodes"] == 1), ("node", lambda r: r["nodes"] > 1)):
        multi = [r for r in rows if r["replicas"] >= 2 and sel(r)]
        if len({r["replicas"] for r in multi}) >= 2:
            a, b = wls([[1.0, r["replicas"] - 2] for r in multi],
                       [r["sync_time_s"] for r in multi], rel=False)
        elif multi:
            a, b = sum(r["sync_time_s"] for r in multi) / len(multi), 0.0
        else:
            a, b = 0.0, 0.0
        fit[f"sync_{key}_a_s"], fit[f"sync_{key}_b_s"] = a, b
    if not any(r["nodes"] == 1 and r["replicas"] >= 2 for r in rows):
        fit["sync_local_a_s"], fit["sync_local_b_s"] = fit["sync_node_a_s"], fit["sync_node_b_s"]
    best = None
    fit["gamma"] = 1.0
    for g10 in range(10, 101, 5):
        fit["gamma"] = g10 / 10
        err = mape([(step_time_s(fit, r["replicas"], r["local_bsz"], r["nodes"]), r["step_time_s"])
                    for r in rows])
        if best is None or err < best[0]:
            best = (err, fit["gamma"])
    fit["gamma"] = best[1]
    return fit


# ---------------------------------------------------------------- Zeus / Perseus: cap x batch
def read_zeus(data_dir: Path) -> dict[tuple[str, str], list[dict]]:
    """{(gpu, dataset/network): rows batch, cap_w, time_s, power_w}"""
    out: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for gpu, path in zeus_files(data_dir).items():
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                out[(gpu, f"{r['dataset']}/{r['network']}")].append(
                    {"batch": int(r["batch_size"]), "cap_w": float(r["power_limit"]),
                     "time_s": float(r["time_per_epoch"]), "power_w": float(r["average_power"])})
    return out


def read_perseus(data_dir: Path) -> dict[tuple[str, str], list[dict]]:
    """{(gpu, model): rows} from zeus_global.csv (one limit on every stage); power per GPU."""
    out: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for gpu, path in perseus_files(data_dir).items():
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                ngpu = int(r["dp"]) * int(r["tp"]) * int(r["pp"])
                t, e = float(r["time"]), float(r["energy"])
                out[(gpu, r["model_name"])].append(
                    {"batch": int(r["batch_size"]), "cap_w": float(r["power_limit_0"]),
                     "time_s": t, "power_w": e / t / ngpu})
    return out


def cap_power_w(fit: dict, batch: float, cap_w: float | None) -> float:
    return CapFit(**fit).power_w(batch, cap_w)


def cap_time_s(fit: dict, batch: float, cap_w: float | None) -> float:
    return CapFit(**fit).time_s(batch, cap_w)


def fit_caps(rows: list[dict], max_cap_w: float | None = None) -> dict:
    top = max_cap_w if max_cap_w is not None else max(r["cap_w"] for r in rows)
    full = [r for r in rows if r["cap_w"] >= top]
    if not full:  # no row at the top limit: each batch's highest-limit row
        by_b: dict[int, dict] = {}
        for r in rows:
            if r["batch"] not in by_b or r["cap_w"] > by_b[r["batch"]]["cap_w"]:
                by_b[r["batch"]] = r
        full = list(by_b.values())
    if len({r["batch"] for r in full}) >= 2:
        ta, tb = wls([[1.0, 1.0 / r["batch"]] for r in full], [r["time_s"] for r in full])
        best_p = None
        for i in range(0, 27):
            bh = 2 ** (i / 2)
            xs = [[1.0, r["batch"] / (r["batch"] + bh)] for r in full]
            a, b = wls(xs, [r["power_w"] for r in full])
            err = mape([(a + b * x[1], r["power_w"]) for x, r in zip(xs, full)])
            if best_p is None or err < best_p[0]:
                best_p = (err, a, b, bh)
        _, pa, pb, bh = best_p
    else:
        ta, tb = sum(r["time_s"] for r in full) / len(full), 0.0
        pa, pb, bh = sum(r["power_w"] for r in full) / len(full), 0.0, 1.0
    fit = {"time_a_s": ta, "time_b_s": tb, "power_a_w": pa, "power_b_w": pb,
           "power_half_batch": bh,
           "max_cap_w": top, "min_cap_w": min(r["cap_w"] for r in rows),
           "smooth_k": 16.0, "slow_s": 0.0, "slow_m": 1.0}
    capped = [r for r in rows if r["cap_w"] < top]
    best = None
    for k in (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64):
        fit["smooth_k"] = k
        err = mape([(cap_power_w(fit, r["batch"], r["cap_w"]), r["power_w"]) for r in capped])
        if best is None or err < best[0]:
            best = (err, k)
    fit["smooth_k"] = best[1] if capped else 16
    best = None
    for m10 in range(3, 41):
        m = m10 / 10
        xs, ys = [], []
        for r in capped:
            p0 = CapFit(**fit).full_power_w(r["batch"])
            t0 = CapFit(**fit).full_time_s(r["batch"])
            x = max(0.0, p0 / r["cap_w"] - 1) ** m
            xs.append(x)
            ys.append(r["time_s"] / t0 - 1)
        den = sum(x * x for x in xs)
        s = max(0.0, sum(x * y for x, y in zip(xs, ys)) / den) if den > 0 else 0.0
        fit["slow_s"], fit["slow_m"] = s, m
        err = mape([(cap_time_s(fit, r["batch"], r["cap_w"]), r["time_s"]) for r in capped])
        if best is None or err < best[0]:
            best = (err, s, m)
    if best is not None:
        fit["slow_s"], fit["slow_m"] = best[1], best[2]
    else:
        fit["slow_s"], fit["slow_m"] = 0.0, 1.0
    return fit


# ---------------------------------------------------------------- the whole file
def fit_all(data_dir: Path) -> dict:
    for need in (data_dir / "workloads" / "pollux" / "traces", data_dir / "power" / "zeus",
                 data_dir / "power" / "perseus" / "csv"):
        if not need.is_dir():
            raise SystemExit(f"fit_config_models: {need} is missing; give --data-dir, the folder "
                             "holding workloads/pollux/ and power/{zeus,perseus}/")
    zeus, perseus = read_zeus(data_dir), read_perseus(data_dir)
    workloads = {}
    for w in POLLUX_WORKLOADS:
        rows = read_pollux(data_dir, w)
        caps = {gpu: fit_caps(r) for (gpu, zw), r in sorted(zeus.items()) if zw == ZEUS_OF[w]}
        workloads[w] = {
            "scaling": fit_scaling(rows),
            "measured_gpus_per_node": max(r["replicas"] for r in rows if r["nodes"] == 1),
            # the median profiled local batch: a job's batch when nothing else is known
            "reference_local_batch": sorted({r["local_bsz"] for r in rows})[
                len({r["local_bsz"] for r in rows}) // 2],
            "caps": caps,
            "cap_source": f"zeus {ZEUS_OF[w]}",
            "cap_note": ZEUS_WHY.get(w, "measured: the same model and dataset in Zeus"),
            "rows": len(rows),
        }
    gpu_caps = {}
    for gpu in sorted({g for g, _ in perseus}):
        fits = {m: fit_caps(r) for (g, m), r in sorted(perseus.items()) if g == gpu}
        gpu_caps[gpu] = {"models": fits,
                         "source": f"perseus {gpu}/zeus_global.csv (pipeline-parallel LLMs)"}
    return {
        "about": "Configuration models per workload; fitted by scripts/fit_config_models.py "
                 "from ../shared/data (Pollux OSDI'21 profiles, Zeus NSDI'23 and Perseus SOSP'24 "
                 "power traces). See docs/physics.md, 'Configuration models'.",
        "workloads": workloads,
        "gpu_caps": gpu_caps,
        "classes": {c: {"workload": w, "note": why} for c, (w, why) in sorted(CLASS_MODEL.items())},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--out", type=Path, default=REPO / "slurm_plugin" / "data" /
                    "config_models.json")
    args = ap.parse_args()
    out = fit_all(args.data_dir)

    def rnd(x):
        if isinstance(x, float):
            return float(f"{x:.6g}")
        if isinstance(x, dict):
            return {k: rnd(v) for k, v in x.items()}
        return x

    args.out.write_text(json.dumps(rnd(out), indent=1, sort_keys=True) + "\n")
    for w, body in out["workloads"].items():
        s = body["scaling"]
        print(f"{w:<12} gamma {s['gamma']:.1f}  grad {s['grad_a_s']:.4f}+{s['grad_b_s']:.2e}*b s  "
              f"caps on {', '.join(body['caps'])}")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
