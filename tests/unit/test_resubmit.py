"""Submitting a forgotten job again from the accounting (``slurm/resubmit.py``), over sacct's
output as Slurm 22.05 prints it (recorded on the local cluster)."""

from __future__ import annotations

import pytest

from slurm_plugin.errors import InputError
from slurm_plugin.proc import Completed
from slurm_plugin.slurm import resubmit as rs

CFG = None      # the commands are faked: no site config is read
ROW = ("3007|alice|users|rs-test|gpu|physics|normal|10|/home/alice/run|1|"
       "billing=1,cpu=1,gres/gpu=2,mem=62.50G,node=1||my note|"
       "sbatch --parsable -p gpu -t 10 -o /tmp/rs-%j.out -n 2 --mail-type END /tmp/j.sh a b")
SCRIPT = ("Batch Script for 3007\n" + "-" * 80 + "\n#!/bin/bash\n#SBATCH --gres=gpu:1\n"
          "echo $WATTBATCH_CHECKPOINT_DIR\n\n")
ENV = ("Environment used for 3007 (must be batch to display)\n" + "-" * 80 +
       "\nFOO=bar\nMULTI=line one\nline two\nSHELL=/bin/bash\n")


def _fake(monkeypatch, row=ROW, script=SCRIPT, env=ENV):
    calls = []

    def slurm(cmd, args, cfg, input_text=None, **kw):
        calls.append((cmd, list(args), input_text))
        if cmd == "sacct":
            out = script if "--batch-script" in args else env if "--env-vars" in args else row
        elif cmd == "squeue":
            out = "12|wattbatch: resubmission of job 30\n13|wattbatch: resubmission of job 3007; x\n"
        else:
            out = "4242\n"
        return Completed([cmd, *args], 0, out, "")
    monkeypatch.setattr(rs, "slurm", slurm)
    monkeypatch.setattr("slurm_plugin.slurm.actions.slurm", slurm)
    return calls


def test_the_request_script_and_environment_come_from_the_accounting(monkeypatch):
    _fake(monkeypatch)
    lost = rs.lost_job("3007", CFG)
    assert lost.user == "alice" and lost.group == "users" and lost.comment == "my note"
    assert lost.script == "#!/bin/bash\n#SBATCH --gres=gpu:1\necho $WATTBATCH_CHECKPOINT_DIR\n\n"
    assert lost.env == ("FOO=bar", "MULTI=line one\nline two", "SHELL=/bin/bash")
    assert lost.gres_per_node == "gpu:2" and lost.num_nodes == 1
    assert lost.options == ("--job-name=rs-test", "--nodes=1", "--partition=gpu",
                            "--account=physics", "--qos=normal", "--chdir=/home/alice/run",
                            "--time=10", "--mem=64000M", "--output=/tmp/rs-%j.out",
                            "--ntasks=2", "--mail-type=END")


def test_resubmit_as_the_user_with_the_journal_count_and_its_environment(monkeypatch):
    calls = _fake(monkeypatch)
    monkeypatch.setattr(rs.os, "geteuid", lambda: 0)
    env_files = []
    lost = rs.lost_job("3007", CFG)
    from slurm_plugin.slurm import actions
    orig = actions.submit

    def submit(argv, script, cfg):
        env_file = next(a.partition("=")[2] for a in argv if a.startswith("--export-file="))
        env_files.append(open(env_file).read())
        return orig(argv, script, cfg)
    monkeypatch.setattr(actions, "submit", submit)
    assert rs.resubmit(lost, CFG, gpus=4, num_nodes=2) == "4242"
    cmd, argv, script = calls[-1]
    assert cmd == "sbatch" and script == lost.script
    assert "--nodes=2" in argv and "--nodes=1" not in argv and "--gres=gpu:4" in argv
    assert "--uid=alice" in argv and "--gid=users" in argv and "--export=ALL" in argv
    assert "--comment=wattbatch: resubmission of job 3007; my note" in argv
    assert env_files[0].split("\0") == [
        "FOO=bar", "MULTI=line one\nline two", "SHELL=/bin/bash",
        "WATTBATCH_CHECKPOINT_DIR=/home/alice/run/.wattbatch/checkpoints/3007", ""]


def test_without_a_stored_environment_it_goes_with_none(monkeypatch):
    calls = _fake(monkeypatch, env="")
    monkeypatch.setattr(rs.os, "geteuid", lambda: 0)
    rs.resubmit(rs.lost_job("3007", CFG), CFG)
    argv = calls[-1][1]
    assert "--export=WATTBATCH_CHECKPOINT_DIR=/home/alice/run/.wattbatch/checkpoints/3007" \
        in argv and "--gres=gpu:2" in argv
    calls = _fake(monkeypatch, env="", script="Batch Script for 3007\n---\n#!/bin/sh\ntrue\n")
    rs.resubmit(rs.lost_job("3007", CFG), CFG)
    assert "--export=NONE" in calls[-1][1]


def test_no_stored_script_is_an_error_naming_the_flag(monkeypatch):
    _fake(monkeypatch, script="Batch Script for 3007\n" + "-" * 80 + "\nNONE\n")
    with pytest.raises(InputError, match="job 3007.*AccountingStoreFlags=job_script"):
        rs.lost_job("3007", CFG)


def test_no_accounting_record_is_an_error(monkeypatch):
    _fake(monkeypatch, row="")
    with pytest.raises(InputError, match="job 3007: the accounting .* has no record"):
        rs.lost_job("3007", CFG)


def test_another_users_job_needs_root(monkeypatch):
    _fake(monkeypatch)
    monkeypatch.setattr(rs.os, "geteuid", lambda: 12345)
    monkeypatch.setattr("pwd.getpwuid", lambda uid: type("P", (), {"pw_name": "bob"}))
    with pytest.raises(InputError, match="belongs to alice; only root .* runs as bob"):
        rs.resubmit(rs.lost_job("3007", CFG), CFG)


def test_the_marked_job_is_found_and_no_other(monkeypatch):
    _fake(monkeypatch)
    assert rs.find_resubmission("3007", CFG) == "13"
    assert rs.find_resubmission("300", CFG) is None
    assert rs.find_resubmission("30", CFG) == "12"


@pytest.mark.parametrize("line, want", [
    ("sbatch -H -n 4 --output=a.out -eerr.txt --mail-type END job.sh -o x",
     ["--ntasks=4", "--output=a.out", "--error=err.txt", "--mail-type=END"]),
    ("sbatch --parsable -p gpu --wrap=x -c2", ["--cpus-per-task=2"]),
    ("sbatch --hold -- -o x", []),
    ("", []),
])
def test_replayed_options(line, want):
    assert rs.replayed_options(line) == want


@pytest.mark.parametrize("tres, nodes, want", [
    ("cpu=1,gres/gpu=4,node=2", 2, "gpu:2"), ("cpu=1,gres/shard=3,node=1", 1, "shard:3"),
    ("cpu=1,mem=4G,node=1", 1, ""), ("gres/gpu:v100=2,gres/gpu=2", 1, "gpu:2")])
def test_gres_per_node(tres, nodes, want):
    assert rs._gres_per_node(tres, nodes) == want
