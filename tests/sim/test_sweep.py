"""``wattctl simulate --sweep``: the grid, resuming, the summary, the array spec."""

from __future__ import annotations

import json

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
