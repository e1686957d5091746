"""Crash matrix on a fake Slurm: for every action kind, a crash after every Slurm step (the
step took effect, its journal line never written), after every journal line, and the
controller gone after every step. At most two later passes leave no job held and no action
unfinished, and never lose a job that was not being cancelled."""

from __future__ import annotations

import pytest
from test_reconcile import CLUSTER, Fixed, Recorder

from slurm_plugin import journal as journal_mod
from slurm_plugin.actuate import STEPS
from slurm_plugin.journal import Journal
from slurm_plugin.model import Action, Readings
from slurm_plugin.policy.baseline import SlurmDefault
from slurm_plugin.reconcile import reconcile_pass

ACTIONS = {
    "resize": Action("resize", "7", "fixed", gpus=2, why="t"),
    "move_exclusive": Action("move_exclusive", "7", "fixed", gpus=1, why="t"),
    "unpin": Action("unpin", "7", "fixed", gpus=1, why="t"),
    "defer": Action("defer", "7", "fixed", begin_s=4e9, why="t"),
    "cancel": Action("cancel", "7", "fixed", why="t"),
    "power_cap": Action("power_cap", "7", "fixed", power_cap_w=200.0, why="t"),
}


def _pass(tmp_path, policy, act):
    return reconcile_pass(policy=policy, snapshot=lambda: CLUSTER, readings=Readings,
                          actuator=act, state_dir=tmp_path)


def _cases():
    for kind, steps in STEPS.items():
        if kind not in ACTIONS:
            continue
        for step in steps:
            yield kind, "crash after command", step
            yield kind, "controller gone after command", step
        for line in range(len(steps) + 2):            # begin, each step, done
            yield kind, "crash after journal line", line


CASES = list(_cases())


def _state(kind):
    # defer and unpin act on a pending job; the others on a running one
    return Recorder(state="PENDING" if kind in ("defer", "unpin") else "RUNNING")


@pytest.mark.parametrize("kind, fault, where", CASES)
def test_no_job_left_held_after_two_passes(tmp_path, monkeypatch, kind, fault, where):
    act = _state(kind)
    if fault == "crash after command":
        act.crash_on = where
    elif fault == "controller gone after command":
        act.down_after = where
    else:
        written = {"n": 0}
        real_write = journal_mod.Journal.write

        def write(self, *a, **kw):
            entry = real_write(self, *a, **kw)
            written["n"] += 1
            if written["n"] == where + 1:
                raise KeyboardInterrupt(f"after journal line {where + 1}")
            return entry
        monkeypatch.setattr(journal_mod.Journal, "write", write)
    try:
        _pass(tmp_path, Fixed(ACTIONS[kind]), act)
    except KeyboardInterrupt:
        pass
    monkeypatch.undo()
    act.crash_on, act.down_after, act.down = "", "", False      # controller back
    for _ in range(2):
        _pass(tmp_path, SlurmDefault(), act)
    journal = Journal(tmp_path / "journal.jsonl")
    assert journal.unfinished() == []
    if kind == "cancel":
        assert act.job is None or not act.job.held
    else:
        assert act.job is not None and not act.job.held, act.calls
    held_steps = [c[0] for c in act.calls if c[0] == "requeue_hold"]
    assert len(held_steps) <= 1                 # a hold is never repeated


def test_matrix_size():
    assert len(CASES) == 2 * (4 + 4 + 1 + 1 + 1 + 1) + (6 + 6 + 3 + 3 + 3 + 3)


def test_stuck_action_is_retried_while_the_controller_is_down(tmp_path):
    act = Recorder(down_after="requeue_hold")
    res = _pass(tmp_path, Fixed(ACTIONS["resize"]), act)
    assert [o.status for o in res.outcomes] == ["stuck"]
    assert "may still be held" in res.warnings[0]
    res = _pass(tmp_path, SlurmDefault(), act)              # still down: still unfinished
    assert [(o.status, o.recovered) for o in res.outcomes] == [("stuck", True)]
    act.down = False
    res = _pass(tmp_path, SlurmDefault(), act)
    assert [(o.status, o.recovered) for o in res.outcomes] == [("done", True)]
    assert act.job == act.job.__class__("RUNNING", False, "gres:gpu:2")


def test_hold_replayed_after_crash_is_not_repeated(tmp_path):
    """The issue's case: a crash between requeuehold and its journal line; the next pass
    sees the job held and goes on, instead of failing on "Job is pending execution"."""
    act = Recorder(crash_on="requeue_hold")
    with pytest.raises(KeyboardInterrupt):
        _pass(tmp_path, Fixed(ACTIONS["resize"]), act)
    act.crash_on, act.calls = "", []
    res = _pass(tmp_path, SlurmDefault(), act)
    assert [c[0] for c in act.calls] == ["set_gpus", "release", "start_now"]
    assert [o.status for o in res.outcomes] == ["done"]
