"""``wattctl simulate --sweep``: the grid, resuming, the summary, the array spec."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

from slurm_plugin.cli import group
from slurm_plugin.errors import ConfigError
from slurm_plugin.sim.sweep import array_spec, load_sweep, summary

SWEEP = """
[sweep]
output = "out"
policies = ["slurm-default", "fifo-packed"]
seeds = [0, 1]
limit_jobs = 40
workers = 2
[[sweep.clusters]]
nodes = 2
gpus_per_node = 4
[[sweep.clusters]]
nodes = 4
gpus_per_node = 4
"""


def _write(tmp_path, text=SWEEP):
    path = tmp_path / "grid.toml"
    path.write_text(text)
    return path


def test_grid_is_the_product_and_keys_are_stable(tmp_path):
    sweep = load_sweep(_write(tmp_path))
    assert len(sweep.cells) == 2 * 2 * 2
    assert sweep.output == tmp_path / "out"
    again = load_sweep(_write(tmp_path))
    assert [c.key for c in sweep.cells] == [c.key for c in again.cells]
    assert len({c.key for c in sweep.cells}) == len(sweep.cells)


@pytest.mark.parametrize("line, key", [('bogus = 1', "sweep.bogus"), ('seeds = ["a"]', "sweep.seeds"),
                                       ('backend = "cloud"', "sweep.backend")])
def test_bad_sweep_files_name_the_key(tmp_path, line, key):
    with pytest.raises(ConfigError) as exc:
        load_sweep(_write(tmp_path, f"[sweep]\n{line}\n"))
    assert key in str(exc.value)


def test_local_sweep_writes_a_line_per_cell_and_resumes(tmp_path):
    path = _write(tmp_path, SWEEP.split("[[sweep.clusters]]\nnodes = 4")[0].replace("40", "20"))
    res = CliRunner().invoke(group, ["simulate", "--sweep", str(path)])
    assert res.exit_code == 0, res.output
    sweep = load_sweep(path)
    lines = [json.loads(x) for x in (sweep.output / "results.jsonl").read_text().splitlines()]
    assert [x["cell"] for x in lines] == list(range(4))
    assert all(x["result"]["jobs_finished"] == 20 for x in lines)
    assert "± " in (sweep.output / "summary.txt").read_text()
    # resume: only the cell whose file is gone runs again
    kept = sweep.cell_file(sweep.cells[0])
    stamp = kept.stat().st_mtime_ns
    sweep.cell_file(sweep.cells[3]).unlink()
    res = CliRunner().invoke(group, ["simulate", "--sweep", str(path)])
    assert res.exit_code == 0, res.output
    assert kept.stat().st_mtime_ns == stamp and sweep.cell_file(sweep.cells[3]).exists()
    again = [json.loads(x) for x in (sweep.output / "results.jsonl").read_text().splitlines()]
    for a, b in zip(lines, again):
        a["result"].pop("sim_wall_s"), b["result"].pop("sim_wall_s")
    assert again == lines       # the rerun cell gives the same numbers


def test_summary_spread_over_seeds():
    base = {"trace": "", "cluster": {}, "policy": "p", "class_mix": "all", "zone": "GB"}
    rows = summary([{**base, "seed": s, "result": {"energy_kwh": e}} for s, e in ((0, 1.0), (1, 3.0))])
    assert rows[0]["seeds"] == 2
    assert rows[0]["energy_kwh"] == {"mean": 2.0, "sd": pytest.approx(2 ** 0.5)}


def test_array_spec_compresses_runs():
    assert array_spec([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert array_spec([3], 4) == "3%4"


@pytest.mark.parametrize("squeue_out,lost,want", [
    ("0 COMPLETING\n1 COMPLETING\n2 COMPLETING\n3 COMPLETING\n", [2], None),  # old tail only
    ("2 RUNNING\n3 COMPLETING\n", [2], "77"),      # the lost cell's task still runs
    ("3 PENDING\n", [2], None),                    # a task remains, but not one for a lost cell
    ("3 PENDING\n", [2, 3], "77"),
    ("", [2], None),                               # the array left the queue
])
def test_an_array_counts_as_running_only_for_a_missing_cell(tmp_path, monkeypatch, squeue_out,
                                                            lost, want):
    import subprocess

    from slurm_plugin.sim import sweep_run

    sweep = load_sweep(_write(tmp_path))
    sweep.output.mkdir(parents=True)
    (sweep.output / "array.json").write_text(json.dumps({"job_id": "77", "cells": [0, 1, 2, 3]}))
    for c in sweep.cells:
        if c.index not in lost:
            sweep.cell_file(c).parent.mkdir(parents=True, exist_ok=True)
            sweep.cell_file(c).write_text("{}")
    seen = []

    def fake_run(argv, **_):
        seen.append(argv)
        return subprocess.CompletedProcess(argv, 0, squeue_out, "")

    monkeypatch.setattr(sweep_run.proc, "run", fake_run)
    assert sweep_run.array_running(sweep) == want
    assert seen[0][:5] == ["squeue", "-h", "-r", "-j", "77"]


@pytest.mark.parametrize("lines, key, needle", [
    ('zones = ["ATLANTIS"]', "sweep.zones = 'ATLANTIS'", "built-in zones: "),
    ('class_mixes = ["foo"]', "sweep.class_mixes = 'foo'", "not a known job class"),
    ('traces = ["nonexistent.csv"]', "sweep.traces = ", "cannot read"),
    ('trace_format = "csv"', "sweep.trace_format = 'csv'", "choose one of: philly"),
    ('policies = ["nosuch"]', "sweep.policies = 'nosuch'", "choose one of: "),
    ('[[sweep.clusters]]\nnodes = -4', "sweep.clusters.nodes = -4", "at least 1"),
    ('[[sweep.clusters]]\nnode_base_power_w = nan', "sweep.clusters.node_base_power_w = nan",
     "must be a finite number"),
    ('[[sweep.clusters]]\nnodes = 1\ngpus_per_node = 1', "sweep.traces = '(built-in)'",
     "larger than the cluster (1 nodes x 1 GPUs); give a larger cluster in [[sweep.clusters]]"),
    ('[sweep.slurm]\nmax_parallel = 0', "sweep.slurm.max_parallel = 0", "at least 1"),
])
def test_the_whole_grid_is_checked_before_any_cell_runs(tmp_path, lines, key, needle):
    # these failed only inside each cell, and the sweep said "run again to resume"
    path = _write(tmp_path, f'[sweep]\noutput = "out"\nlimit_jobs = 10\n{lines}\n')
    with pytest.raises(ConfigError) as exc:
        load_sweep(path)
    assert f"{path}: {key}" in str(exc.value) and needle in str(exc.value)
    res = CliRunner().invoke(group, ["simulate", "--sweep", str(path)])
    assert isinstance(res.exception, ConfigError) and not (tmp_path / "out").exists()


def test_a_sweep_with_a_failed_cell_exits_non_zero(tmp_path, monkeypatch, capsys):
    """Through ``wattctl``'s own entry point (click's ``Exit`` is only a return value there)."""
    import sys

    from slurm_plugin import cli
    from slurm_plugin.sim import sweep_run

    path = _write(tmp_path, '[sweep]\noutput = "out"\nlimit_jobs = 5\nworkers = 1\n')
    monkeypatch.setattr(sweep_run, "_cell_argv", lambda sweep, i: [sys.executable, "-c",
                                                                    "raise SystemExit(3)"])
    monkeypatch.setattr(sys, "argv", ["wattctl", "simulate", "--sweep", str(path)])
    with pytest.raises(SystemExit) as out:
        cli.main()
    assert out.value.code not in (0, None)
    err = capsys.readouterr().err
    assert "cell 0: command failed (exit 3)" in err and "1 failed (below)" in err


SLURM_SWEEP = """
[sweep]
output = "out"
policies = ["slurm-default", "fifo-packed"]
seeds = [0, 1]
limit_jobs = 5
backend = "slurm"
"""


def _slurm_sweep(tmp_path, monkeypatch, done, squeue_out):
    """A Slurm-backend sweep with the files of cells ``done``; ``sbatch`` and ``squeue`` answer
    as a cluster would (the gather step reads only the cell files and the array's state)."""
    import subprocess

    from slurm_plugin.sim import sweep_run
    from slurm_plugin.sim.sweep import cell_line

    path = _write(tmp_path, SLURM_SWEEP)
    sweep = load_sweep(path)
    for c in sweep.cells:
        if c.index in done:
            sweep.cell_file(c).parent.mkdir(parents=True, exist_ok=True)
            sweep.cell_file(c).write_text(json.dumps(cell_line(c, {"energy_kwh": 1.0 + c.seed})))
    calls = []

    def fake_run(argv, **_):
        calls.append(argv[0])
        out = "Submitted batch job 78\n" if argv[0] == "sbatch" else squeue_out
        return subprocess.CompletedProcess(argv, 0, out, "")

    monkeypatch.setattr(sweep_run.proc, "run", fake_run)
    return path, sweep, calls


def _wattctl(monkeypatch, capsys, *args):
    """``wattctl ARGS`` through its own entry point: (exit code, stdout, stderr)."""
    import sys

    from slurm_plugin import cli

    monkeypatch.setattr(sys, "argv", ["wattctl", *args])
    try:
        cli.main()
        code = 0
    except SystemExit as out:
        code = out.code
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("squeue_out, state", [("2 FAILED\n", "ended FAILED"),
                                               ("", "left Slurm's queue")])
def test_a_slurm_sweep_with_a_failed_task_exits_as_a_local_one_does(tmp_path, monkeypatch,
                                                                    capsys, squeue_out, state):
    # the array's task for cell 2 ended without its file: this exited 0 ("1 left")
    path, sweep, calls = _slurm_sweep(tmp_path, monkeypatch, {0, 1, 3}, squeue_out)
    code, out, err = _wattctl(monkeypatch, capsys, "simulate", "--sweep", str(path), "--json")
    assert code == 1 and calls == ["sbatch", "squeue", "squeue"]   # the local backend's code
    log = sweep.output / "logs" / "78_2.out"
    assert f"cell 2: array task 78_2 {state} without writing its cell file; its log: {log}" in err
    assert "3/4 cells" in err and "1 failed (below)" in err
    assert f"run again (wattctl simulate --sweep {path}: it submits only the missing cells)" in err
    report = json.loads(out)
    assert report["failed"] == [{"cell": 2, "key": sweep.cells[2].key, "job_id": "78",
                                 "array_task_id": 2, "slurm_job": "78_2",
                                 "state": squeue_out.split()[1] if squeue_out else None,
                                 "log": str(log), "error": report["failed"][0]["error"]}]
    assert report["left"] == [] and report["finished"] == 3 and report["job_id"] == "78"
    # what exists is written as before
    lines = [json.loads(x) for x in (sweep.output / "results.jsonl").read_text().splitlines()]
    assert [x["cell"] for x in lines] == [0, 1, 3]
    assert "± " in (sweep.output / "summary.txt").read_text()


def test_a_slurm_sweep_with_cells_still_queued_or_all_done_exits_zero(tmp_path, monkeypatch,
                                                                     capsys):
    path, sweep, calls = _slurm_sweep(tmp_path, monkeypatch, {0, 1, 3}, "2 PENDING\n")
    code, out, err = _wattctl(monkeypatch, capsys, "simulate", "--sweep", str(path), "--json")
    assert code == 0 and "1 left in Slurm job array 78 (run again to resume)" in err
    assert json.loads(out)["failed"] == [] and json.loads(out)["left"] == [2]
    sweep.cell_file(sweep.cells[2]).write_text(sweep.cell_file(sweep.cells[0]).read_text())
    calls.clear()
    code, out, err = _wattctl(monkeypatch, capsys, "simulate", "--sweep", str(path))
    assert code == 0 and calls == ["squeue"] and "4/4 cells" in err and "failed" not in err


def test_array_failures_names_cells_outside_the_array_and_other_logs(tmp_path, monkeypatch):
    from slurm_plugin.sim import sweep_run

    path, sweep, _ = _slurm_sweep(tmp_path, monkeypatch, {0, 1}, "2 RUNNING\n3 COMPLETED\n")
    (sweep.output / "array.json").write_text(json.dumps({"job_id": "78", "cells": [2, 3]}))
    failed, left = sweep_run.array_failures(sweep)
    assert left == [2] and [f["cell"] for f in failed] == [3]
    assert failed[0]["error"].startswith("array task 78_3 ended COMPLETED without writing its "
                                         "cell file; its log: ")
    sweep.cell_file(sweep.cells[1]).unlink()        # lost after the array was submitted
    failed, left = sweep_run.array_failures(sweep)
    assert [f["cell"] for f in failed] == [1, 3]
    assert failed[0]["error"] == ("its file went missing after Slurm job array 78 was submitted, "
                                  "which does not hold it")
    own = replace(sweep, sbatch_options=("--output=/elsewhere/%A_%a.log",))
    failed, _ = sweep_run.array_failures(own)
    assert failed[1]["log"] is None and failed[1]["error"].endswith(
        "its log: where [sweep.slurm] options' --output puts it")
