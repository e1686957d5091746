"""Reconcile pass: lock, journal, crash recovery, idempotence, dry-run (pure: fake actuator)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from slurm_plugin.actuate import JobView
from slurm_plugin.errors import CommandError
from slurm_plugin.journal import Journal, PassLock
from slurm_plugin.model import Action, Cluster, Job, Node, Readings
from slurm_plugin.policy.baseline import SlurmDefault
from slurm_plugin.reconcile import reconcile_pass
from slurm_plugin.record import replace


class Recorder:
    """A fake Slurm holding one job's state; records the Slurm steps. ``crash_on`` raises a
    non-Watt error after the step took effect (a crash before its journal line), ``fail_on``
    a CommandError instead of the step, ``down_after`` makes every later call fail as with
    slurmctld gone."""

    def __init__(self, crash_on: str = "", fail_on: str = "", down_after: str = "",
                 state: str = "RUNNING", held: bool = False, tres: str = "gres:gpu:1") -> None:
        self.calls: list[tuple] = []
        self.crash_on, self.fail_on, self.down_after = crash_on, fail_on, down_after
        self.down = False
        self.job: JobView | None = JobView(state, held, tres)

    def _check(self, name: str) -> None:
        if self.down:
            raise CommandError(["scontrol", name], 1, "Unable to contact slurm controller")
        if name == self.fail_on:
            raise CommandError(["scontrol", name], 1, "Invalid job id specified")

    def _done(self, name: str, *args: object) -> None:
        self.calls.append((name, *args))
        if name == self.down_after:
            self.down = True
        if name == self.crash_on:
            raise KeyboardInterrupt(name)

    def observe(self, job_id):
        self._check("show")
        return self.job

    def requeue_hold(self, job_id):
        self._check("requeue_hold")
        if self.job is None or not self.job.running:
            raise CommandError(["scontrol", "requeuehold"], 1, "Job is pending execution")
        self.job = replace(self.job, state="PENDING", held=True)
        self._done("requeue_hold", job_id)

    def set_gpus(self, job_id, gpus):
        self._check("set_gpus")
        self.job = replace(self.job, tres_per_node=f"gres:gpu:{gpus}")
        self._done("set_gpus", job_id, gpus)

    def whole_gpus(self, job_id):
        self._check("whole_gpus")
        self._done("whole_gpus", job_id)

    def release(self, job_id):
        self._check("release")
        self.job = replace(self.job, state="PENDING", held=False)
        self._done("release", job_id)

    def start_now(self, job_id):
        self._check("start_now")
        self.job = replace(self.job, state="RUNNING", held=False)
        self._done("start_now", job_id)

    def defer(self, job_id, begin_s):
        self._check("defer")
        self._done("defer", job_id, begin_s)

    def cancel(self, job_id):
        self._check("cancel")
        self.job = None
        self._done("cancel", job_id)

    def set_power_cap(self, job_id, power_cap_w):
        self._check("set_power_cap")
        self._done("set_power_cap", job_id, power_cap_w)

    def set_time_limit(self, job_id, time_limit_s):
        self._check("set_time_limit")
        self._done("set_time_limit", job_id, time_limit_s)


class Fixed:
    """A policy returning fixed actions."""

    name = "fixed"

    def __init__(self, *actions: Action) -> None:
        self.actions = actions

    def advise(self, request, ctx):  # pragma: no cover - not used here
        raise AssertionError

    def reconcile(self, ctx):
        return self.actions


CLUSTER = Cluster(nodes=(Node("gpu1"),), jobs={"7": Job("7", "RUNNING")})
RESIZE = Action("resize", "7", "fixed", gpus=2, why="test")


def run(tmp_path: Path, policy, actuator, **kw):
    return reconcile_pass(policy=policy, snapshot=lambda: CLUSTER, readings=Readings,
                          actuator=actuator, state_dir=tmp_path, **kw)


def test_baseline_changes_nothing(tmp_path):
    act = Recorder()
    res = run(tmp_path, SlurmDefault(), act)
    assert res.ran and res.outcomes == [] and act.calls == []


def test_resize_runs_steps_in_order_and_journals(tmp_path):
    act = Recorder()
    res = run(tmp_path, Fixed(RESIZE), act)
    assert [c[0] for c in act.calls] == ["requeue_hold", "set_gpus", "release", "start_now"]
    assert act.calls[1] == ("set_gpus", "7", 2)
    assert [o.status for o in res.outcomes] == ["done"]
    events = [e.event for e in Journal(tmp_path / "journal.jsonl").entries()]
    assert events == ["begin", "step:requeue_hold", "step:set_gpus", "step:release",
                      "step:start_now", "done"]


def test_a_cap_with_a_time_limit_raises_the_limit_before_it_records_the_cap(tmp_path):
    cap = Action(kind="power_cap", job_id="7", policy="fixed", power_cap_w=150.0,
                 time_limit_s=7200.0, why="t")
    act = Recorder()
    res = run(tmp_path, Fixed(cap), act)
    assert act.calls == [("set_time_limit", "7", 7200.0), ("set_power_cap", "7", 150.0)]
    assert [o.status for o in res.outcomes] == ["done"]
    crashed = Recorder(crash_on="set_time_limit")     # raised, its journal line never written
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "b", Fixed(cap), crashed)
    again = Recorder()
    run(tmp_path / "b", Fixed(), again)             # the next pass finishes it
    assert again.calls == [("set_time_limit", "7", 7200.0), ("set_power_cap", "7", 150.0)]
    refused = Recorder(fail_on="set_time_limit")      # no raise: no cap that could kill it
    out = run(tmp_path / "c", Fixed(cap), refused)
    assert [o.status for o in out.outcomes] == ["failed"] and refused.calls == []


def test_crash_mid_resize_is_finished_by_next_pass(tmp_path):
    act = Recorder(crash_on="set_gpus")      # set, then the crash before its journal line
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, Fixed(RESIZE), act)
    assert len(Journal(tmp_path / "journal.jsonl").unfinished()) == 1
    act.crash_on, act.calls = "", []
    res = run(tmp_path, SlurmDefault(), act)
    # only the missing steps run (set_gpus took effect: not repeated); never held forever
    assert [c[0] for c in act.calls] == ["release", "start_now"]
    assert res.outcomes[0].recovered and res.outcomes[0].status == "done"
    assert Journal(tmp_path / "journal.jsonl").unfinished() == []


def test_second_pass_is_idempotent(tmp_path):
    run(tmp_path, Fixed(RESIZE), Recorder())
    act = Recorder()
    res = run(tmp_path, Fixed(RESIZE), act)
    assert act.calls == [] and [o.status for o in res.outcomes] == ["skipped"]


def test_dry_run_records_and_runs_nothing(tmp_path):
    act = Recorder()
    res = run(tmp_path, Fixed(RESIZE), act, dry_run=True)
    assert act.calls == [] and [o.status for o in res.outcomes] == ["dry-run"]
    assert [e.event for e in Journal(tmp_path / "journal.jsonl").entries()] == ["dry-run"]


def test_failed_step_is_reported_with_command_and_the_held_job_released(tmp_path):
    act = Recorder(fail_on="set_gpus")
    res = run(tmp_path, Fixed(RESIZE), act)
    assert res.outcomes[0].status == "failed"
    assert "Invalid job id" in res.outcomes[0].detail
    assert "released as it is" in res.outcomes[0].detail
    assert [c[0] for c in act.calls] == ["requeue_hold", "release", "start_now"]
    assert Journal(tmp_path / "journal.jsonl").unfinished() == []


def test_failed_hold_leaves_nothing_to_undo(tmp_path):
    act = Recorder(fail_on="requeue_hold")
    res = run(tmp_path, Fixed(RESIZE), act)
    assert res.outcomes[0].status == "failed" and act.calls == []


def test_move_exclusive_takes_whole_gpus_between_hold_and_release(tmp_path):
    act = Recorder()
    run(tmp_path, Fixed(Action("move_exclusive", "7", "fixed", gpus=1, why="t")), act)
    assert act.calls == [("requeue_hold", "7"), ("whole_gpus", "7"), ("release", "7"),
                         ("start_now", "7")]


def test_observe_feeds_history_average(tmp_path):
    obs = Action("observe", "7", "fixed", predicted={"pair:a+b": 1.2})
    run(tmp_path, Fixed(obs), Recorder())
    seen = {}

    class Peek(Fixed):
        def reconcile(self, ctx):
            seen.update(ctx.history)
            return (Action("observe", "8", "fixed", predicted={"pair:a+b": 1.4}),)

    run(tmp_path, Peek(), Recorder())
    assert seen == {"pair:a+b": 1.2}
    run(tmp_path, Peek(), Recorder())
    assert seen["pair:a+b"] == pytest.approx(1.3)


def test_concurrent_pass_exits_saying_who_holds_the_lock(tmp_path):
    entered, leave = threading.Event(), threading.Event()

    class Slow(Fixed):
        def reconcile(self, ctx):
            entered.set()
            leave.wait(5)
            return ()

    t = threading.Thread(target=run, args=(tmp_path, Slow(), Recorder()))
    t.start()
    assert entered.wait(5)
    try:
        res = run(tmp_path, SlurmDefault(), Recorder())
    finally:
        leave.set()
        t.join()
    assert res.ran is False and res.holder.startswith("pid ")


def test_lock_released_after_pass(tmp_path):
    run(tmp_path, SlurmDefault(), Recorder())
    with PassLock(tmp_path / "reconcile.lock") as lock:
        assert lock.acquired
