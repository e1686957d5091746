"""``wattctl simulate``: replay a trace through a policy (or several) and print the metrics."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from ..config import load as load_config, policy_settings
from ..errors import ConfigError, InputError
from ..physics.classes import class_mix
from ..sim.carbon import load_carbon
from ..sim.cluster import ClusterSpec, load_cluster, parse_groups
from ..sim.metrics import FIELDS
from ..policy import get_policy
from ..sim.run import (Inputs, TimelineWriter, default_trace, load_jobs,
                       oracle_metrics, period_budget, simulate as run_one)

_CLUSTER_FLAGS = ("nodes", "gpus_per_node", "gpu_type")


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 100 else f"{v:,.0f}"
    return str(v)


def table(results: list[dict[str, Any]]) -> str:
    """Side-by-side table; with several policies, a ratio to the first after each number.
    Each column is as wide as its widest cell plus two spaces, so cells never run together."""
    base = results[0]
    rows: list[tuple[str, list[str]]] = []
    for f in FIELDS[1:]:
        cells = []
        for r in results:
            v, b = r.get(f), base.get(f)
            cell = _fmt(v)
            if len(results) > 1 and r is not base and isinstance(v, (int, float)) and \
                    isinstance(b, (int, float)) and b:
                cell += f" ({v / b:.2f}x)"
            cells.append(cell)
        rows.append((f, cells))
    for extra in ("energy_over_oracle", "energy_over_shared_oracle"):
        if any(extra in r for r in results):
            rows.append((extra, [_fmt(r.get(extra)) for r in results]))
    widths = [max(14, len(r["policy"]) + 2, *(len(cells[i]) + 2 for _, cells in rows))
              for i, r in enumerate(results)]
    lines = ["metric".ljust(26) + "".join(r["policy"].rjust(w) for r, w in zip(results, widths))]
    lines += [name.ljust(26) + "".join(c.rjust(w) for c, w in zip(cells, widths))
              for name, cells in rows]
    return "\n".join(lines)


def _settings(cfg, name: str, spec: ClusterSpec, budget: dict | None) -> dict[str, Any]:
    """The policy's settings as the wrapper and the reconciler build them (``policy_settings``),
    with the simulated cluster's shards per GPU, and a period budget for the policies that
    plan to one (in a stack, theirs only)."""
    settings = dict(policy_settings(cfg, name, shards_per_gpu=spec.resolved().shards_per_gpu))
    if budget is None:
        return settings
    if "stage_settings" not in settings:
        return {**settings, **budget}
    settings["stage_settings"] = {
        n: {**s, **budget} if getattr(get_policy(n), "reads_budget", False) else s
        for n, s in settings["stage_settings"].items()}
    return settings


def _say_sharing_off(cfg, name: str) -> None:
    """eaco shares only jobs that ask to when the site's ``policy.allow_share`` is false; a
    trace's jobs ask nothing: say so once, as the live wrapper would behave."""
    if "eaco" in name.split("+") and not cfg["policy.allow_share"]:
        click.echo(f"warning: {name}: policy.allow_share = false ({cfg.source('policy.allow_share')})"
                   ": the trace's jobs do not ask to share, so eaco shares no GPU, as it would "
                   "live; set policy.allow_share = true (or WATTBATCH_POLICY_ALLOW_SHARE=true) "
                   "to simulate a site that shares by default", err=True)


def _sacct_jobs(source: str, spec: ClusterSpec, limit_jobs: int | None):
    """GPU jobs of a sacct export and what was not replayed; a job larger than the cluster is
    an input error naming its line."""
    from ..sim.trace_sacct import read_sacct

    jobs, summary = read_sacct(sys.stdin if source == "-" else source,
                               shards_per_gpu=spec.shards_per_gpu or 4, limit_jobs=limit_jobs)
    most = spec.largest_model_nodes     # a job runs on one GPU model
    for j in jobs:
        if j.num_gpus > spec.gpu_count or -(-j.num_gpus // spec.gpus_per_node) > most:
            raise InputError(f"sacct: {summary.path}: line {j.line}: job {j.job_id}: "
                             f"{j.num_gpus} GPUs is larger than the cluster ({most} nodes "
                             f"x {spec.gpus_per_node} GPUs of one model); use a larger --nodes "
                             f"or --cluster")
    return jobs, summary


def _progress_bar():
    if not sys.stderr.isatty():
        return None

    def report(done: int, total: int) -> None:
        n = int(30 * done / max(1, total))
        click.echo(f"\r[{'#' * n}{'.' * (30 - n)}] {done}/{total} jobs", err=True, nl=False)
    return report


def _plot(results: list[dict[str, Any]], timelines: dict[str, list[tuple[float, float]]],
          path: Path) -> None:
    import matplotlib       # _check_plot made sure it is there
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(10, 4))
    for name, pts in timelines.items():
        if pts:
            t0 = pts[0][0]
            ax.step([(t - t0) / 86400 for t, _ in pts], [p / 1000 for _, p in pts], where="post",
                    label=name, linewidth=0.8)
    ax.set_xlabel("days since first submission")
    ax.set_ylabel("cluster power (kW)")
    ax.legend()
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except OSError as exc:
        raise InputError(f"simulate: --plot {path}: cannot write ({exc.strerror})") from None


def _check_plot(path: Path) -> None:
    """Before any run: matplotlib is there and ``path``'s folder exists."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise click.UsageError("--plot needs matplotlib, which is not installed "
                               "(pip install matplotlib), or leave out --plot") from None
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"simulate: --plot {path}: cannot write (no folder {folder}); "
                         f"create it or give another path")


@click.command("simulate")
@click.option("--trace", "trace", type=click.Path(path_type=Path), default=None,
              help="Trace CSV (default: the built-in slice, the first 1,000 jobs of Philly "
                   "Sep-Oct 2017).")
@click.option("--from-sacct", "from_sacct", type=click.Path(allow_dash=True, dir_okay=False),
              default=None,
              help="Replay the GPU jobs of a site's accounting (`wattctl history export` "
                   "output; - for stdin) instead of --trace; the jobs not replayed are counted.")
@click.option("--trace-format", type=click.Choice(["philly", "canonical", "pollux"]),
              default="philly", show_default=True,
              help="philly: timestamp,duration,num_gpus,gpu_time,cluster. canonical: job_id,"
                   "submit_s,duration_s,num_gpus[,user,app,deadline_s,min_gpus,max_gpus,"
                   "time_limit_s]. pollux: name,time,application,num_replicas,batch_size "
                   "(Pollux workload files; elastic jobs, docs/elastic.md).")
@click.option("--nodes", type=click.IntRange(1), default=None, help="Nodes  [default: 64]")
@click.option("--gpus-per-node", type=click.IntRange(1), default=None, help="GPUs per node  [default: 8]")
@click.option("--gpu-type", default=None,
              help="GPU model of every GPU: any catalogued model, by name, NVML name or alias "
                   "(V100, A100, H100, ...; `wattctl gpu-models` lists them); or node groups "
                   "of several models, MODEL:NODES comma-separated in node order (V100:16,"
                   "A100:32; no --nodes with it)  [default: V100]")
@click.option("--cluster", "cluster_file", type=click.Path(path_type=Path), default=None,
              help="Cluster TOML ([cluster] nodes, gpus_per_node, gpu_type, shards_per_gpu, "
                   "node_base_power_w, backfill_depth, bf_interval_s, sched_interval_s, "
                   "time_limit_rule, time_limit_factor_max, reconcile_interval_s, suspend_time_s, "
                   "resume_delay_s, suspended_power_w, restart_cost_s, nodes_per_switch, "
                   "deferrable_share, slack_s; [[cluster.groups]] nodes, gpu_type for several "
                   "GPU models; see docs/simulator.md, docs/gpu-models.md); not with "
                   "--nodes/--gpus-per-node/--gpu-type.")
@click.option("--policy", default=None, help="Policy name (see `wattctl policies`).")
@click.option("--compare", default=None,
              help="Comma-separated policies run on the same inputs, shown side by side with "
                   "ratios to the first (e.g. slurm-default,fifo-packed,oracle-bound).")
@click.option("--loads", "loads_text", default=None,
              help="Run the policies at three cluster sizes chosen from slurm-default's own "
                   "run: average queue wait about zero, a few hours, more than a day (auto), or "
                   "at the node counts given (128,84,64); each figure beside its bound and the "
                   "share of the headroom between the first policy and the bound it captures "
                   "(docs/simulator.md). Not with --nodes or node groups.")
@click.option("--carbon", "carbon_file", type=click.Path(path_type=Path), default=None,
              help="Carbon-intensity CSV (Electricity Maps hourly or Time,Carbon Intensity). "
                   "Aligned to the trace by hour of week from the series' first full week "
                   "(Monday 00:00 UTC), wrapping around. Default: a built-in January 2023 slice.")
@click.option("--carbon-budget-kg", "budget_kg", type=click.FloatRange(0), default=None,
              help="GreenFlow's carbon budget (kg CO2e) for the whole simulated period, from the "
                   "first to the last submission (replaces the site's per-period budget).")
@click.option("--zone", default=None,
              help="Carbon zone (default: the --carbon file's Zone Id, else site carbon.zone; "
                   "built-in: GB, DE-LU). Case does not matter.")
@click.option("--carbon-basis", "carbon_basis", type=click.Choice(["lca", "direct"]),
              default="lca", show_default=True,
              help="Which intensity of an Electricity Maps file: life-cycle or direct emissions.")
@click.option("--variability", "variability_file", type=click.Path(path_type=Path), default=None,
              help="Per-GPU variability profile CSV (PerfVar_classA..D columns: PAL's "
                   "32gpu-variability.csv or one written by `wattctl profile-gpus import`); "
                   "rows spread over the GPUs in a seeded shuffle, cycling (docs/pal.md); "
                   "off unless given.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the job-class assignment and variability placement.")
@click.option("--class-mix", "mix_spec", default="all", show_default=True,
              help="Classes drawn (uniformly, seeded) for trace jobs that name no app: 'all' "
                   "(the 8 measured classes), 'eaco-paper' (alexnet,resnet18,vgg16: the measured "
                   "classes among the EaCO paper's workloads) or comma-separated class names.")
@click.option("--limit-jobs", type=click.IntRange(1), default=None, help="Only the first N jobs by submit time.")
@click.option("--repeat", type=click.IntRange(1), default=1, show_default=True,
              help="Overlay K copies of the trace on its own span (copy i submits each job i/K "
                   "of the span later; ids renumbered): the same workload at K times the "
                   "arrival rate, e.g. --repeat 19 --nodes 10000 makes the Philly trace a "
                   "million jobs on a large site (docs/scale.md).")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object (a list with --compare; with --sweep: the summary, "
                   "the failed cells and those left).")
@click.option("--timeline", "timeline_file", type=click.Path(path_type=Path), default=None,
              help="Write the power/occupancy timeline CSV (one row per interval between events; "
                   "with --compare, one file per policy: NAME inserted before the suffix).")
@click.option("--plot", "plot_file", type=click.Path(path_type=Path), default=None,
              help="Plot cluster power over time to a PNG (needs matplotlib).")
@click.option("--sweep", "sweep_file", type=click.Path(path_type=Path), default=None,
              help="Run the grid of a sweep TOML file (policies x seeds x zones x clusters x "
                   "traces; see docs/simulator.md): cells already done are skipped; one JSON "
                   "line per cell in OUTPUT/results.jsonl and a summary with the spread over "
                   "seeds; exit 1 when a cell failed. Other flags but --json are ignored.")
@click.option("--backend", type=click.Choice(["local", "slurm"]), default=None,
              help="With --sweep: local cores, or one Slurm job array (default: the file's).")
@click.option("--workers", type=click.IntRange(1), default=None,
              help="With --sweep local: cells at once (default: the file's, else the cores).")
@click.option("--wait-s", type=click.FloatRange(0), default=0.0, show_default=True,
              help="With --sweep on Slurm: wait up to this long for the array, then gather.")
@click.option("--sweep-cell", type=click.IntRange(0), default=None, hidden=True)
def simulate(trace: Path | None, from_sacct: str | None, trace_format: str, nodes: int | None,
             gpus_per_node: int | None,
             gpu_type: str | None, cluster_file: Path | None, policy: str | None, compare: str | None,
             loads_text: str | None, carbon_file: Path | None, budget_kg: float | None, zone: str | None,
             carbon_basis: str, variability_file: Path | None, seed: int,
             mix_spec: str, limit_jobs: int | None, repeat: int, as_json: bool, timeline_file: Path | None,
             plot_file: Path | None, sweep_file: Path | None, backend: str | None,
             workers: int | None, wait_s: float, sweep_cell: int | None) -> None:
    """Replay a GPU job trace through scheduling policies with calibrated GPU physics.

    Energy integrates every GPU (idle ones too) and node base power; carbon multiplies it by the
    carbon series aligned to the trace by hour of week from the series' first full week,
    wrapping around. The same inputs and --seed give the same numbers.
    """
    if sweep_file is not None:
        _sweep(sweep_file, backend, workers, wait_s, sweep_cell, as_json)
        return
    if (policy is None) == (compare is None):
        raise click.UsageError("give exactly one of --policy NAME or --compare A,B,...")
    if trace is not None and from_sacct is not None:
        raise click.UsageError("give --trace FILE or --from-sacct FILE, not both")
    if repeat > 1 and from_sacct is not None:
        raise click.UsageError(f"--repeat {repeat} overlays copies of a --trace; an accounting "
                               "replay (--from-sacct) runs as it is")
    names = [policy] if policy else [p.strip() for p in compare.split(",")]
    if compare is not None and (not all(names) or len(set(names)) < len(names)):
        raise click.UsageError(f"--compare {compare!r}: give each policy once, comma-separated, "
                               "with no empty name (e.g. --compare slurm-default,eaco)")
    if plot_file is not None:
        _check_plot(plot_file)
    if loads_text is not None and (nodes is not None or from_sacct is not None
                                   or timeline_file is not None or budget_kg is not None):
        raise click.UsageError("--loads chooses the cluster sizes and runs the trace as it is: "
                               "leave out --nodes, --from-sacct, --timeline and "
                               "--carbon-budget-kg")
    if cluster_file is not None:
        if any(v is not None for v in (nodes, gpus_per_node, gpu_type)):
            raise click.UsageError("--cluster FILE replaces --nodes/--gpus-per-node/--gpu-type; "
                                   "give one or the other")
        spec = load_cluster(cluster_file)
    else:
        try:
            groups = parse_groups(gpu_type or "")
        except ValueError as exc:
            raise click.BadParameter(f"{gpu_type!r}: {exc}", param_hint="'--gpu-type'") from None
        if groups and nodes is not None:
            raise click.UsageError(f"--gpu-type {gpu_type} gives the nodes of each model; "
                                   f"leave out --nodes")
        spec = ClusterSpec(nodes=nodes or 64, gpus_per_node=gpus_per_node or 8,
                           gpu_type=gpu_type or "V100", groups=groups)
        if gpu_type is not None:
            try:
                spec.resolved()
            except ConfigError as exc:
                raise click.BadParameter(f"{exc.value!r}: {exc.fix}",
                                         param_hint="'--gpu-type'") from None
    spec.resolved()
    mix = class_mix(mix_spec)
    cfg = load_config()
    for name in names:
        get_policy(name, "--policy" if policy else "--compare")
        _say_sharing_off(cfg, name)
    inputs = Inputs(trace=trace or default_trace(), trace_format=trace_format, spec=spec,
                    zone=zone or ("" if carbon_file is not None else cfg["carbon.zone"]),
                    carbon=carbon_file,
                    variability=variability_file, seed=seed, limit_jobs=limit_jobs,
                    class_mix=mix, repeat=repeat)
    sacct = None
    if from_sacct is not None:
        jobs, sacct = _sacct_jobs(from_sacct, spec, limit_jobs)
        inputs = replace(inputs, trace=Path(from_sacct), trace_format="sacct")
    else:
        jobs = load_jobs(inputs)
        for w in getattr(jobs, "warnings", ()):
            click.echo(f"warning: {w}", err=True)
    carbon = load_carbon(inputs.carbon, inputs.zone, jobs[0].submit_s, carbon_basis,  # type: ignore[arg-type]
                         default_zone=cfg["carbon.zone"])
    for w in carbon.warnings:
        click.echo(f"warning: {w}", err=True)
    if loads_text is not None:
        from .simulate_loads import run_loads
        run_loads(loads_text, names, inputs, jobs, cfg, carbon,
                  lambda name, at: _settings(cfg, name, at, None), as_json, plot_file)
        return
    if budget_kg is not None:
        for name in names:
            if not getattr(get_policy(name), "reads_budget", False):
                click.echo(f"warning: {name} plans to no carbon budget: --carbon-budget-kg "
                           f"changes nothing for it (only its carbon_over_budget is reported)",
                           err=True)
    results, timelines = [], {}
    for name in names:
        writer = None
        series: list[tuple[float, float]] = []
        if timeline_file is not None:
            path = timeline_file if len(names) == 1 else \
                timeline_file.with_name(f"{timeline_file.stem}-{name}{timeline_file.suffix}")
            writer = TimelineWriter(path)

        def record(row: dict[str, float], writer=writer, series=series) -> None:
            if writer is not None:
                writer(row)
            if plot_file is not None:
                series.append((row["time_s"], row["power_w"]))
        want = writer is not None or plot_file is not None
        try:
            settings = _settings(cfg, name, spec, period_budget(jobs, budget_kg)
                                 if budget_kg is not None else None)
            r = run_one(inputs, name, settings=settings, jobs=jobs,
                        carbon=carbon, timeline=record if want else None,
                        progress=_progress_bar())
        finally:
            if writer is not None:
                writer.close()
        if sys.stderr.isatty():
            click.echo("\r" + " " * 60 + "\r", err=True, nl=False)
        if sacct is not None:
            r["sacct"] = sacct.as_dict()
        results.append(r)
        timelines[name] = series
    for r in results:
        if carbon.warnings:
            r["carbon_warnings"] = list(carbon.warnings)
        if budget_kg is not None:
            r["carbon_budget_kg"] = budget_kg
            r["carbon_over_budget"] = r["carbon_kg"] / budget_kg if budget_kg else None
            if r["carbon_kg"] > budget_kg * 1.01 and \
                    getattr(get_policy(r["policy"]), "reads_budget", False):
                click.echo(f"warning: {r['policy']}: {r['carbon_kg']:,.1f} kg CO2e, over the "
                           f"budget of {budget_kg:,.1f} kg"
                           + (f" ({r['carbon_kg'] / budget_kg:.2f}x)" if budget_kg else "")
                           + ": a budget shifts, caps and slows jobs, it never rejects one",
                           err=True)
        if r.get("jobs_timed_out"):
            click.echo(f"warning: {r['policy']}: {r['jobs_timed_out']:,} of {r['jobs']:,} jobs "
                       f"killed at their time limits (run slower than their limits allow): "
                       f"their JCT ends at the kill, their work undone, so its JCT figures "
                       f"flatter it", err=True)
    oracle = next((r for r in results if r.get("bound")), None) or \
        oracle_metrics(jobs, spec.resolved(), carbon, seed, mix)
    limit = int(cfg.section("eaco").get("max_jobs_per_gpu", 4))
    shared = oracle_metrics(jobs, spec.resolved(), carbon, seed, mix, max_jobs_per_gpu=limit)
    for r in results:
        if oracle["energy_kwh"]:
            r["energy_over_oracle"] = r["energy_kwh"] / oracle["energy_kwh"]
        if shared["energy_kwh"]:
            r["energy_over_shared_oracle"] = r["energy_kwh"] / shared["energy_kwh"]
    if plot_file is not None:
        _plot(results, timelines, plot_file)
    if as_json:
        click.echo(json.dumps(results[0] if policy else results, indent=1, sort_keys=False))
    else:
        if sacct is not None:
            click.echo(sacct.line())
        click.echo(table(results))



def _cells_bar(done: int, total: int) -> None:
    """One progress line for a sweep, redrawn in place on stderr."""
    n = int(30 * done / max(1, total))
    click.echo(f"\r[{'#' * n}{'.' * (30 - n)}] {done}/{total} cells", err=True, nl=False)


def _sweep(path: Path, backend: str | None, workers: int | None, wait_s: float,
           cell: int | None, as_json: bool = False) -> None:
    from ..sim.sweep import load_sweep, summary
    from ..sim.sweep_run import (array_failures, gather, run_cell, run_local, submit_array,
                                 wait_array)
    sweep = load_sweep(path)
    if cell is not None:
        run_cell(sweep, cell)
        return
    for name in {c.policy for c in sweep.cells}:
        get_policy(name, f"{path}: sweep.policies")
    report = _cells_bar if _progress_bar() is not None else None
    on_slurm = (backend or sweep.backend) == "slurm"
    job: str | None = None
    failed: list[dict[str, Any]] = []
    left: list[int] = []
    if on_slurm:
        job = submit_array(sweep)
        if job:
            click.echo(f"sweep: {len(sweep.missing())} cells in Slurm job array {job}", err=True)
        wait_array(sweep, wait_s, progress=report)
    else:
        failed = run_local(sweep, workers, report)
    if report is not None:
        click.echo("", err=True)
    lines, table = gather(sweep)
    if on_slurm:        # a missing cell no task can still write failed, as a local one does
        failed, left = array_failures(sweep)
    rerun = f"wattctl simulate --sweep {sweep.path}" + (f" --backend {backend}" if backend else "")
    results = sweep.output / "results.jsonl"
    if as_json:
        click.echo(json.dumps({"sweep": str(sweep.path),
                               "backend": "slurm" if on_slurm else "local", "job_id": job,
                               "cells": len(sweep.cells), "finished": len(lines),
                               "results": str(results), "summary": summary(lines),
                               "failed": failed, "left": left}, indent=1))
    else:
        click.echo(table)
    notes = []
    if failed:
        notes.append(f"{len(failed)} failed (below): fix the cause, then run again"
                     + (f" ({rerun}: it submits only the missing cells)" if on_slurm else ""))
    if left:
        notes.append(f"{len(left)} left" + (f" in Slurm job array {job}" if job else "")
                     + " (run again to resume)")
    click.echo(f"sweep: {len(lines)}/{len(sweep.cells)} cells in {results}"
               + "".join(f"; {n}" for n in notes), err=True)
    for f in failed:
        click.echo(f"sweep: cell {f['cell']}: {f['error']}", err=True)
    if failed:
        raise click.exceptions.Exit(1)
