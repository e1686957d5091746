"""Running a sweep (``sweep``): one cell in this process, the grid on local cores, or the grid
as one Slurm job array. Every backend runs each cell as ``wattctl simulate --sweep FILE
--sweep-cell N``, which writes the cell's file; results are gathered from those files."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable

from .. import proc
from ..config import load as load_config, policy_settings
from ..errors import CommandError, InputError
from ..physics.classes import class_mix
from .carbon import load_carbon
from .cluster import check_cluster
from .run import Inputs, default_trace, load_jobs, oracle_metrics, simulate
from .sweep import Sweep, array_script, array_spec, cell_line, read_cells, summary, summary_table


def _cell_argv(sweep: Sweep, index: int) -> list[str]:
    return [sys.executable, "-m", "slurm_plugin.cli", "simulate", "--sweep", str(sweep.path),
            "--sweep-cell", str(index)]


def run_cell(sweep: Sweep, index: int) -> Path:
    """Simulate cell ``index`` and write its line to its file (atomically: a killed task leaves
    no half file, so a rerun does it again)."""
    if not 0 <= index < len(sweep.cells):
        raise InputError(f"sweep: {sweep.path}: cell {index} does not exist "
                         f"(the grid has {len(sweep.cells)} cells: 0..{len(sweep.cells) - 1})")
    cell = sweep.cells[index]
    spec = check_cluster(str(sweep.path), cell.cluster, "sweep.clusters")
    mix = class_mix(cell.class_mix)
    inputs = Inputs(trace=Path(cell.trace) if cell.trace else default_trace(),
                    trace_format=sweep.trace_format, spec=spec, zone=cell.zone, seed=cell.seed,
                    limit_jobs=sweep.limit_jobs, class_mix=mix)
    cfg = load_config()
    jobs = load_jobs(inputs)
    carbon = load_carbon(None, cell.zone, jobs[0].submit_s)
    settings = policy_settings(cfg, cell.policy, shards_per_gpu=spec.resolved().shards_per_gpu)
    result = simulate(inputs, cell.policy, settings=settings, jobs=jobs, carbon=carbon)
    limit = int(cfg.section("eaco").get("max_jobs_per_gpu", 4))
    for name, bound in (("energy_over_oracle", None), ("energy_over_shared_oracle", limit)):
        ref = oracle_metrics(jobs, spec.resolved(), carbon, cell.seed, mix, bound)["energy_kwh"]
        if ref:
            result[name] = result["energy_kwh"] / ref
    out = sweep.cell_file(cell)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(cell_line(cell, result)) + "\n")
    tmp.replace(out)
    return out


def run_local(sweep: Sweep, workers: int | None = None,
              progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """Run the missing cells on local cores, ``workers`` at once; returns one failure per
    failed cell (``cell``, ``key``, ``error``; the others' files are written)."""
    todo = sweep.missing()
    total, done = len(sweep.cells), len(sweep.cells) - len(todo)
    errors: list[dict[str, Any]] = []
    if progress:
        progress(done, total)
    n = workers or sweep.workers or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=n) as pool:
        futures = {pool.submit(proc.run, _cell_argv(sweep, c.index), timeout_s=24 * 3600): c
                   for c in todo}
        for fut in as_completed(futures):
            try:
                fut.result()
            except CommandError as exc:
                cell = futures[fut]
                errors.append({"cell": cell.index, "key": cell.key, "error": str(exc)})
            done += 1
            if progress:
                progress(done, total)
    return sorted(errors, key=lambda e: e["cell"])


# ---------------------------------------------------------------- the Slurm job array
def _state_file(sweep: Sweep) -> Path:
    return sweep.output / "array.json"


def _array_state(sweep: Sweep) -> tuple[str, list[int]]:
    """The job id of the sweep's last array and the cells it was given ("" and []: none)."""
    try:
        state = json.loads(_state_file(sweep).read_text())
    except (OSError, ValueError):
        return "", []
    cells = state.get("cells", [])
    given = [c for c in cells if isinstance(c, int)] if isinstance(cells, list) else []
    return str(state.get("job_id", "")), given


def _array_tasks(job: str) -> dict[str, str]:
    """Slurm's state of each task of array ``job`` that its queue still holds (task id, or a
    pending range Slurm did not expand, -> state); empty once squeue no longer knows the job."""
    out = proc.run(["squeue", "-h", "-r", "-j", job, "-o", "%K %T"], check=False, timeout_s=60)
    if out.returncode != 0:
        return {}
    return {task: state.strip() for task, state in
            (ln.split(None, 1) for ln in out.stdout.splitlines() if " " in ln)}


def array_running(sweep: Sweep) -> str | None:
    """The job id of this sweep's array while Slurm still holds a task of it that can still
    write a missing cell (pending, running, ...), else None. A task that is only completing,
    or one whose cell file is there, does not count: a rerun after a cell was lost must not
    wait on the old array's tail."""
    job, _ = _array_state(sweep)
    if not job:
        return None
    missing = {c.index for c in sweep.missing()}
    for task, slurm_state in _array_tasks(job).items():
        if slurm_state in _ENDING:
            continue
        if not task.isdigit() or int(task) in missing:
            return job
    return None


_ENDING = frozenset({"COMPLETING", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT",
                     "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY"})


def array_failures(sweep: Sweep) -> tuple[list[dict[str, Any]], list[int]]:
    """The missing cells after an array: those no task of it can still write (failed: one dict
    each with ``cell``, ``key``, ``error`` and, for a cell the array was given, ``job_id``,
    ``array_task_id`` (the cell's index), ``slurm_job`` (JOB_TASK), ``state`` (Slurm's, while
    its queue still shows the task) and ``log``), and those a queued or running task still may
    write (left: their indexes)."""
    missing = sweep.missing()
    if not missing:
        return [], []
    job, given = _array_state(sweep)
    tasks = _array_tasks(job) if job else {}
    unexpanded = any(not t.isdigit() and s not in _ENDING for t, s in tasks.items())
    own_log = not any(o.startswith(("--output", "-o")) for o in sweep.sbatch_options)
    failed: list[dict[str, Any]] = []
    left: list[int] = []
    for cell in missing:
        state = tasks.get(str(cell.index))
        if cell.index in given and (unexpanded or (state and state not in _ENDING)):
            left.append(cell.index)
            continue
        if cell.index not in given:
            failed.append({"cell": cell.index, "key": cell.key, "error":
                           f"its file went missing after Slurm job array {job} was submitted, "
                           f"which does not hold it" if job else
                           "no Slurm job array was submitted for it"})
            continue
        log = sweep.output / "logs" / f"{job}_{cell.index}.out" if own_log else None
        if log is None:
            where = "where [sweep.slurm] options' --output puts it"
        else:
            where = str(log) if log.exists() else \
                f"{log} (not there: the task may never have started)"
        ended = f"ended {state}" if state else "left Slurm's queue"
        failed.append({"cell": cell.index, "key": cell.key, "job_id": job,
                       "array_task_id": cell.index, "slurm_job": f"{job}_{cell.index}",
                       "state": state, "log": str(log) if log else None,
                       "error": f"array task {job}_{cell.index} {ended} without writing its "
                                f"cell file; its log: {where}"})
    return failed, left


def submit_array(sweep: Sweep) -> str | None:
    """Submit the missing cells as one job array (through ``sbatch`` or ``wattbatch``), unless
    the sweep's array is still in Slurm's queue; returns the array's job id (None: nothing to
    do)."""
    running = array_running(sweep)
    if running:
        return running
    todo = [c.index for c in sweep.missing()]
    if not todo:
        return None
    logs = sweep.output / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    script = sweep.output / "array.sbatch"
    script.write_text(array_script(sys.executable, sweep.path, logs))
    argv = [sweep.submit, f"--array={array_spec(todo, sweep.max_parallel)}",
            f"--chdir={sweep.path.parent}", *sweep.sbatch_options, str(script)]
    out = proc.run(argv, timeout_s=120)
    m = re.search(r"Submitted batch job (\d+)", out.stdout)
    if not m:
        raise CommandError(argv, 0, f"no job id in the output: {out.stdout.strip()!r}")
    _state_file(sweep).write_text(json.dumps({"job_id": m.group(1), "cells": todo}) + "\n")
    return m.group(1)


def wait_array(sweep: Sweep, timeout_s: float, poll_s: float = 5.0,
               progress: Callable[[int, int], None] | None = None) -> None:
    """Wait until every cell has its file or the array left the queue (failed tasks: their
    cells stay missing, and a rerun submits them again)."""
    end = time.monotonic() + timeout_s
    total = len(sweep.cells)
    while True:
        left = len(sweep.missing())
        if progress:
            progress(total - left, total)
        if not left or array_running(sweep) is None or time.monotonic() > end:
            return
        time.sleep(poll_s)


def gather(sweep: Sweep) -> tuple[list[dict[str, Any]], str]:
    """Write ``results.jsonl`` (finished cells) and ``summary.txt``; return the lines and the
    summary table."""
    lines = read_cells(sweep)
    sweep.output.mkdir(parents=True, exist_ok=True)
    with (sweep.output / "results.jsonl").open("w") as fh:
        for line in lines:
            fh.write(json.dumps(line) + "\n")
    table = summary_table(summary(lines))
    (sweep.output / "summary.txt").write_text(table + "\n")
    return lines, table
