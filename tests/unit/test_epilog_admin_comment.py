"""The epilog keeps job_submit.lua's ``wb:`` record when it adds the energy summary to a job's
AdminComment: it reads what is there from slurmctld while it still lists the job (the
accounting database may not have it yet), and from the database only after."""

from __future__ import annotations

import pytest

from slurm_plugin.errors import CommandError
from slurm_plugin.node import epilog
from slurm_plugin.slurm import actions, cli


class Done:
    def __init__(self, stdout: str = "") -> None:
        self.stdout = stdout


@pytest.fixture()
def calls(monkeypatch):
    seen: list[tuple] = []
    state = {"squeue": [{"job_id": 7, "admin_comment": "wb:uid=1000;app=vgg16"}],
             "sacct": ""}          # the database has not got the record yet

    def slurm_json(cmd, args, cfg):
        seen.append((cmd, tuple(args)))
        return {"jobs": state["squeue"]}

    def slurm(cmd, args, cfg, **kw):
        seen.append((cmd, tuple(args)))
        if cmd == "sacct":
            return Done(state["sacct"])
        return Done()
    monkeypatch.setattr(actions, "slurm_json", slurm_json)
    monkeypatch.setattr(cli, "slurm", slurm)
    return seen, state


def _written(seen) -> str:
    (args,) = [a for c, a in seen if c == "sacctmgr"]
    return next(a for a in args if a.startswith("AdminComment=")).removeprefix("AdminComment=")


def test_the_record_slurmctld_holds_is_kept_though_the_database_lacks_it(calls):
    seen, _ = calls
    epilog._admin_comment({}, "7", "wb-energy:energy_j=10")
    assert _written(seen) == "wb:uid=1000;app=vgg16 wb-energy:energy_j=10"
    assert not [c for c, _ in seen if c == "sacct"]


def test_a_job_slurmctld_forgot_is_read_from_the_database_and_its_old_summary_replaced(calls):
    seen, state = calls
    state["squeue"] = []
    state["sacct"] = "wb:uid=1000 wb-energy:energy_j=3\n"
    epilog._admin_comment({}, "7", "wb-energy:energy_j=10")
    assert _written(seen) == "wb:uid=1000 wb-energy:energy_j=10"


def test_without_slurmctld_the_database_copy_is_used(calls, monkeypatch):
    seen, state = calls
    state["sacct"] = "wb:uid=1000\n"

    def broken(cmd, args, cfg):
        raise CommandError(["squeue"], 1, "slurmctld down")
    monkeypatch.setattr(actions, "slurm_json", broken)
    epilog._admin_comment({}, "7", "wb-energy:energy_j=10")
    assert _written(seen) == "wb:uid=1000 wb-energy:energy_j=10"


def test_a_failing_write_is_reported_and_not_fatal(calls, monkeypatch, capsys):
    def slurm(cmd, args, cfg, **kw):
        raise CommandError([cmd], 1, "slurmdbd down")
    monkeypatch.setattr(cli, "slurm", slurm)
    epilog._admin_comment({}, "7", "wb-energy:energy_j=10")
    assert "AdminComment not set" in capsys.readouterr().err
