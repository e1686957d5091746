"""``wattctl simulate --sweep`` with the Slurm backend: one job array on the real cluster,
results gathered from the cell files, a task that ended without its cell fails the command (as a
failed cell does on local cores), and a rerun that submits only the missing cells."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from slurm_plugin.cli import group
from slurm_plugin.proc import run
from slurm_plugin.sim.sweep import load_sweep

pytestmark = pytest.mark.cluster

SWEEP = """
[sweep]
output = "out"
policies = ["slurm-default", "fifo-packed"]
seeds = [0, 1]
limit_jobs = 20
backend = "slurm"
[sweep.slurm]
options = ["--time=5"]
[[sweep.clusters]]
nodes = 2
gpus_per_node = 4
"""


def test_array_backend_runs_every_cell_and_resumes(localcluster, tmp_path):
    path = tmp_path / "grid.toml"
    path.write_text(SWEEP)
    res = CliRunner().invoke(group, ["simulate", "--sweep", str(path), "--wait-s", "240"])
    assert res.exit_code == 0, res.output
    sweep = load_sweep(path)
    first = json.loads((sweep.output / "array.json").read_text())
    assert first["cells"] == [0, 1, 2, 3]
    lines = [json.loads(x) for x in (sweep.output / "results.jsonl").read_text().splitlines()]
    assert [x["cell"] for x in lines] == [0, 1, 2, 3]
    assert all(x["result"]["jobs_finished"] == 20 for x in lines)
    # one result lost: the rerun submits a new array holding only that cell
    sweep.cell_file(sweep.cells[2]).unlink()
    res = CliRunner().invoke(group, ["simulate", "--sweep", str(path), "--wait-s", "240"])
    assert res.exit_code == 0, res.output
    second = json.loads((sweep.output / "array.json").read_text())
    assert second["cells"] == [2] and second["job_id"] != first["job_id"]
    assert sweep.cell_file(sweep.cells[2]).exists()
    # all done: a third run submits nothing and only gathers
    res = CliRunner().invoke(group, ["simulate", "--sweep", str(path)])
    assert res.exit_code == 0, res.output
    assert json.loads((sweep.output / "array.json").read_text()) == second


def test_a_task_that_ends_without_its_cell_fails_the_sweep(localcluster, tmp_path):
    path = tmp_path / "grid.toml"
    path.write_text(SWEEP.replace('options = ["--time=5"]', 'options = ["--time=5", "--hold"]'))
    # held: every cell is still queued, which is not a failure
    res = CliRunner().invoke(group, ["simulate", "--sweep", str(path)])
    assert res.exit_code == 0 and "4 left in Slurm job array" in res.stderr, res.output
    sweep = load_sweep(path)
    job = json.loads((sweep.output / "array.json").read_text())["job_id"]
    # cell 2's task is cancelled before it starts; the others run
    run(["scancel", f"{job}_2"], env=localcluster.env, timeout_s=30)
    run(["scontrol", "release", job], env=localcluster.env, timeout_s=30)
    res = CliRunner().invoke(group, ["simulate", "--sweep", str(path), "--wait-s", "240",
                                     "--json"])
    assert res.exit_code == 1, res.output       # the local backend's code for a failed cell
    report = json.loads(res.stdout)
    assert [(f["cell"], f["slurm_job"]) for f in report["failed"]] == [(2, f"{job}_2")]
    assert report["left"] == [] and report["finished"] == 3
    log = sweep.output / "logs" / f"{job}_2.out"
    assert f"sweep: cell 2: array task {job}_2 " in res.stderr and str(log) in res.stderr
    assert "1 failed (below)" in res.stderr and "submits only the missing cells" in res.stderr
    lines = [json.loads(x) for x in (sweep.output / "results.jsonl").read_text().splitlines()]
    assert [x["cell"] for x in lines] == [0, 1, 3]      # what finished is gathered all the same
    # the cause gone, the rerun submits only that cell and succeeds
    path.write_text(SWEEP)
    res = CliRunner().invoke(group, ["simulate", "--sweep", str(path), "--wait-s", "240"])
    assert res.exit_code == 0, res.output
    second = json.loads((sweep.output / "array.json").read_text())
    assert second["cells"] == [2] and second["job_id"] != job
    lines = [json.loads(x) for x in (sweep.output / "results.jsonl").read_text().splitlines()]
    assert [x["cell"] for x in lines] == [0, 1, 2, 3]
