#!/usr/bin/env python3
"""Build the GPU model catalogue ``slurm_plugin/data/gpu_models.json`` from ``../shared/data``.

Usage: ``python scripts/fit_gpu_models.py [--data-dir ../shared/data] [--out FILE]``

One entry per GPU model and form factor, named as NVML reports it (``nvmlDeviceGetName``),
normalised (``slurm_plugin/physics/gpu_models.py``: upper case, no ``NVIDIA ``/``Tesla ``
prefix, spaces as ``-``). Every constant carries its source:

- ``measured``: fitted or read from a measurement of this model (the data set, the rows, and
  the error on rows left out of the fit where it is a fit);
- ``datasheet``: an NVIDIA datasheet figure (``power/GPU-DATASHEETS.md``; the V100's, absent
  there, from NVIDIA's V100 datasheet), or such a figure times a share measured on other models
  (the share and the models it comes from are named);
- ``carried-over``: the value of another model (the same chip's measured sibling, else the
  median over the measured chips), said which.

The forms are those of ``slurm_plugin/physics/power.py`` (the V100 fit of
``scripts/refit_physics.py``): power ``P(u) = idle + dynamic * (u/100) ** util_gamma``; time
under a cap ``T/T0 = ((P0 - idle) / (cap - idle)) ** cap_beta`` below the job's uncapped draw
P0; co-location ``slowdown_a = 1 + k * (u_b/100) * max(0, (u_a + u_b)/100 - t)`` plus the
measured pairs. The V100-SXM2-32GB entry is ``physics.json``'s ``V100``, constant for constant
(``refit_physics.py``'s own fits are called). ``benchmarks/bench_gpu_models.py`` prints the
held-out errors stored here. ``docs/gpu-models.md`` explains every rule. Standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import math
import re
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import refit_physics as rp  # noqa: E402

from slurm_plugin.physics.gpu_models import normalise  # noqa: E402

# ---- the catalogue: one row per model and form factor ----------------------------------------
# key (normalised NVML name), NVML name(s), chip, form factor, memory type,
# GPU-DATASHEETS.md row (model, form factor) or None (V100: V100_DATASHEET), aliases
ENTRIES = [
    ("V100-SXM2-32GB", ["Tesla V100-SXM2-32GB", "Tesla V100-SXM2-32GB-LS"], "GV100", "SXM2",
     "HBM2", None, ["V100", "V100-SXM2", "V100-32GB"]),
    ("V100-SXM2-16GB", ["Tesla V100-SXM2-16GB"], "GV100", "SXM2", "HBM2", None,
     ["V100-16GB"]),
    ("V100-PCIE-32GB", ["Tesla V100-PCIE-32GB"], "GV100", "PCIe", "HBM2", None, ["V100-PCIE"]),
    ("V100-PCIE-16GB", ["Tesla V100-PCIE-16GB"], "GV100", "PCIe", "HBM2", None, []),
    ("A100-SXM4-40GB", ["NVIDIA A100-SXM4-40GB"], "GA100", "SXM4", "HBM2",
     ("A100 40GB", "SXM4"), ["A100-40", "A100-40GB"]),
    ("A100-SXM4-80GB", ["NVIDIA A100-SXM4-80GB"], "GA100", "SXM4", "HBM2e",
     ("A100 80GB", "SXM4"), ["A100", "A100-80", "A100-80GB", "A100-SXM4", "A100-SXM",
                             "A100-SXM-80GB"]),
    ("A100-PCIE-40GB", ["NVIDIA A100-PCIE-40GB"], "GA100", "PCIe", "HBM2",
     ("A100 40GB", "PCIe"), ["A100-PCIE-40"]),
    ("A100-80GB-PCIE", ["NVIDIA A100 80GB PCIe"], "GA100", "PCIe", "HBM2e",
     ("A100 80GB", "PCIe"), ["A100-PCIE-80GB", "A100-PCIE-80"]),
    ("A40", ["NVIDIA A40"], "GA102", "PCIe", "GDDR6", ("A40", "PCIe dual-slot"), []),
    ("L40S", ["NVIDIA L40S"], "AD102", "PCIe", "GDDR6", ("L40S", "PCIe dual-slot"), []),
    ("H100-80GB-HBM3", ["NVIDIA H100 80GB HBM3"], "GH100", "SXM5", "HBM3", ("H100", "SXM5"),
     ["H100", "H100-SXM", "H100-SXM5", "H100-SXM5-80GB"]),
    ("H100-PCIE", ["NVIDIA H100 PCIe"], "GH100", "PCIe", "HBM2e", ("H100", "PCIe"),
     ["H100-PCIE-80GB"]),
    ("H100-NVL", ["NVIDIA H100 NVL"], "GH100", "PCIe (NVL)", "HBM3",
     ("H100 NVL", "PCIe dual-slot, NVLink bridge"), ["H100-NVL-94GB"]),
    ("H200", ["NVIDIA H200"], "GH100", "SXM5", "HBM3e", ("H200", "SXM5"),
     ["H200-SXM", "H200-SXM5", "H200-141GB"]),
    ("H200-NVL", ["NVIDIA H200 NVL"], "GH100", "PCIe (NVL)", "HBM3e", ("H200 NVL", "PCIe"), []),
]
# The V100 is not in GPU-DATASHEETS.md: NVIDIA Tesla V100 datasheet (300 W SXM2, 250 W PCIe,
# 16 or 32 GB HBM2). The PCIe 250 W is also the limit nvidia-smi shows in the idle snapshot.
V100_DATASHEET = {"SXM2": 300, "PCIe": 250}
V100_SOURCE = "NVIDIA Tesla V100 datasheet (SXM2 300 W, PCIe 250 W; 16 or 32 GB HBM2)"

# ---- which measurements belong to which entry ------------------------------------------------
V100_MEASURED = "V100-SXM2-32GB"       # physics.json's V100 (Haghshenas SXM2 logs, Zeus V100)
ZEUS_CAP = {"A40": "A40"}              # entry -> Zeus summary_power_<gpu>.csv (V100: physics.json)
PERSEUS_CAP = {"A100": ["A100-SXM4-40GB", "A100-SXM4-80GB"]}   # perseus/csv/<GPU>/ -> entries
PERSEUS_STAGE = {"A100-SXM4-80GB": "a100_sxm", "A40": "a40"}   # perseus-stage-profile check
ACME_ENTRY = "A100-SXM4-80GB"          # AcmeTrace: A100 80GB SXM (per the NSDI'24 paper)
MLENERGY_CHECK = {"A100-SXM4-40GB": ("v2", "NVIDIA A100-SXM4-40GB"),
                  "H100-80GB-HBM3": ("v2", "NVIDIA H100 80GB HBM3")}
GDDR6_ECC_SHARE = 15 / 16   # GDDR6 boards store ECC check bits in the memory itself (1/16)

CONSTANTS = ("tdp_w", "memory_mib", "idle_power_w", "max_power_w", "min_power_cap_w",
             "dynamic_power_w", "util_gamma", "cap_beta", "interference_k",
             "interference_util_threshold", "interference_k_mps", "colocation_pairs")


# ---- reading --------------------------------------------------------------------------------
def _numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"\d+(?:\.\d+)?", text)]


def read_datasheets(path: Path) -> dict[tuple[str, str], dict]:
    """GPU-DATASHEETS.md table rows: (model, form factor) -> tdp_w (the largest figure before any
    parenthesis: "350-400 (configurable)" is 400), memory_gb, nvml_mib (an nvidia-smi total
    quoted in the cell, if any)."""
    out = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 7 or not (cells[2][:1].isdigit() or cells[2].startswith("up to")):
            continue            # header, separator, notes
        tdp = _numbers(cells[2].split("(")[0])
        mem = _numbers(cells[4].split("(")[0])
        smi = re.search(r"nvidia-smi (\d+) MiB", cells[4])
        if tdp and mem:
            out[(cells[0], cells[1])] = {"tdp_w": max(tdp), "memory_gb": mem[0],
                                         "nvml_mib": int(smi.group(1)) if smi else None,
                                         "row": line.strip()}
    return out


def read_idle_snapshots(path: Path, index: dict[str, str]) -> dict[str, list[dict]]:
    """idle_power_snapshots.csv rows by catalogue entry (the gpu_model before any " (",
    normalised, through the catalogue's names and aliases); rows that name no entry are left
    out with a note."""
    out: dict[str, list[dict]] = {}
    with path.open() as fh:
        for line, r in enumerate(csv.DictReader(fh), start=2):
            key = index.get(normalise(r["gpu_model"].split(" (")[0]))
            if key is None:
                print(f"  idle snapshot line {line}: {r['gpu_model']!r} names no entry; left out")
                continue
            out.setdefault(key, []).append({**r, "line": line})
    return out


def zeus_groups(path: Path) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = {}
    with path.open() as fh:
        for r in csv.DictReader(fh):
            groups.setdefault((r["dataset"], r["network"], r["batch_size"], r["optimizer"]),
                              []).append({"cap": float(r["power_limit"]),
                                          "t": float(r["time_per_epoch"]),
                                          "p": float(r["average_power"])})
    return groups


def perseus_groups(path: Path) -> dict[tuple, list[dict]]:
    """zeus_global.csv: every stage at one limit; power = energy / time / GPUs."""
    groups: dict[tuple, list[dict]] = {}
    with path.open() as fh:
        for r in csv.DictReader(fh):
            n = int(r["dp"]) * int(r["tp"]) * int(r["pp"])
            t = float(r["time"])
            groups.setdefault((r["model_name"],), []).append(
                {"cap": float(r["power_limit_0"]), "t": t, "p": float(r["energy"]) / t / n})
    return groups


def stage_groups(folder: Path, tag: str) -> dict[tuple, list[dict]]:
    """Perseus stage profiles at each SM clock: power = energy / time; the clock's power plays
    the cap (a cap holds the GPU at the clock whose power it allows)."""
    groups: dict[tuple, list[dict]] = {}
    for f in sorted(folder.glob(f"*+{tag}_bf16.csv")):
        with f.open() as fh:
            for r in csv.DictReader(fh):
                t = float(r["time"])
                groups.setdefault((f.name, r["stage"], r["instruction"]), []).append(
                    {"cap": float(r["energy"]) / t, "t": t, "p": float(r["energy"]) / t,
                     "f": float(r["frequency"])})
    for rows in groups.values():        # the top clock is the uncapped run
        top = max(rows, key=lambda r: r["f"])
        for r in rows:
            r["cap"] = r["p"] if r is not top else top["p"] + 1e-9
    return groups


def acme_means(folder: Path, gamma: float) -> dict[str, tuple[float, float, int]]:
    """Per AcmeTrace cluster: (mean power W, mean of (util/100) ** gamma, rows) over the
    1,000-point quantile CDFs (a mean over evenly spaced quantiles is the distribution's mean)."""
    with (folder / "gpu_power_cdf.csv").open() as fh:
        power = list(csv.DictReader(fh))
    with (folder / "gpu_util_cdf.csv").open() as fh:
        util = list(csv.DictReader(fh))
    out = {}
    for c in ("kalos", "seren"):
        p = statistics.fmean(float(r[f"{c}_gpu_power_w"]) for r in power)
        x = statistics.fmean((float(r[f"{c}_gpu_util_pct"]) / 100) ** gamma for r in util)
        out[c] = (p, x, len(power))
    return out


# ---- fitting (the grids of refit_physics.py) --------------------------------------------------
GAMMAS = [g10 / 100 for g10 in range(30, 251, 5)]
BETAS = [b / 100 for b in range(5, 201)]


def cap_points(groups: dict[tuple, list[dict]], idle: float) -> dict[tuple, list[tuple]]:
    """Per group: (x = (P0 - idle) / (cap - idle), time ratio) of its rows capped below P0."""
    out = {}
    for key, rows in groups.items():
        top = max(rows, key=lambda r: r["cap"])
        out[key] = [((top["p"] - idle) / (r["cap"] - idle), r["t"] / top["t"])
                    for r in rows if r["cap"] < top["p"]]
    return out


def fit_beta(pts: list[tuple]) -> tuple[float, float]:
    """(beta, RMSE of the time ratio) by the grid of refit_physics.fit_cap."""
    err, beta = min((rp.rmse([(x ** b, y) for x, y in pts]), b) for b in BETAS)
    return beta, err


def beta_rmse(pts: list[tuple], beta: float) -> float:
    return rp.rmse([(x ** beta, y) for x, y in pts])


def held_out_beta(pts_by: dict[str, list[tuple]]) -> float:
    """RMSE of the time ratio over every fold's rows predicted by a beta fitted on the others."""
    sq, n = 0.0, 0
    for fold, pts in pts_by.items():
        train = [p for f, ps in pts_by.items() if f != fold for p in ps]
        if not pts or not train:
            continue
        beta, _ = fit_beta(train)
        sq += sum((x ** beta - y) ** 2 for x, y in pts)
        n += len(pts)
    return math.sqrt(sq / n) if n else float("nan")


def by_workload(pts: dict[tuple, list[tuple]]) -> dict[str, list[tuple]]:
    """Cap points pooled per workload (Zeus: dataset/network; Perseus: the model)."""
    out: dict[str, list[tuple]] = {}
    for key, p in pts.items():
        out.setdefault("/".join(key[:2]) if len(key) > 2 else key[0], []).extend(p)
    return out


class CurveSums:
    """Per job log and gamma, the sums that give any fold's least-squares span and error:
    n, sum x, sum x^2, sum x p, sum p, sum p^2 with x = (u/100) ** gamma."""

    def __init__(self, samples: dict[str, list[tuple[float, float]]]) -> None:
        self.samples = samples
        self.s = {}
        for name, rows in samples.items():
            ps = [p for _, p in rows]
            sp, spp = sum(ps), sum(p * p for p in ps)
            for g in GAMMAS:
                xs = [(u / 100) ** g for u, _ in rows]
                self.s[name, g] = (len(rows), sum(xs), sum(x * x for x in xs),
                                   sum(x * p for x, p in zip(xs, ps)), sp, spp)

    def fit(self, names: list[str], idle: float) -> tuple[float, float]:
        """(gamma, span) minimising the squared error over ``names``' samples."""
        best = None
        for g in GAMMAS:
            n, sx, sxx, sxp, sp, spp = (sum(v) for v in zip(*(self.s[c, g] for c in names)))
            span = (sxp - idle * sx) / sxx
            sse = self._sse(span, idle, (n, sx, sxx, sxp, sp, spp))
            if best is None or sse < best[0]:
                best = (sse, g, span)
        return best[1], best[2]

    @staticmethod
    def _sse(span: float, idle: float, s: tuple) -> float:
        n, sx, sxx, sxp, sp, spp = s
        return (span * span * sxx - 2 * span * (sxp - idle * sx)
                + spp - 2 * idle * sp + n * idle ** 2)

    def sse(self, name: str, gamma: float, span: float, idle: float) -> tuple[float, int]:
        s = self.s[name, gamma]
        return max(0.0, self._sse(span, idle, s)), s[0]


# ---- the measured fits ------------------------------------------------------------------------
def v100_fits(d: Path) -> dict:
    """physics.json's V100 constants (refit_physics's own functions, their output kept quiet)
    and the errors on rows left out of each fit."""
    logs = d / "power" / "haghshenas-colocated" / "Data_logs"
    with contextlib.redirect_stdout(io.StringIO()):
        curve, classes = rp.fit_power(logs)
        cap = rp.fit_cap(d / "power" / "zeus", curve["idle_power_w"])
        pairs, _ = rp.read_pairs(d / "colocation")
        log_slow = rp.pair_log_slowdown(logs, classes)
        inter = rp.fit_interference(pairs, classes, log_slow)
    idle_rows, samples = {}, {}
    for name, rel in rp.CLASS_LOGS.items():
        rows = rp.read_smi(logs / rel)
        idle_rows[name] = [r["power_w"] for r in rows
                           if r["util_pct"] == 0 and r["mem_used_mib"] == 0]
        samples[name] = [(r["util_pct"], r["power_w"]) for r in rp.active_samples(rows)]
    # idle: each log's idle rows against the median of the other logs'
    idle_err = [abs(statistics.median(v) - statistics.median(
        [p for o, ps in idle_rows.items() if o != n for p in ps]))
        for n, v in idle_rows.items() if v]
    # curve: leave one job log (workload) out; its samples and its mean power predicted
    sums = CurveSums(samples)
    g_all, span_all = sums.fit(list(samples), curve["idle_power_w"])
    if (g_all, round(span_all, 2)) != (curve["util_gamma"], curve["dynamic_power_w"]):
        raise SystemExit("fit_gpu_models: the curve sums disagree with refit_physics.fit_power")
    sq, n_all, cls_err = 0.0, 0, []
    for name in samples:
        others = [o for o in samples if o != name]
        idle = statistics.median([p for o in others for p in idle_rows[o]])
        g, span = sums.fit(others, idle)
        e, n = sums.sse(name, g, span, idle)
        sq, n_all = sq + e, n_all + n
        u = classes[name]["util_pct"]
        cls_err.append(abs(idle + span * (u / 100) ** g - classes[name]["power_w"])
                       / classes[name]["power_w"])
    # cap: leave one Zeus network (dataset/network) out
    zeus = zeus_groups(d / "power" / "zeus" / "summary_power_v100.csv")
    pts = by_workload(cap_points(zeus, curve["idle_power_w"]))
    beta, err = fit_beta([p for ps in pts.values() for p in ps])
    if (beta, round(err, 4)) != (cap["cap_beta"], cap["cap_fit_rmse"]):
        raise SystemExit("fit_gpu_models: the cap fit disagrees with refit_physics.fit_cap")
    # interference: leave one measured pair (both orders) out
    obs = interference_obs(pairs, classes, log_slow)
    return {"curve": curve, "cap": cap, "inter": inter, "pairs": pairs, "classes": classes,
            "idle_rows": sum(map(len, idle_rows.values())), "idle_logs": len(idle_err),
            "idle_held_out_w": statistics.fmean(idle_err),
            "curve_held_out_rmse_w": math.sqrt(sq / n_all), "curve_rows": n_all,
            "curve_logs": len(samples), "class_held_out_mape": 100 * statistics.fmean(cls_err),
            "cap_rows": sum(map(len, zeus.values())), "cap_configs": len(zeus),
            "cap_points": sum(map(len, pts.values())), "cap_folds": len(pts),
            "cap_held_out_rmse": held_out_beta(pts), "cap_by_workload": pts,
            "inter_obs": len(obs), "inter_held_out_rmse": held_out_interference(obs)}


def interference_obs(pairs: dict, classes: dict, log_slow: float) -> list[tuple]:
    """(pair, u_a, u_b, slowdown of a) as refit_physics.fit_interference builds them."""
    ua, ub = classes["aps"]["util_pct"], classes["lstm"]["util_pct"]
    obs = [("aps|lstm", ua, ub, log_slow), ("aps|lstm", ub, ua, log_slow)]
    for key, (sa, sb) in pairs.items():
        a, b = key.split("|")
        pair = "|".join(sorted((a, b)))
        obs.append((pair, classes[a]["util_pct"], classes[b]["util_pct"], 1 / sa))
        obs.append((pair, classes[b]["util_pct"], classes[a]["util_pct"], 1 / sb))
    return obs


def _slow(ua: float, ub: float, k: float, t: float) -> float:
    return 1 + k * (ub / 100) * max(0.0, (ua + ub) / 100 - t)


def fit_interference(obs: list[tuple]) -> tuple[float, float]:
    best = min((rp.rmse([(_slow(a, b, k / 20, t / 100), s) for _, a, b, s in obs]), k / 20,
                t / 100) for k in range(0, 201) for t in range(0, 151, 5))
    return best[1], best[2]


def held_out_interference(obs: list[tuple]) -> float:
    sq = []
    for pair in sorted({o[0] for o in obs}):
        k, t = fit_interference([o for o in obs if o[0] != pair])
        sq += [(_slow(a, b, k, t) - s) ** 2 for p, a, b, s in obs if p == pair]
    return math.sqrt(statistics.fmean(sq))


def pair_carry_over(colo: Path) -> dict:
    """How V100 pairs carry over: Gavel measured the same ordered pairs (one GPU each) on K80,
    P100 and V100; the V100 normalised speed taken as the other GPU's."""
    gavel = json.loads((colo / "gavel" / "physical_cluster_throughputs.json").read_text())

    def speeds(gpu: str) -> dict:
        t = gavel[gpu]
        out = {}
        for ka, row in t.items():
            if not ka.endswith(", 1)") or not row.get("null"):
                continue
            for kb, val in row.items():
                if isinstance(val, list) and kb.endswith(", 1)") and t.get(kb, {}).get("null"):
                    out[ka, kb] = val[0] / row["null"]
        return out
    v = speeds("v100")
    out = {}
    for gpu in ("p100", "k80"):
        o = speeds(gpu)
        common = [k for k in v if k in o and v[k] > 0 and o[k] > 0]
        diff = [v[k] - o[k] for k in common]
        out[gpu.upper()] = {"pairs": len(common),
                            "rmse": round(math.sqrt(statistics.fmean(x * x for x in diff)), 3),
                            "bias": round(statistics.fmean(diff), 3)}
    return out


# ---- building the entries ---------------------------------------------------------------------
def const(value, source: str, how: str, **extra) -> dict:
    return {"value": value, "source": source, "how": how, **extra}


def held(method: str, metric: str, value: float, digits: int = 3) -> dict:
    return {"method": method, "metric": metric, "value": round(value, digits)}


def median_share(values: dict[str, float]) -> float:
    return round(statistics.median(values.values()), 4)


def build(d: Path) -> dict:
    power = d / "power"
    sheets = read_datasheets(power / "GPU-DATASHEETS.md")
    index = {}
    for key, nvml, _c, _f, _m, _s, aliases in ENTRIES:
        for n in [key, *nvml, *aliases]:
            index[normalise(n)] = key
    snaps = read_idle_snapshots(power / "idle-snapshots" / "idle_power_snapshots.csv", index)
    v = v100_fits(d)
    curve, cap = v["curve"], v["cap"]
    gamma = curve["util_gamma"]
    logs = "power/haghshenas-colocated/Data_logs/outputs/*/*/logs/gpu_nvidia-smi.csv"
    models: dict[str, dict] = {}
    chip_of = {e[0]: e[2] for e in ENTRIES}

    # -- datasheet figures and memory
    for key, nvml, chip, form, memtype, row, aliases in ENTRIES:
        e = {"nvml_names": nvml, "chip": chip, "form_factor": form, "memory_type": memtype,
             "aliases": aliases}
        if row is None:
            tdp = V100_DATASHEET["SXM2" if form == "SXM2" else "PCIe"]
            e["tdp_w"] = const(float(tdp), "datasheet", V100_SOURCE)
            e["_memory_gb"] = float(re.search(r"(\d+)GB", key).group(1))
            e["_nvml_mib"] = None
        else:
            s = sheets.get(row)
            if s is None:
                raise SystemExit(f"fit_gpu_models: GPU-DATASHEETS.md has no row {row}")
            e["tdp_w"] = const(s["tdp_w"], "datasheet",
                               f"power/GPU-DATASHEETS.md, row {row[0]} / {row[1]}: TDP "
                               f"{s['tdp_w']:g} W (the top of a configurable range)")
            e["_memory_gb"], e["_nvml_mib"] = s["memory_gb"], s["nvml_mib"]
        models[key] = e

    # memory: NVML totals seen (Haghshenas logs for the V100 32GB; nvidia-smi captures quoted
    # in GPU-DATASHEETS.md); else the marketed GB x 1024 x the smallest NVML/marketed ratio
    # seen, and x 15/16 on GDDR6 (ECC on)
    seen = {V100_MEASURED: (32510, "memory.total of the Haghshenas nvidia-smi logs "
                                   f"({logs}), as physics.json")}
    for key, rows in snaps.items():         # a snapshot's note may give the card's total
        for r in rows:
            card = re.search(r"(\d{4,}) MiB card", r["note"])
            if card and key not in seen:
                seen[key] = (int(card.group(1)), "nvidia-smi capture noted in power/"
                             f"idle-snapshots/idle_power_snapshots.csv line {r['line']} "
                             f"({card.group(0)})")
    for key, e in models.items():
        if e["_nvml_mib"]:
            seen[key] = (e["_nvml_mib"], "nvidia-smi total quoted in power/GPU-DATASHEETS.md "
                                         "(memory column)")
    ratios = {k: mib / (models[k]["_memory_gb"] * 1024) for k, (mib, _) in seen.items()}
    mem_ratio = round(min(ratios.values()), 4)
    for key, e in models.items():
        if key in seen:
            e["memory_mib"] = const(seen[key][0], "measured", seen[key][1], rows=1)
        else:
            ecc = GDDR6_ECC_SHARE if e["memory_type"] == "GDDR6" else 1.0
            mib = int(e["_memory_gb"] * 1024 * mem_ratio * ecc)
            e["memory_mib"] = const(mib, "datasheet", (
                f"{e['_memory_gb']:g} GB marketed x 1024 x {mem_ratio} (memory_ratio: the "
                f"smallest NVML total / marketed GiB seen, over {', '.join(sorted(seen))})"
                + (" x 15/16 (GDDR6 with ECC on keeps its check bits in the memory; more "
                   "with ECC off)" if ecc < 1 else "")))

    # -- idle power
    idle_how = {}
    idle_how[V100_MEASURED] = const(
        curve["idle_power_w"], "measured",
        f"{logs}: median power.draw of the {v['idle_rows']:,} rows with utilization.gpu 0 % "
        "and memory.used 0 MiB (GPUs holding no job), as physics.json",
        rows=v["idle_rows"],
        held_out=held(f"leave-one-log-out ({v['idle_logs']} logs)",
                      "mean |median of the log - median of the others|, W",
                      v["idle_held_out_w"], 2))
    for key, rows in snaps.items():
        vals = [float(r["idle_power_w"]) for r in rows]
        idle_how[key] = const(
            round(statistics.median(vals), 2), "measured",
            "power/idle-snapshots/idle_power_snapshots.csv line"
            + ("s " if len(rows) > 1 else " ") + ", ".join(str(r["line"]) for r in rows) + ": "
            + "; ".join(f"{r['idle_power_w']} W ({r['statistic']}, {r['source_repo']})"
                        for r in rows)
            + ("; median" if len(rows) > 1 else "")
            + ". Anecdotal: no held-out error (single readings or a distribution's tail)",
            rows=len(rows))
    idle_share = {k: c["value"] / models[k]["tdp_w"]["value"] for k, c in idle_how.items()}
    idle_all = median_share(idle_share)

    def sibling(key: str, c: str) -> str | None:
        """An entry of the same chip, form factor and TDP (other memory) whose ``c`` is
        measured: the same board, so its value carries over."""
        e = models[key]
        return next((k for k, o in models.items() if k != key and o["chip"] == e["chip"]
                     and o["form_factor"] == e["form_factor"]
                     and o["tdp_w"]["value"] == e["tdp_w"]["value"]
                     and o.get(c, {}).get("source") == "measured"), None)

    def carry(key: str, c: str) -> bool:
        src = sibling(key, c)
        if src is not None:
            models[key][c] = const(models[src][c]["value"], "carried-over",
                                   f"as {src} (the same board and TDP with other memory)")
        return src is not None

    for key, e in models.items():
        if key in idle_how:
            e["idle_power_w"] = idle_how[key]
    for key, e in models.items():
        if "idle_power_w" in e or carry(key, "idle_power_w"):
            continue
        sib = {k: s for k, s in idle_share.items() if chip_of[k] == e["chip"]}
        share = median_share(sib) if sib else idle_all
        e["idle_power_w"] = const(round(share * e["tdp_w"]["value"], 1), "datasheet", (
            f"{share} x TDP {e['tdp_w']['value']:g} W; {share} = median idle/TDP over the "
            + (f"measured {e['chip']} entries ({_shares(sib)})" if sib
               else f"measured entries ({_shares(idle_share)})")))

    # -- power limits
    zeus_v100 = "power/zeus/summary_power_v100.csv"
    for key, e in models.items():
        if key == V100_MEASURED:
            e["max_power_w"] = const(cap["max_power_w"], "measured", (
                f"the highest power_limit of {zeus_v100} (the Zeus sweep's range), as "
                "physics.json; an SXM2 board's default limit is its 300 W TDP (the Haghshenas "
                "logs reach 320 W in single samples): kept at 250 W because every figure of the "
                "simulator is computed with it"), rows=v["cap_rows"])
            e["min_power_cap_w"] = const(cap["min_power_cap_w"], "measured", (
                f"the lowest power_limit of {zeus_v100}, as physics.json (the lowest the sweep "
                "set; NVML's floor may be lower)"), rows=v["cap_rows"])
        elif carry(key, "max_power_w"):
            carry(key, "min_power_cap_w")
        else:
            e["max_power_w"] = const(e["tdp_w"]["value"], "datasheet",
                                     "the TDP (NVIDIA's maximum board power; the default and "
                                     "top settable limit)")
    zeus_a40 = zeus_groups(power / "zeus" / "summary_power_a40.csv")
    a40_caps = sorted({r["cap"] for rows in zeus_a40.values() for r in rows})
    models["A40"]["min_power_cap_w"] = const(
        a40_caps[0], "measured", ("the lowest power_limit of power/zeus/summary_power_a40.csv "
                                  "(the lowest the sweep set; NVML's floor may be lower)"),
        rows=sum(map(len, zeus_a40.values())))
    min_share = {k: models[k]["min_power_cap_w"]["value"] / models[k]["tdp_w"]["value"]
                 for k in (V100_MEASURED, "A40")}
    floor_share = round(max(min_share.values()), 4)
    for key, e in models.items():
        if "min_power_cap_w" not in e:
            e["min_power_cap_w"] = const(
                float(math.ceil(floor_share * e["tdp_w"]["value"])), "datasheet",
                f"{floor_share} x TDP {e['tdp_w']['value']:g} W, rounded up; {floor_share} = "
                f"the largest min limit / TDP measured ({_shares(min_share)}): a floor set too "
                "low is a cap the board refuses. Query the real one: nvidia-smi "
                "--query-gpu=power.min_limit --format=csv")

    # -- dynamic power (the curve's span) and its exponent
    models[V100_MEASURED]["dynamic_power_w"] = const(
        curve["dynamic_power_w"], "measured",
        f"{logs}: least squares of P(u) over the {curve['fit_samples']:,} rows where a job is "
        f"resident (per GPU, first to last non-zero utilization.gpu with memory.used > "
        f"{rp.RESIDENT_MIB} MiB), as physics.json; in-sample RMSE {curve['fit_rmse_w']} W",
        rows=curve["fit_samples"],
        held_out=held(f"leave-one-workload-out ({v['curve_logs']} job logs): RMSE per 5-s "
                      f"sample; class mean power MAPE {v['class_held_out_mape']:.1f} %",
                      "rmse_w", v["curve_held_out_rmse_w"], 2))
    models[V100_MEASURED]["util_gamma"] = const(
        gamma, "measured", "grid search (0.30..2.50 by 0.05) with dynamic_power_w, same rows",
        rows=curve["fit_samples"],
        held_out=dict(models[V100_MEASURED]["dynamic_power_w"]["held_out"]))
    acme = acme_means(power / "acmetrace-a100-cluster", gamma)
    a_idle = models[ACME_ENTRY]["idle_power_w"]["value"]

    def dyn_fit(cl: list[str]) -> float:
        return (sum(acme[c][1] * (acme[c][0] - a_idle) for c in cl)
                / sum(acme[c][1] ** 2 for c in cl))
    dyn_a = dyn_fit(list(acme))
    loco = [abs(a_idle + dyn_fit([o for o in acme if o != c]) * acme[c][1] - acme[c][0])
            / acme[c][0] for c in acme]
    models[ACME_ENTRY]["dynamic_power_w"] = const(
        round(dyn_a, 2), "measured",
        "power/acmetrace-a100-cluster/gpu_{power,util}_cdf.csv (Kalos and Seren clusters, 1,000 "
        "quantiles each): the span that makes the curve's mean over the measured utilisation "
        "distribution equal the measured mean power (the CDFs are marginal, not joint rows: "
        "a moment match, idle and util_gamma held); "
        + ", ".join(f"{c}: mean {acme[c][0]:.1f} W" for c in acme)
        + ". The clusters' power exceeds 400 W in ~10 % of samples: their A100s may be 500 W "
          "parts, or DCGM samples peaks",
        rows=sum(a[2] for a in acme.values()),
        held_out=held("leave-one-cluster-out (2 clusters)", "mean power MAPE %",
                      100 * statistics.fmean(loco), 1))
    dyn_share = {k: models[k]["dynamic_power_w"]["value"]
                 / (models[k]["tdp_w"]["value"] - models[k]["idle_power_w"]["value"])
                 for k in (V100_MEASURED, ACME_ENTRY)}
    dyn_all = median_share(dyn_share)
    for key, e in models.items():
        if "util_gamma" not in e:
            e["util_gamma"] = const(gamma, "carried-over", (
                f"from {V100_MEASURED}: the only joint utilisation and power rows in the data "
                "(AcmeTrace's are marginal; ML.ENERGY, Zeus, Perseus have no utilisation)"))
        if "dynamic_power_w" in e:
            continue
        if carry(key, "dynamic_power_w"):
            continue
        sib = {k: s for k, s in dyn_share.items() if chip_of[k] == e["chip"]}
        share = median_share(sib) if sib else dyn_all
        span = share * (e["tdp_w"]["value"] - e["idle_power_w"]["value"])
        e["dynamic_power_w"] = const(round(span, 1), "datasheet", (
            f"{share} x (TDP {e['tdp_w']['value']:g} W - idle "
            f"{e['idle_power_w']['value']:g} W); {share} = median dynamic/(TDP - idle) over the "
            + (f"measured {e['chip']} entries ({_shares(sib)})" if sib
               else f"measured entries ({_shares(dyn_share)})")))

    # -- the cap's time exponent
    betas, cap_errors = {}, {}
    models[V100_MEASURED]["cap_beta"] = const(
        cap["cap_beta"], "measured",
        f"{zeus_v100}, all {v['cap_rows']} rows ({v['cap_configs']} dataset/network/batch/"
        f"optimizer configs; P0, T0 at the highest limit), fitted over the {v['cap_points']} "
        f"rows capped below P0, as physics.json; in-sample RMSE {cap['cap_fit_rmse']} (time "
        "ratio). The Zeus V100's form factor is not stated (its sweep tops at 250 W)",
        rows=v["cap_points"],
        held_out=held(f"leave-one-network-out ({v['cap_folds']} Zeus networks)",
                      "rmse of T/T0", v["cap_held_out_rmse"], 4))
    betas["GV100"] = cap["cap_beta"]
    cap_errors["GV100"] = v["cap_by_workload"]
    a40_idle = models["A40"]["idle_power_w"]["value"]
    pts = by_workload(cap_points(zeus_a40, a40_idle))
    b, err = fit_beta([p for ps in pts.values() for p in ps])
    models["A40"]["cap_beta"] = const(
        b, "measured",
        f"power/zeus/summary_power_a40.csv, all {sum(map(len, zeus_a40.values()))} rows "
        f"({len(zeus_a40)} configs), fitted as the V100's over the "
        f"{sum(map(len, pts.values()))} rows capped below P0 with the A40's idle "
        f"({a40_idle:g} W, datasheet-derived); in-sample RMSE {err:.4f}",
        rows=sum(map(len, pts.values())),
        held_out=held(f"leave-one-network-out ({len(pts)} Zeus networks)", "rmse of T/T0",
                      held_out_beta(pts), 4))
    betas["GA102"], cap_errors["GA102"] = b, pts
    for gpu, keys in PERSEUS_CAP.items():
        f = power / "perseus" / "csv" / gpu / "zeus_global.csv"
        groups = perseus_groups(f)
        idle = models[keys[-1]]["idle_power_w"]["value"]
        pts = by_workload(cap_points(groups, idle))
        b, err = fit_beta([p for ps in pts.values() for p in ps])
        caps = sorted({r["cap"] for rows in groups.values() for r in rows})
        for key in keys:
            models[key]["cap_beta"] = const(
                b, "measured",
                f"power/perseus/csv/{gpu}/zeus_global.csv, all {sum(map(len, groups.values()))} "
                f"rows ({len(groups)} pipeline-parallel trainings, every stage at one limit "
                f"{caps[0]:g}-{caps[-1]:g} W; power = energy / time / GPUs), fitted as the "
                f"V100's over the {sum(map(len, pts.values()))} rows capped below P0 with idle "
                f"{idle:g} W; in-sample RMSE {err:.4f}. Perseus calls the GPU A100-SXM and "
                "does not state its memory",
                rows=sum(map(len, pts.values())),
                held_out=held(f"leave-one-workload-out ({len(pts)} trainings)", "rmse of T/T0",
                              held_out_beta(pts), 4))
        betas["GA100"], cap_errors["GA100"] = b, pts
    beta_all = round(statistics.median(betas.values()), 2)
    chip_cross = {}
    for chip, pts in cap_errors.items():
        others = [b for c, b in betas.items() if c != chip]
        chip_cross[chip] = beta_rmse([p for ps in pts.values() for p in ps],
                                     statistics.median(others))
    for key, e in models.items():
        if "cap_beta" in e:
            continue
        if e["chip"] in betas:
            src = [k for k in models if chip_of[k] == e["chip"]
                   and models[k].get("cap_beta", {}).get("source") == "measured"]
            e["cap_beta"] = const(models[src[0]]["cap_beta"]["value"], "carried-over",
                                  f"as {' and '.join(src)} (the same {e['chip']} chip)")
        else:
            chips = ", ".join(f"{c} {b:g}" for c, b in betas.items())
            e["cap_beta"] = const(beta_all, "carried-over", (
                f"median over the measured chips ({chips}); "
                "a chip's rows predicted with the median of the other chips' betas: "
                + ", ".join(f"{c} RMSE {x:.3f}" for c, x in chip_cross.items())),
                held_out=held("leave-one-chip-out", "rmse of T/T0",
                              statistics.fmean(chip_cross.values()), 4))

    # -- co-location
    inter, pairs = v["inter"], v["pairs"]
    carry = pair_carry_over(d / "colocation")
    carry_how = ("; ".join(f"Gavel measured {c['pairs']} of the same ordered pairs on {g}: the "
                           f"V100 normalised speeds predict them with RMSE {c['rmse']} "
                           f"(mean V100 - {g} {c['bias']:+})" for g, c in carry.items()))
    pair_src = ("colocation/gavel/physical_cluster_throughputs.json (v100) and "
                "colocation/norm_speed.csv (vgg19 pairs), proxies as in physics.json")
    for key, e in models.items():
        if key == V100_MEASURED:
            e["interference_k"] = const(
                inter["k"], "measured",
                f"grid search over {inter['fit_points']} measured (job, partner) slowdowns "
                f"({pair_src}, plus the APS+LSTM log), as physics.json; in-sample RMSE "
                f"{inter['fit_rmse']}", rows=inter["fit_points"],
                held_out=held("leave-one-pair-out", "rmse of slowdown",
                              v["inter_held_out_rmse"], 3))
            e["interference_util_threshold"] = const(
                inter["util_threshold"], "measured", "fitted with interference_k",
                rows=inter["fit_points"], held_out=dict(e["interference_k"]["held_out"]))
            e["colocation_pairs"] = const(
                pairs, "measured", f"normalised speeds of job pairs sharing one V100: {pair_src}",
                rows=len(pairs))
        else:
            e["colocation_pairs"] = const(pairs, "carried-over", (
                f"as {V100_MEASURED}: no pair was measured on this model; the V100's normalised "
                f"speeds are used unchanged. {carry_how}"))
            for c in ("interference_k", "interference_util_threshold"):
                e[c] = const(models[V100_MEASURED][c]["value"], "carried-over", (
                    f"as {V100_MEASURED}: no pair was measured on this model (how the V100's "
                    "pairs carry over: colocation_pairs)"))
        # MPS: no pair sharing a GPU through MPS is in the data, on any model
        e["interference_k_mps"] = const(e["interference_k"]["value"], "carried-over", (
            "as this model's interference_k (time-sliced pairs): no pair sharing a GPU "
            "through MPS was measured on any model (wattctl calibrate-gpus measures one)"))

    for e in models.values():
        e.pop("_memory_gb"), e.pop("_nvml_mib")
        for c in CONSTANTS:
            if c not in e:
                raise SystemExit(f"fit_gpu_models: no {c} for an entry")
    aliases = {normalise(a): key for key, *_r, al in ENTRIES for a in al}
    checks = build_checks(d, models, acme, v)
    return {
        "source": "scripts/fit_gpu_models.py over ../shared/data (see docs/gpu-models.md)",
        "forms": {
            "power_at_util_w": "idle_power_w + dynamic_power_w * (util/100) ** util_gamma",
            "cap_slowdown": "((P0 - idle_power_w) / (cap - idle_power_w)) ** cap_beta below P0",
            "colocated_slowdown": "colocation_pairs where measured, else 1 + interference_k "
                                  "* (u_b/100) * max(0, (u_a + u_b)/100 "
                                  "- interference_util_threshold)"},
        "shares": {
            "memory_ratio": {"value": mem_ratio, "from": _rounded(ratios)},
            "idle_share_of_tdp": {"value": idle_all, "from": _rounded(idle_share)},
            "dynamic_share": {"value": dyn_all, "from": _rounded(dyn_share)},
            "min_cap_share_of_tdp": {"value": floor_share, "from": _rounded(min_share)},
            "cap_beta": {"value": beta_all, "from": betas,
                         "leave_one_chip_out_rmse": _rounded(chip_cross)},
            "pair_carry_over": carry},
        "checks": checks,
        "aliases": dict(sorted(aliases.items())),
        "order": [e[0] for e in ENTRIES],
        "models": models,
    }


def _rounded(d: dict) -> dict:
    return {k: round(v, 4) for k, v in d.items()}


def _shares(d: dict) -> str:
    return ", ".join(f"{k} {v:.3f}" for k, v in d.items())


def build_checks(d: Path, models: dict, acme: dict, v: dict) -> dict:
    """Comparisons with data no constant was fitted to (printed by the benchmark)."""
    out = {}
    # SM clock as a cap: Perseus stage profiles, time ratio at each clock's power
    for key, tag in PERSEUS_STAGE.items():
        groups = stage_groups(d / "power" / "perseus-stage-profile", tag)
        if not groups:
            continue
        m = models[key]
        pts = [p for ps in cap_points(groups, m["idle_power_w"]["value"]).values() for p in ps]
        out.setdefault(key, {})["stage_profile_clock"] = {
            "rows": len(pts), "rmse": round(beta_rmse(pts, m["cap_beta"]["value"]), 4),
            "beta_fitted_here": fit_beta(pts)[0],
            "what": f"power/perseus-stage-profile/*+{tag}_bf16.csv: T/T0 at each SM clock "
                    "predicted from the clock's power as a cap (rmse of T/T0)"}
    # A40 cap beta on the other A40 sweep (Perseus)
    groups = perseus_groups(d / "power" / "perseus" / "csv" / "A40" / "zeus_global.csv")
    pts = [p for ps in cap_points(groups, models["A40"]["idle_power_w"]["value"]).values()
           for p in ps]
    out.setdefault("A40", {})["perseus_sweep"] = {
        "rows": len(pts), "rmse": round(beta_rmse(pts, models["A40"]["cap_beta"]["value"]), 4),
        "beta_fitted_here": fit_beta(pts)[0],
        "what": "power/perseus/csv/A40/zeus_global.csv: T/T0 under each limit with the "
                "Zeus-fitted beta (rmse of T/T0)"}
    # power at full utilisation against inference power (ML.ENERGY): vLLM keeps a GPU busy
    for key, (ver, gpu) in MLENERGY_CHECK.items():
        f = d / "power" / f"mlenergy-leaderboard-{ver}" / "inference_configs_a100_h100.csv"
        with f.open() as fh:
            vals = [float(r["derived_avg_power_w_per_gpu"]) for r in csv.DictReader(fh)
                    if r["gpu"] == gpu]
        m = models[key]
        out.setdefault(key, {})["mlenergy_inference"] = {
            "rows": len(vals), "median_w": round(statistics.median(vals), 1),
            "p100_w": round(m["idle_power_w"]["value"] + m["dynamic_power_w"]["value"], 1),
            "what": f"power/mlenergy-leaderboard-{ver}/inference_configs_a100_h100.csv "
                    f"({gpu}): median per-GPU inference power against the curve at 100 % "
                    "(inference, not training)"}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default="../shared/data", type=Path)
    ap.add_argument("--out", default=HERE.parent / "slurm_plugin" / "data" / "gpu_models.json",
                    type=Path)
    args = ap.parse_args()
    if not (args.data_dir / "power" / "GPU-DATASHEETS.md").is_file():
        print(f"fit_gpu_models: {args.data_dir}/power/GPU-DATASHEETS.md not found; pass "
              "--data-dir pointing at the shared data", file=sys.stderr)
        return 2
    try:
        out = build(args.data_dir)
    except (OSError, KeyError, ValueError) as exc:
        print(f"fit_gpu_models: {args.data_dir}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    for key, m in out["models"].items():
        src = {c: m[c]["source"] for c in CONSTANTS}
        print(f"{key:16s} " + " ".join(f"{c}={m[c]['value'] if c != 'colocation_pairs' else '...'}"
                                       f"({src[c][0]})" for c in CONSTANTS if c != "tdp_w"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
