"""``wattctl snapshot`` on recorded output of each release, and its errors."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from slurm_plugin.cli import group, main


def snapshot(*args):
    return CliRunner().invoke(group, ["snapshot", *args])


@pytest.mark.parametrize("release", ["22.05", "24.11", "26.05"])
def test_json_of_recorded_output(golden_dir, release):
    d = golden_dir / "slurm" / release
    ids = json.loads((d / "COMMANDS.txt").read_text().splitlines()[1].split(": ", 1)[1])
    done = snapshot("--json", "--squeue-json", str(d / "squeue.json"),
                    "--nodes-json", str(d / "nodes.json"))
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert data["slurm"]["release"].startswith(release)
    jobs = {j["name"]: j for j in data["jobs"]}
    assert set(jobs) == set(ids)
    two = jobs["twonode"]
    assert two["uses"] == [["gpu3", 3, 0], ["gpu4", 3, 0]] and two["num_nodes"] == 2
    assert jobs["fail3"]["state"] == "FAILED" and jobs["fail3"]["exit_code"] == 3
    assert jobs["later"]["reason"] == "BeginTime" and jobs["held"]["start_s"] is None
    gpus = {(n["name"], g["index"]): g for n in data["nodes"] for g in n["gpus"]}
    assert gpus[("gpu1", 0)]["exclusive_job"] == ids["big"]
    assert gpus[("gpu2", 3)]["shard_jobs"] == [ids["shardA"], ids["shardB"]]


def test_text_output_names_release_and_holders(golden_dir):
    d = golden_dir / "slurm" / "24.11"
    done = snapshot("--squeue-json", str(d / "squeue.json"), "--nodes-json", str(d / "nodes.json"))
    assert done.exit_code == 0, done.output
    assert done.output.startswith("Slurm 24.11.5 (data_parser v0.0.42): 4 nodes, 18 jobs")
    assert "shards 3/4" in done.output and "TIMEOUT" in done.output


def test_errors_name_the_file_and_the_fix(golden_dir, tmp_path, capsys, monkeypatch):
    d = golden_dir / "slurm" / "24.11"
    assert snapshot("--squeue-json", str(d / "squeue.json")).exit_code != 0   # one of two
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    monkeypatch.setattr("sys.argv", ["wattctl", "snapshot", "--squeue-json", str(bad),
                                     "--nodes-json", str(d / "nodes.json")])
    with pytest.raises(SystemExit) as exit_:
        main()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and str(bad) in err and "not JSON" in err
    monkeypatch.setattr("sys.argv", ["wattctl", "snapshot", "--squeue-json",
                                     str(d / "squeue.json"), "--nodes-json", str(d / "sinfo.json")])
    with pytest.raises(SystemExit):
        main()
    err = capsys.readouterr().err
    assert "Slurm 24.11.5" in err and "scontrol --json show nodes" in err
    assert "Traceback" not in err


def test_a_record_that_cannot_be_read_is_left_out_with_a_warning(golden_dir, tmp_path):
    d = golden_dir / "slurm" / "22.05"
    squeue = json.loads((d / "squeue.json").read_text())
    running = next(j for j in squeue["jobs"] if j["job_state"] == "RUNNING")
    running["job_resources"]["allocated_nodes"][0]["nodename"] = ["gpu1"]
    bad = tmp_path / "squeue.json"
    bad.write_text(json.dumps(squeue))
    args = ("--squeue-json", str(bad), "--nodes-json", str(d / "nodes.json"))
    data = json.loads(snapshot("--json", *args).output)
    (warning,) = data["warnings"]
    assert f"field job_resources.allocated_nodes[0].nodename (of {running['job_id']})" in warning
    assert len(data["jobs"]) == len(squeue["jobs"]) - 1 and len(data["nodes"]) == 4
    done = snapshot(*args)
    assert done.exit_code == 0 and f"warning: {warning}" in done.output
