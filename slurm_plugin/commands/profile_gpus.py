"""``wattctl profile-gpus``: per-GPU variability profiles (PAL's classes A-D).

``import FILE... --out PROFILE.csv`` classifies measurement runs (``physics/gpu_profile.py``);
``show PROFILE`` prints the classes per GPU and the distribution per class.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import click

from ..errors import InputError
from ..physics.gpu_profile import CLASSES, OUTLIER, UNMEASURED, import_files


@click.group("profile-gpus")
def profile_gpus() -> None:
    """Per-GPU performance variability profiles (PAL): build from measurements, show."""


@profile_gpus.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(path_type=Path),
              help="Profile CSV to write (what `wattctl simulate --variability` and the pal "
                   "policy's `profile` setting read).")
def import_cmd(files: tuple[Path, ...], out: Path) -> None:
    """Classify per-GPU runs (CSV files as PAL's *-longhorn-agg.csv) into a profile."""
    rows = import_files(list(files), out)
    click.echo(f"profile-gpus: {len(rows)} GPUs from {len(files)} files -> {out}")
    for line in _distribution(_read(out)):
        click.echo(line)


def _read(path: Path) -> list[dict[str, str]]:
    import csv
    try:
        with path.open(newline="") as fh:
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
                float(r[f"PerfVar_class{c}"])
            except (TypeError, ValueError):
                raise InputError(f"profile-gpus: {path}: line {line}: column PerfVar_class{c}: "
                                 f"{r[f'PerfVar_class{c}']!r} is not a number") from None
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
def show(profile: Path, as_json: bool, plot: Path | None) -> None:
    """Print the class of every GPU of a profile and the distribution per class."""
    rows = _read(profile)
    if as_json:
        gpus = [{"gpu": _gpu_name(r, i), "uuid": r.get("uuid") or r.get("GPU_UUID") or "",
                 "factors": {c: float(r[f"PerfVar_class{c}"]) for c in CLASSES},
                 "clusters": {c: _cluster(r, c) for c in CLASSES}} for i, r in enumerate(rows)]
        counts = {c: dict(Counter(g["clusters"][c] for g in gpus)) for c in CLASSES}
        click.echo(json.dumps({"gpus": gpus, "classes": counts}, indent=1))
    else:
        click.echo(f"{'gpu':<24} " + " ".join(f"{'class ' + c:>16}" for c in CLASSES))
        for i, r in enumerate(rows):
            cells = [f"{_cluster(r, c)} x{float(r[f'PerfVar_class{c}']):.3f}" for c in CLASSES]
            click.echo(f"{_gpu_name(r, i):<24} " + " ".join(f"{x:>16}" for x in cells))
        click.echo("")
        for line in _distribution(rows):
            click.echo(line)
    if plot is not None:
        _plot(rows, plot)


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
