"""``wattctl simulate --compare ... --loads auto|N,N,N``: the policies at three loads, each
figure beside its bound and the share of the headroom it captures (``sim/loads.py``)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import click

from ..errors import InputError
from ..physics.variability import load_profile
from ..sim.cluster import ClusterSpec
from ..sim.loads import BOUNDED, HOUR_S, Load, bounds_at, captured, carbon_floor_kg, choose_loads
from ..sim.run import Inputs, oracle_metrics, simulate as run_one

SHOWN = ("energy_kwh", "carbon_kg", "avg_jct_s", "geomean_jct_s", "p99_jct_s", "makespan_s",
         "max_queue_s")
UNITS = {"energy_kwh": ("energy (kWh)", 1.0), "carbon_kg": ("carbon (kg)", 1.0),
         "avg_jct_s": ("avg JCT (h)", HOUR_S), "geomean_jct_s": ("geomean JCT (h)", HOUR_S),
         "p99_jct_s": ("p99 JCT (h)", HOUR_S), "makespan_s": ("makespan (h)", HOUR_S),
         "max_queue_s": ("worst wait (h)", HOUR_S)}


def parse_loads(text: str) -> list[int] | None:
    """``auto`` -> None; ``128,84,64`` -> node counts."""
    if text.strip().lower() == "auto":
        return None
    try:
        sizes = [int(x) for x in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise click.BadParameter(f"{text!r}: give auto or node counts, comma-separated "
                                 "(e.g. 128,84,64)", param_hint="'--loads'")
    return sizes


def run_loads(loads_text: str, names: list[str], inputs: Inputs, jobs: list, cfg, carbon,
              settings: Callable[[str, ClusterSpec], dict], as_json: bool,
              plot_file: Path | None) -> None:
    base = inputs.spec
    if base.groups:
        raise click.UsageError("--loads sizes a cluster of one GPU model: give --gpu-type MODEL, "
                               "not node groups")
    gpn = base.gpus_per_node
    least = max(math.ceil(j.num_gpus / gpn) for j in jobs)
    runs: dict[tuple[int, str], dict[str, Any]] = {}

    def spec_at(nodes: int) -> ClusterSpec:
        return replace(base, nodes=nodes)

    def result(nodes: int, name: str) -> dict[str, Any]:
        if (nodes, name) not in runs:
            spec = spec_at(nodes)
            runs[(nodes, name)] = run_one(replace(inputs, spec=spec), name,
                                          settings=settings(name, spec), jobs=jobs, carbon=carbon)
        return runs[(nodes, name)]

    def wait_at(nodes: int) -> float:
        wait = result(nodes, "slurm-default")["avg_queue_s"]
        click.echo(f"loads: slurm-default on {nodes} nodes x {gpn} GPUs waits "
                   f"{wait / HOUR_S:,.2f} h on average", err=True)
        return wait

    sizes = parse_loads(loads_text)
    missing: list[str] = []
    if sizes is None:
        loads, missing = choose_loads(wait_at, least, base.nodes)
    else:
        small = [n for n in sizes if n < least]
        if small:
            raise InputError(f"simulate: --loads {loads_text}: {small[0]} nodes x {gpn} GPUs "
                             f"cannot hold the trace's widest job ({least} nodes)")
        loads = [Load(str(n), n, wait_at(n)) for n in sizes]
    limit = int(cfg.section("eaco").get("max_jobs_per_gpu", 4))
    out = {"trace": str(inputs.trace), "gpus_per_node": gpn, "gpu_type": base.gpu_type,
           "policies": names, "baseline": names[0], "max_jobs_per_gpu": limit,
           "loads": [], "missing": missing}
    for load in loads:
        spec = spec_at(load.nodes).resolved()
        factor = 1.0
        if inputs.variability is not None:
            factor = min(1.0, min(min(g.values()) for g in load_profile(inputs.variability)
                                  .factors(spec.gpu_count, inputs.seed)))
        b = bounds_at(jobs, spec, carbon, seed=inputs.seed, mix=inputs.class_mix,
                      max_jobs_per_gpu=limit, time_factor=factor)
        results = []
        for name in names:
            click.echo(f"loads: {load.name}: {name} on {load.nodes} nodes", err=True)
            r = (oracle_metrics(jobs, spec, carbon, inputs.seed, inputs.class_mix, limit)
                 if name == "oracle-bound" else result(load.nodes, name))
            results.append(r)
        end_s = jobs[0].submit_s + max(r["makespan_s"] for r in results)
        bound = {k: v for k, v in b.items() if k not in ("least_kwh", "energy_note")}
        if b["energy_note"] and b["energy_note"] not in missing:
            missing.append(b["energy_note"])
        bound["carbon_kg"] = carbon_floor_kg(jobs, b["least_kwh"], carbon, end_s,
                                             spec.gpu_count, limit, factor)
        rows = []
        for r in results:
            row = {k: r.get(k) for k in ("policy", "jobs", "jobs_finished", *SHOWN)}
            row["captured"] = {m: captured(results[0].get(m), r.get(m), bound[BOUNDED[m]])
                               for m in SHOWN if m != "max_queue_s"}
            rows.append(row)
        out["loads"].append({"name": load.name, "nodes": load.nodes,
                             "slurm_default_wait_s": load.wait_s, "time_factor": factor,
                             "bounds": bound, "results": rows})
    for line in missing:
        click.echo(f"warning: loads: {line}", err=True)
    if plot_file is not None:
        plot_loads(out, plot_file)
    click.echo(json.dumps(out, indent=1) if as_json else render(out))


def _cell(v: float | None, scale: float) -> str:
    if v is None:
        return "-"
    x = v / scale
    return f"{x:,.2f}" if abs(x) < 100 else f"{x:,.0f}"


def render(out: dict) -> str:
    lines = [f"{out['trace']}: each figure beside its bound; (N %): the share of the headroom "
             f"between {out['baseline']} and the bound it captures"]
    for load in out["loads"]:
        lines += ["", f"{load['name']}: {load['nodes']} nodes x {out['gpus_per_node']} "
                      f"{out['gpu_type']}, slurm-default's average queue wait "
                      f"{load['slurm_default_wait_s'] / HOUR_S:,.2f} h"]
        cells = [[UNITS[m][0], _cell(load["bounds"][BOUNDED[m]], UNITS[m][1])] for m in SHOWN]
        for k, m in enumerate(SHOWN):
            for r in load["results"]:
                share = r["captured"].get(m)
                cells[k].append(_cell(r[m], UNITS[m][1])
                                + (f" ({share:.0%})" if share is not None and r is not
                                   load["results"][0] else ""))
        cells.append(["avg JCT, fluid ref (h)",
                      _cell(load["bounds"]["fluid_avg_jct_s"], HOUR_S)] + [""] * len(out["policies"]))
        head = ["metric", "bound"] + [r["policy"] for r in load["results"]]
        widths = [max(len(str(row[i])) for row in [head, *cells]) + 2 for i in range(len(head))]
        lines.append("  " + head[0].ljust(widths[0]) + "".join(h.rjust(w) for h, w in
                                                               zip(head[1:], widths[1:])))
        lines += ["  " + row[0].ljust(widths[0]) + "".join(c.rjust(w) for c, w in
                                                           zip(row[1:], widths[1:]))
                  for row in cells]
    return "\n".join(lines)


def plot_loads(out: dict, path: Path) -> None:
    """One panel per metric, the loads on the x axis, a line per policy, the bound dashed."""
    import matplotlib       # the caller checked it is there
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    loads = out["loads"]
    xs = list(range(len(loads)))
    labels = [f"{ld['name']}\n{ld['nodes']} nodes\nwait {ld['slurm_default_wait_s'] / HOUR_S:.1f} h"
              for ld in loads]
    cols = 4
    fig, axes = plt.subplots(2, cols, figsize=(4 * cols, 7))
    for ax, m in zip(axes.flat, SHOWN):
        title, scale = UNITS[m]
        for name in out["policies"]:
            ys = [next(r[m] for r in ld["results"] if r["policy"] == name) / scale for ld in loads]
            ax.plot(xs, ys, marker="o", label=name)
        ax.plot(xs, [ld["bounds"][BOUNDED[m]] / scale for ld in loads], "k--", label="bound")
        ax.set_title(title)
        ax.set_xticks(xs, labels, fontsize=7)
    for ax in list(axes.flat)[len(SHOWN):]:
        ax.axis("off")
    handles, names = axes.flat[0].get_legend_handles_labels()
    list(axes.flat)[-1].legend(handles, names, loc="center", fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise InputError(f"simulate: --plot {path}: cannot write ({exc.strerror})") from None
