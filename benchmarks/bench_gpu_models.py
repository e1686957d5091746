#!/usr/bin/env python3
"""GPU model catalogue: per model, the error of its power-versus-utilisation curve and of its
slowdown under a power cap on rows left out of the fit, and what is not measured.

The catalogue is rebuilt from the data (``scripts/fit_gpu_models.py``) and compared with the
shipped ``slurm_plugin/data/gpu_models.json``.

- curve ``P(u) = idle + dynamic * (u/100) ** gamma``: V100-SXM2-32GB leaving out each job log
  of the Haghshenas nvidia-smi logs (RMSE per 5-s sample, and the MAPE of each job's mean
  power); A100-SXM4-80GB leaving out each AcmeTrace cluster (its span is a moment match of
  the marginal power and utilisation distributions: the mean power's error).
- cap ``T/T0 = ((P0 - idle) / (cap - idle)) ** beta``: leaving out each workload of the sweep
  (Zeus V100 and A40 networks, Perseus A100 trainings); carried-over betas: each measured
  chip's rows predicted with the median of the other chips' betas.
- checks against data no constant was fitted to: the Perseus A40 sweep, the Perseus stage
  profiles (SM clock as a cap), ML.ENERGY inference power, Gavel's pairs on P100/K80.

Usage: ``python benchmarks/bench_gpu_models.py [--data-dir ../shared/data]``
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO))

from _common import input_dir, input_errors, num  # noqa: E402

CURVE = ("idle_power_w", "dynamic_power_w", "util_gamma")


def _src(m: dict, c: str) -> str:
    return m[c]["source"]


def _from(m: dict, c: str) -> str:
    """``measured``, ``carried-over from X`` or ``datasheet``."""
    src = _src(m, c)
    if src == "carried-over" and m[c]["how"].startswith("as "):
        return "carried-over from " + m[c]["how"][3:].split(" (")[0]
    return src


def curve_error(key: str, m: dict) -> str:
    """The held-out error of the curve's fitted part, or what the curve is made of."""
    srcs = {c: _src(m, c) for c in CURVE}
    if srcs["dynamic_power_w"] == "measured":
        h = m["dynamic_power_w"]["held_out"]
        unit = " W" if h["metric"].endswith("_w") else (" %" if "%" in h["metric"] else "")
        metric = "RMSE" if h["metric"].startswith("rmse") else h["metric"].replace(" %", "")
        rest = [c for c in CURVE if srcs[c] != "measured"]
        tail = f"; {', '.join(f'{c} {_from(m, c)}' for c in rest)}" if rest else ""
        return (f"{metric} {num(h['value'], '.1f')}{unit} ({h['method']}; "
                f"{m['dynamic_power_w']['rows']:,} rows){tail}")
    if srcs["dynamic_power_w"] == "carried-over":
        return f"{_from(m, 'dynamic_power_w')} (its error above), no error of its own"
    if srcs["idle_power_w"] != "datasheet":
        return (f"idle {_from(m, 'idle_power_w')} (readings: no held-out error); span from "
                "TDP shares, gamma carried-over: no held-out error")
    return "datasheet only: idle and span from TDP shares, gamma carried-over"


def cap_error(key: str, m: dict) -> str:
    c = m["cap_beta"]
    h = c.get("held_out")
    if c["source"] == "measured":
        return f"RMSE {num(h['value'], '.3f')} ({h['method']}; {c['rows']} capped rows)"
    if h:
        return (f"datasheet only (no cap data): the median beta of the measured chips, RMSE "
                f"{num(h['value'], '.3f')} ({h['method']})")
    return f"{_from(m, 'cap_beta')} (its error above), no error of its own"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default="../shared/data",
                    help="the shared data folder (default ../shared/data)")
    args = ap.parse_args()
    d = input_dir(ap, "--data-dir", args.data_dir, "the shared data folder (power/, colocation/)")
    for need in ("power/GPU-DATASHEETS.md", "power/haghshenas-colocated/Data_logs",
                 "colocation/gavel/physical_cluster_throughputs.json"):
        if not (d / need).exists():
            ap.error(f"--data-dir {args.data_dir}: no {need}; give the shared data folder")
    import fit_gpu_models as fgm
    with input_errors(ap, "--data-dir: "):
        try:
            import contextlib
            import io
            with contextlib.redirect_stdout(io.StringIO()):
                cat = fgm.build(d)
        except (OSError, KeyError, ValueError) as exc:
            ap.error(f"--data-dir {args.data_dir}: {type(exc).__name__}: {exc}")
    shipped = json.loads((REPO / "slurm_plugin" / "data" / "gpu_models.json").read_text())
    same = json.loads(json.dumps(cat, sort_keys=True)) == shipped

    models = cat["models"]
    w = max(map(len, models))
    print("GPU model catalogue: error on rows left out of each fit "
          f"(rebuilt from {args.data_dir}; shipped gpu_models.json "
          f"{'is up to date' if same else 'DIFFERS: run scripts/fit_gpu_models.py'})")
    print()
    print("measured constants per model (m measured, d datasheet, c carried-over):")
    from slurm_plugin.physics.gpu_models import CONSTANTS
    short = {"tdp_w": "tdp", "memory_mib": "mem", "idle_power_w": "idle",
             "max_power_w": "max", "min_power_cap_w": "min", "dynamic_power_w": "dyn",
             "util_gamma": "gamma", "cap_beta": "beta", "interference_k": "k",
             "interference_util_threshold": "t", "interference_k_mps": "k_mps",
             "colocation_pairs": "pairs"}
    print(f"  {'model':<{w}}  " + " ".join(f"{short[c]:>5}" for c in CONSTANTS))
    for key, m in models.items():
        print(f"  {key:<{w}}  " + " ".join(f"{m[c]['source'][0]:>5}" for c in CONSTANTS))
    print()
    print("power versus utilisation, P(u) = idle + dynamic * (u/100)^gamma:")
    for key, m in models.items():
        p = m["idle_power_w"]["value"] + m["dynamic_power_w"]["value"]
        print(f"  {key:<{w}}  idle {m['idle_power_w']['value']:6.1f} W  P(100) {p:6.1f} W  "
              f"{curve_error(key, m)}")
    print()
    print("slowdown under a power cap, T/T0 = ((P0 - idle)/(cap - idle))^beta:")
    for key, m in models.items():
        print(f"  {key:<{w}}  beta {m['cap_beta']['value']:.2f}  {cap_error(key, m)}")
    s = cat["shares"]["cap_beta"]
    print("  leave-one-chip-out (a measured chip's rows with the median of the others' betas): "
          + ", ".join(f"{c} RMSE {v:.3f}" for c, v in s["leave_one_chip_out_rmse"].items()))
    print()
    print("checks against data no constant was fitted to:")
    for key, checks in cat["checks"].items():
        for name, c in checks.items():
            if "rmse" in c:
                print(f"  {key:<{w}}  {name}: RMSE {c['rmse']:.3f} over {c['rows']} rows "
                      f"(a beta fitted to these rows: {c['beta_fitted_here']:.2f}): {c['what']}")
            else:
                print(f"  {key:<{w}}  {name}: median {c['median_w']:.1f} W over {c['rows']} "
                      f"configurations, curve at 100 % {c['p100_w']:.1f} W: {c['what']}")
    for gpu, c in cat["shares"]["pair_carry_over"].items():
        print(f"  co-location pairs V100 -> {gpu}: normalised speed RMSE {c['rmse']:.3f} over "
              f"{c['pairs']} ordered pairs (mean V100 - {gpu} {c['bias']:+.3f}); every model "
              "but V100-SXM2-32GB carries the V100 pairs over unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
