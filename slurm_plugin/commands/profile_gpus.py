"""``wattctl profile-gpus``: per-GPU variability profiles (PAL's classes A-D).

``import FILE... --out PROFILE.csv`` classifies measurement runs (``physics/gpu_profile.py``);
``show PROFILE`` prints the classes per GPU and the distribution per class, and which rows are
stale (``policy/pal/freshness.py``); ``run --out PROFILE.csv`` measures every GPU of a
partition through Slurm (``profile_run.py``).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import click

from ..errors import InputError
from ..physics.gpu_profile import APP_CLASSES, CLASSES, OUTLIER, UNMEASURED, import_files


@click.group("profile-gpus")
def profile_gpus() -> None:
    """Per-GPU performance variability profiles (PAL): build from measurements, show."""


@profile_gpus.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(path_type=Path),
              help="Profile CSV to write (what `wattctl simulate --variability` and the pal "
                   "policy's `profile` setting read).")
def import_cmd(files: tuple[Path, ...], out: Path) -> None:
    """Classify per-GPU runs (CSV files as PAL's *-longhorn-agg.csv) into a profile.

    Applications match in any case, and a name starting with one counts as it (ResNet50 is
    resnet); runs of other applications are ignored, with a warning per name."""
    ignored: dict[str, int] = {}
    rows = import_files(list(files), out, ignored)
    for name, n in sorted(ignored.items()):
        click.echo(f"warning: profile-gpus: {n} runs of {name!r} ignored: not a profiled "
                   f"application ({', '.join(sorted(APP_CLASSES))}, or a name starting with "
                   f"one); name the application in the file's exp column", err=True)
    skipped = (f"; {sum(ignored.values())} runs of other applications ignored "
               f"({', '.join(sorted(ignored))})" if ignored else "")
    click.echo(f"profile-gpus: {len(rows)} GPUs from {len(files)} files -> {out}{skipped}")
    for line in _distribution(_read(out)):
        click.echo(line)


def _read(path: Path) -> list[dict[str, str]]:
    import csv

    from ..physics.variability import parse_factor
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            cols = reader.fieldnames or []
            missing = [f"PerfVar_class{c}" for c in CLASSES if f"PerfVar_class{c}" not in cols]
            if missing:
                raise InputError(f"profile-gpus: {path}: line 1: column {missing[0]}: missing; "
                                 f"not a GPU profile")
            rows = list(reader)
    except OSError as exc:
        raise InputError(f"profile-gpus: {path}: cannot read ({exc.strerror})") from None
    for line, r in enumerate(rows, start=2):
        for c in CLASSES:
            try:
                parse_factor(r[f"PerfVar_class{c}"])
            except ValueError as exc:
                raise InputError(f"profile-gpus: {path}: line {line}: column PerfVar_class{c}: "
                                 f"{exc}") from None
    return rows


def _gpu_name(r: dict[str, str], i: int) -> str:
    node = r.get("node") or r.get("Node_ID") or ""
    idx = r.get("gpu_index") or r.get("Local_GPU_ID") or ""
    return f"{node}:{idx}" if node else (r.get("uuid") or r.get("GPU_UUID") or f"row{i}")


def _cluster(r: dict[str, str], c: str) -> str:
    return r.get(f"cluster_class{c}") or f"{float(r[f'PerfVar_class{c}']):.2f}"


def _distribution(rows: list[dict[str, str]]) -> list[str]:
    """Per class: each cluster with its factor and GPU count, as a bar."""
    out = []
    n = len(rows)
    for c in CLASSES:
        groups: dict[str, list[float]] = {}
        for r in rows:
            groups.setdefault(_cluster(r, c), []).append(float(r[f"PerfVar_class{c}"]))
        out.append(f"class {c}:")
        order = sorted(groups, key=lambda k: (k in (OUTLIER, UNMEASURED), min(groups[k]), k))
        for k in order:
            vals = groups[k]
            lo, hi = min(vals), max(vals)
            span = f"{lo:.3f}" if abs(hi - lo) < 5e-4 else f"{lo:.3f}-{hi:.3f}"
            bar = "#" * max(1, round(40 * len(vals) / n))
            label = {UNMEASURED: "unmeasured (median)", OUTLIER: "outliers"}.get(k, k)
            out.append(f"  {label:<20} x{span:<12} {len(vals):>5} GPUs  {bar}")
    return out


@profile_gpus.command("show")
@click.argument("profile", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON: per GPU its factor and "
              "cluster per class, and the GPU count per class and cluster.")
@click.option("--plot", "plot", type=click.Path(path_type=Path), default=None,
              help="Write a histogram of the factors per class (PNG; needs matplotlib: "
                   "pip install wattbatch[plot]).")
@click.option("--max-age-days", type=click.FloatRange(0, 36500), default=None,
              help="Rows measured longer ago are stale (default: the site's "
                   "pal.profile_max_age_days; 0: never).")
def show(profile: Path, as_json: bool, plot: Path | None, max_age_days: float | None) -> None:
    """Print the class of every GPU of a profile, the distribution per class, and the stale
    rows (too old, or the GPU's uuid changed)."""
    rows = _read(profile)
    stale = _stale(profile, max_age_days)
    if as_json:
        gpus = [{"gpu": _gpu_name(r, i), "uuid": r.get("uuid") or r.get("GPU_UUID") or "",
                 "factors": {c: float(r[f"PerfVar_class{c}"]) for c in CLASSES},
                 "clusters": {c: _cluster(r, c) for c in CLASSES},
                 "measured_at": r.get("measured_at") or "",
                 "stale": stale.get(_gpu_name(r, i), "")} for i, r in enumerate(rows)]
        counts = {c: dict(Counter(g["clusters"][c] for g in gpus)) for c in CLASSES}
        click.echo(json.dumps({"gpus": gpus, "classes": counts, "stale": len(stale)}, indent=1))
    else:
        click.echo(f"{'gpu':<24} " + " ".join(f"{'class ' + c:>16}" for c in CLASSES))
        for i, r in enumerate(rows):
            cells = [f"{_cluster(r, c)} x{float(r[f'PerfVar_class{c}']):.3f}" for c in CLASSES]
            click.echo(f"{_gpu_name(r, i):<24} " + " ".join(f"{x:>16}" for x in cells))
        click.echo("")
        for line in _distribution(rows):
            click.echo(line)
        if stale:
            click.echo(f"stale: {len(stale)} of {len(rows)} GPUs (re-run wattctl profile-gpus "
                       "run on their nodes):")
            for name, why in sorted(stale.items()):
                click.echo(f"  {name:<24} {why}")
    if plot is not None:
        _plot(rows, plot)


def _stale(profile: Path, max_age_days: float | None) -> dict[str, str]:
    """``node:index`` -> why the row is stale: by age (``max_age_days``, else the site's
    ``pal.profile_max_age_days``), and by uuid where the current one is known here (the
    site's emulated GPUs)."""
    import time

    from ..physics.variability import load_profile
    from ..policy.pal.freshness import stale_gpus
    current: dict = {}
    age = max_age_days
    try:
        from .. import config
        from ..node.emulated import is_emulated
        cfg = config.load()
        if age is None:
            age = float(cfg["pal.profile_max_age_days"])
        if is_emulated(cfg["node.gpu_source"]) and cfg["node.emulated_variability"]:
            from ..node.emulated import emulated_gpus
            current = {k: v[0] for k, v in emulated_gpus(cfg["node.emulated_variability"]).items()}
    except Exception:          # no site config here: the packaged default age
        age = 30.0 if age is None else age
    prof = load_profile(profile)
    found = stale_gpus(prof, profile.stat().st_mtime, time.time(), age, current)
    return {f"{n}:{i}": why for (n, i), why in found.items()}


def _plot(rows: list[dict[str, str]], path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise click.ClickException("profile-gpus show --plot: matplotlib is not installed "
                                   "(pip install 'wattbatch[plot]'); the table above is "
                                   "printed without it") from None
    fig, axes = plt.subplots(1, len(CLASSES), figsize=(4 * len(CLASSES), 3), sharey=True)
    for ax, c in zip(axes, CLASSES):
        vals = [float(r[f"PerfVar_class{c}"]) for r in rows
                if r.get(f"cluster_class{c}", "") != UNMEASURED]
        ax.hist(vals, bins=30)
        ax.set_title(f"class {c}: {len(vals)} GPUs")
        ax.set_xlabel("slowdown factor (x median)")
    axes[0].set_ylabel("GPUs")
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as exc:
        raise InputError(f"profile-gpus: {path}: cannot write ({exc.strerror})") from None
    click.echo(f"profile-gpus: plot -> {path}")


@profile_gpus.command("run")
@click.option("--out", "out", required=True, type=click.Path(path_type=Path),
              help="Profile CSV to write (the site's pal.profile can point at it); the runs go "
                   "beside it as OUT.runs.csv.")
@click.option("--partition", "-p", default=None, help="Measure this partition's nodes "
              "(default: every node with GPUs).")
@click.option("--nodelist", "-w", default=None, help="Only these nodes (Slurm host list).")
@click.option("--app", "apps", multiple=True, type=click.Choice(sorted(APP_CLASSES)),
              help="Application to time, repeatable: resnet (class A, default), bert (B, C), "
                   "pagerank (D).")
@click.option("--per", type=click.Choice(["auto", "gpu", "node"]), default="auto",
              show_default=True, help="One job per GPU (typed GRES pins it) or per node.")
@click.option("--runs", type=click.IntRange(1, 100), default=3, show_default=True,
              help="Timed runs per GPU and application (the profile takes their median).")
@click.option("--steps", type=click.IntRange(1, 100000), default=5, show_default=True,
              help="Steps per run.")
@click.option("--step-s", type=click.FloatRange(0.001, 60), default=0.2, show_default=True,
              help="Emulated GPUs: seconds per step on a median GPU.")
@click.option("--timeout-s", type=click.FloatRange(1, 86400), default=600, show_default=True,
              help="Give up on the GPUs with no result by then (their jobs are cancelled).")
@click.option("--work-dir", type=click.Path(path_type=Path), default=None,
              help="Where the jobs write their results: a directory every node sees (default: "
                   "a new one beside --out).")
@click.option("--python", "python", default=sys.executable, show_default=True,
              help="Python with wattbatch installed, as the nodes see it.")
@click.option("--merge", is_flag=True, help="Keep the runs of the GPUs not measured now from "
              "OUT.runs.csv (re-profile some nodes: -w) and classify them all again.")
@click.option("--no-influx", is_flag=True, help="Do not store gpu_perf points in InfluxDB.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def run_cmd(out: Path, partition: str | None, nodelist: str | None, apps: tuple[str, ...],
            per: str, runs: int, steps: int, step_s: float, timeout_s: float,
            work_dir: Path | None, python: str, merge: bool, no_influx: bool,
            as_json: bool) -> None:
    """Submit a short benchmark job to every GPU of a partition, collect the per-GPU times and
    write a profile (as `import` does) and InfluxDB gpu_perf points."""
    from .. import config
    from ..slurm.parse import expand_hostlist
    from .profile_run import print_summary, run_profile

    cfg = config.load()
    nodes = list(expand_hostlist(nodelist)) if nodelist else None
    result = run_profile(cfg, out, list(apps) or ["resnet"], partition, nodes, per, runs,
                         steps, step_s, timeout_s, work_dir, python, not no_influx,
                         lambda line: click.echo(line, err=True), merge=merge)
    if as_json:
        click.echo(json.dumps(result, indent=1))
    else:
        print_summary(result, click.echo)
