"""``wattctl gpu-models``: the GPU model catalogue (``physics/gpu_models.py``).

``gpu-models [--json]`` lists the models with their aliases and which constants are measured;
``gpu-models show NAME... [--json] [--plot F.png]`` prints each constant of a model with its
source, and its power at utilisation 0, 10, ..., 100 %; ``--plot`` draws the curves of the
models named. A name is an NVML name ("NVIDIA H100 80GB HBM3"), an entry name or an alias.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import click

from ..errors import InputError

UNITS = {"tdp_w": "W", "memory_mib": "MiB", "idle_power_w": "W", "max_power_w": "W",
         "min_power_cap_w": "W", "dynamic_power_w": "W"}
SHORT = {"memory_mib": "memory", "idle_power_w": "idle", "max_power_w": "max limit",
         "min_power_cap_w": "min limit", "dynamic_power_w": "dynamic", "util_gamma": "gamma",
         "cap_beta": "cap beta", "interference_k": "k", "interference_util_threshold": "t",
         "interference_k_mps": "k mps", "colocation_pairs": "pairs", "tdp_w": "TDP"}


def _summary(m) -> dict:
    """One model's list entry (--json)."""
    from ..physics.gpu_models import CONSTANTS
    return {"name": m.name, "nvml_names": m.nvml_names, "aliases": m.aliases,
            "chip": m.chip, "form_factor": m.form_factor, "memory_mib": m.memory_mib,
            "idle_power_w": m.idle_power_w, "max_power_w": m.max_power_w,
            "min_power_cap_w": m.min_power_cap_w,
            "power_at_100_pct_w": round(m.power_at_util_w(100), 1), "cap_beta": m.cap_beta,
            "sources": m.sources(),
            "measured": [c for c in CONSTANTS if m.sources()[c] == "measured"]}


def _detail(m) -> dict:
    """One model's full record (show --json)."""
    from ..physics.gpu_models import CONSTANTS
    return {"name": m.name, "nvml_names": m.nvml_names, "aliases": m.aliases, "chip": m.chip,
            "form_factor": m.form_factor, "memory_type": m.memory_type,
            "constants": {c: m.constant(c) for c in CONSTANTS},
            "power_at_util_w": {str(u): w for u, w in m.curve()}}


def _measured_text(m) -> str:
    from ..physics.gpu_models import CONSTANTS
    got = [SHORT[c] for c in CONSTANTS if m.sources()[c] == "measured"]
    if got:
        return ", ".join(got)
    board: dict[str, list[str]] = {}      # measured on the same board with other memory
    for c in CONSTANTS:
        how = m.constant(c)["how"]
        if m.sources()[c] == "carried-over" and "(the same board" in how:
            board.setdefault(how[3:].split(" (")[0], []).append(SHORT[c])
    if board:
        return "none of its own; " + "; ".join(f"{', '.join(v)} from {k}"
                                               for k, v in board.items())
    return "none (datasheet only)"


@click.group("gpu-models", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON: per model its main constants, their sources, and the aliases.")
@click.pass_context
def gpu_models(ctx: click.Context, as_json: bool) -> None:
    """The GPU model catalogue: memory, idle power, power limits, power versus utilisation,
    slowdown under a cap, co-location, each with its source (docs/gpu-models.md)."""
    if ctx.invoked_subcommand is not None:
        return
    from ..physics.gpu_models import aliases, lookup, names
    models = [lookup(n) for n in names()]
    if as_json:
        click.echo(json.dumps({"models": [_summary(m) for m in models],
                               "aliases": aliases()}, indent=1))
        return
    w = max(len(m.name) for m in models)
    click.echo(f"{'model':<{w}}  {'form':<10} {'memory':>10} {'idle':>6} {'limits W':>9} "
               f"{'P(100%)':>8} {'beta':>5}  measured")
    for m in models:
        click.echo(f"{m.name:<{w}}  {m.form_factor:<10} {m.memory_mib:>6} MiB "
                   f"{m.idle_power_w:>5.1f}W {m.min_power_cap_w:>4.0f}-{m.max_power_w:<4.0f} "
                   f"{m.power_at_util_w(100):>7.1f}W {m.cap_beta:>5.2f}  {_measured_text(m)}")
    click.echo("")
    click.echo("aliases (each means one part):")
    by: dict[str, list[str]] = {}
    for a, key in aliases().items():
        by.setdefault(key, []).append(a)
    for m in models:
        if m.name in by:
            click.echo(f"  {', '.join(by[m.name]):<40} -> {m.name} ({'; '.join(m.nvml_names)})")
    click.echo("")
    click.echo("wattctl gpu-models show NAME: every constant with its source; "
               "benchmarks/bench_gpu_models.py: the fit errors")


def _value_text(c: str, v) -> str:
    if c == "colocation_pairs":
        return f"{len(v)} measured job pairs"
    unit = UNITS.get(c, "")
    return f"{v:g} {unit}".rstrip()


def _print_model(m) -> None:
    from ..physics.gpu_models import CONSTANTS
    click.echo(f"{m.name}  ({m.chip}, {m.form_factor}, {m.memory_type})")
    click.echo(f"  NVML name: {'; '.join(m.nvml_names)}")
    click.echo(f"  aliases: {', '.join(m.aliases) if m.aliases else '-'}")
    click.echo(f"  measured: {_measured_text(m)}")
    for c in CONSTANTS:
        rec = m.constant(c)
        click.echo(f"  {c} = {_value_text(c, rec['value'])}  [{rec['source']}]")
        for line in textwrap.wrap(rec["how"], 92):
            click.echo(f"      {line}")
        h = rec.get("held_out")
        if h:
            click.echo(f"      held out: {h['method']}: {h['metric']} {h['value']:g}")
    click.echo("  power_at_util_w:")
    curve = m.curve()
    click.echo("    util %  " + " ".join(f"{u:>6}" for u, _ in curve))
    click.echo("    W       " + " ".join(f"{w:>6.1f}" for _, w in curve))


@gpu_models.command("show")
@click.argument("names", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON: the model (a list when several are named) with every "
                   "constant's value, source and how, and power_at_util_w at 0..100 %.")
@click.option("--plot", "plot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Draw the power-versus-utilisation curves of the models named (PNG; needs "
                   "matplotlib: pip install 'wattbatch[plot]').")
def show(names: tuple[str, ...], as_json: bool, plot: Path | None) -> None:
    """Print the constants of a GPU model with their sources, and its power at utilisation
    0, 10, ..., 100 %. NAME is an NVML name, an entry name or an alias (wattctl gpu-models)."""
    from ..physics.gpu_models import lookup
    models = [lookup(n) for n in names]
    if plot is not None:
        _pyplot()           # a missing matplotlib is said before anything is printed
    if as_json:
        out = [_detail(m) for m in models]
        click.echo(json.dumps(out[0] if len(out) == 1 else out, indent=1))
    else:
        for i, m in enumerate(models):
            if i:
                click.echo("")
            _print_model(m)
    if plot is not None:
        _plot(models, plot)
        if not as_json:
            click.echo(f"gpu-models: plot -> {plot}")


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("gpu-models show: --plot needs matplotlib, which is not installed: "
                         "pip install 'wattbatch[plot]' (or matplotlib), or leave out "
                         "--plot") from None
    return plt


def _plot(models: list, path: Path) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    utils = list(range(0, 101, 2))
    for m in models:
        tag = "measured" if m.sources()["dynamic_power_w"] == "measured" else \
            m.sources()["dynamic_power_w"]
        ax.plot(utils, [m.power_at_util_w(u) for u in utils], label=f"{m.name} ({tag})")
        ax.axhline(m.max_power_w, linestyle=":", linewidth=0.8,
                   color=ax.get_lines()[-1].get_color())
    ax.set_xlabel("GPU utilisation (%)")
    ax.set_ylabel("power (W)")
    ax.set_title("power versus utilisation (dotted: top power limit)")
    ax.set_xlim(0, 100)
    ax.set_ylim(0, None)
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as exc:
        raise InputError(f"gpu-models: {path}: cannot write ({exc.strerror})") from None
    finally:
        plt.close(fig)
