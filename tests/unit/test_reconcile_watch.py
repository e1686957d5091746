"""The watch after a resize or move (``slurm_plugin/watch.py``) and the re-made hold and
bounded COMPLETING wait of ``actuate``, on a fake Slurm whose job can be left as slurmctld
leaves it when it dies before saving a requeue."""

from __future__ import annotations

import time

import pytest
from test_reconcile import Fixed

from slurm_plugin.actuate import JobView
from slurm_plugin.errors import CommandError, InputError
from slurm_plugin.journal import Journal
from slurm_plugin.model import Action, Cluster, Readings
from slurm_plugin.policy.baseline import SlurmDefault
from slurm_plugin.reconcile import reconcile_pass
from slurm_plugin.record import replace

RESIZE = Action("resize", "7", "fixed", gpus=2, why="t")


class Slurm:
    """One job; every call recorded. ``lose_hold``: after the next requeuehold, the job shows
    as slurmctld shows it after losing that requeue (``failed``: FAILED 0:15; ``running``:
    running as before). ``launch_fails``: the next start leaves it held by Slurm.
    ``completing``: observes a released job stays COMPLETING for."""

    def __init__(self, lose_hold: str = "", launch_fails: bool = False, completing: int = 0):
        self.now = time.time()     # the journal stamps entries with the real clock
        self.calls: list[tuple] = []
        self.lose_hold, self.launch_fails, self.completing = lose_hold, launch_fails, completing
        self.down = False
        self.acct: tuple | None = None
        self.stored = True          # the accounting kept the job's script (job_script)
        self.resubmissions: list[str] = []      # jobs submitted again, newest last
        self.job: JobView | None = JobView("RUNNING", False, "gres:gpu:1",
                                                   start_s=self.now - 100)

    def _call(self, name: str, *args: object) -> None:
        if self.down:
            raise CommandError(["scontrol", name], 1, "Unable to contact slurm controller")
        self.calls.append((name, *args))

    def observe(self, job_id):
        self._call("show")
        j = self.job
        if j is not None and j.state == "COMPLETING":
            if self.completing <= 0:        # stopped; it waits for its start time
                self.job = replace(j, state="PENDING")
            self.completing -= 1
        return j

    def accounting(self, job_id):
        self._call("sacct")
        return self.acct

    def resubmit(self, job_id, gpus, num_nodes):
        self._call("resubmit", gpus, num_nodes)
        if not self.stored:
            raise InputError(f"slurm: job {job_id}: the accounting kept no batch script")
        self.resubmissions.append(str(100 + len(self.resubmissions)))
        return self.resubmissions[-1]

    def resubmitted(self, job_id):
        self._call("squeue")
        return self.resubmissions[-1] if self.resubmissions else None

    def _started(self) -> JobView:
        if self.launch_fails:
            self.launch_fails = False
            return replace(self.job, state="PENDING", held=True,
                           reason="launch_failed_requeued_held")
        return replace(self.job, state="RUNNING", held=False, reason="None", exit_code="0:0",
                       start_s=self.now + 3)

    def requeue_hold(self, job_id):
        self._call("requeue_hold")
        if self.job is None or not (self.job.running or self.job.ended):
            raise CommandError(["scontrol", "requeuehold"], 1, "Job is pending execution")
        if self.lose_hold == "failed":
            self.job = replace(self.job, state="FAILED", exit_code="0:15", end_s=self.now + 1)
        elif self.lose_hold != "running":
            self.job = replace(self.job, state="PENDING", held=True, reason="JobHeldAdmin")
        self.lose_hold = ""

    def set_gpus(self, job_id, gpus):
        self._call("set_gpus", gpus)
        if self.job.running:
            raise CommandError(["scontrol", "update"], 1, "Job is no longer pending execution")
        self.job = replace(self.job, tres_per_node=f"gres:gpu:{gpus}")

    def whole_gpus(self, job_id):
        self._call("whole_gpus")

    def cancel(self, job_id):
        self._call("cancel")
        self.job = replace(self.job, state="CANCELLED", end_s=self.now)

    def release(self, job_id):
        self._call("release")
        self.job = replace(self.job, held=False, state="COMPLETING" if self.completing else
                           "PENDING", reason="None")

    def start_now(self, job_id):
        self._call("start_now")
        if self.job.state == "PENDING" and not self.job.held:
            self.job = self._started()


def _pass(tmp_path, act, policy=None, now_s=None, watch_s=3600.0, wait_s=10.0):
    return reconcile_pass(policy=policy or SlurmDefault(), snapshot=lambda: Cluster(nodes=()),
                          readings=Readings, actuator=act, state_dir=tmp_path,
                          now_s=lambda: act.now if now_s is None else now_s, watch_s=watch_s, completing_wait_s=wait_s)


def _steps(act) -> list[str]:
    return [c[0] for c in act.calls if c[0] not in ("show", "sacct", "squeue")]


def test_job_failed_by_a_lost_requeue_is_requeued_with_the_new_count(tmp_path):
    """slurmctld lost the requeue and the job ended FAILED 0:15: the same action holds it
    again and goes on; the job runs on 2 GPUs."""
    act = Slurm(lose_hold="failed")
    res = _pass(tmp_path, act, Fixed(RESIZE))
    assert [o.status for o in res.outcomes] == ["done"]
    assert _steps(act) == ["requeue_hold", "requeue_hold", "set_gpus", "release", "start_now"]
    assert act.job.running and act.job.tres_per_node == "gres:gpu:2"
    events = [e.event for e in Journal(tmp_path / "journal.jsonl").entries()]
    assert "revived" in events


def test_job_running_again_after_a_lost_hold_is_held_again(tmp_path):
    """The hold was journaled but slurmctld came back with the job running: held again, never
    a GPU count set on a running job ("Job is no longer pending execution")."""
    act = Slurm(lose_hold="running")
    res = _pass(tmp_path, act, Fixed(RESIZE))
    assert [o.status for o in res.outcomes] == ["done"], res.as_dict()
    assert _steps(act) == ["requeue_hold", "requeue_hold", "set_gpus", "release", "start_now"]
    assert act.job.running and act.job.tres_per_node == "gres:gpu:2"


def test_job_slurm_left_held_after_a_done_resize_is_released_once_and_then_settled(tmp_path):
    act = Slurm(launch_fails=True)
    _pass(tmp_path, act, Fixed(RESIZE))
    assert act.job.held and act.job.reason == "launch_failed_requeued_held"
    res = _pass(tmp_path, act, now_s=act.now + 60)
    assert [(o.status, o.action.job_id) for o in res.outcomes] == [("released", "7")]
    assert "launch_failed_requeued_held" in res.outcomes[0].detail
    assert act.job.running
    act.calls = []
    res = _pass(tmp_path, act, now_s=act.now + 120)         # running again: settled
    assert res.outcomes == [] and _steps(act) == []
    act.calls = []
    _pass(tmp_path, act, now_s=act.now + 180)
    assert act.calls == []                              # no longer checked


def test_a_hold_by_the_user_is_never_released(tmp_path):
    act = Slurm()
    _pass(tmp_path, act, Fixed(RESIZE))
    act.job = replace(act.job, state="PENDING", held=True, reason="JobHeldUser")
    res = _pass(tmp_path, act, now_s=act.now + 60)
    assert res.outcomes == [] and "release" not in _steps(act)[4:]
    act.calls = []
    _pass(tmp_path, act, now_s=act.now + 120)
    assert act.calls == []


def test_job_the_requeue_ended_after_the_action_is_revived_as_it_was(tmp_path):
    """The action saw the job running and dropped the hold (it never took effect, as far as
    Slurm said); the requeue's signal arrived later: the watch requeues it, at its own count."""
    act = Slurm()
    action = Action("resize", "7", "fixed", gpus=2, why="t")
    journal = Journal(tmp_path / "journal.jsonl")
    journal.write("a1", "begin", action)
    journal.write("a1", "skipped", action, "the hold never took effect")
    act.job = replace(act.job, state="FAILED", exit_code="0:15", end_s=act.now + 5)
    res = _pass(tmp_path, act, now_s=act.now + 30)
    assert [o.status for o in res.outcomes] == ["revived"]
    assert _steps(act) == ["requeue_hold", "release", "start_now"]
    assert act.job.running and act.job.tres_per_node == "gres:gpu:1"


def test_job_failing_on_its_own_after_a_resize_is_left_alone(tmp_path):
    act = Slurm()
    _pass(tmp_path, act, Fixed(RESIZE))
    act.job = replace(act.job, state="FAILED", exit_code="1:0", end_s=act.now + 50)
    act.calls = []
    res = _pass(tmp_path, act, now_s=act.now + 60)
    assert res.outcomes == [] and _steps(act) == []
    act.calls = []
    _pass(tmp_path, act, now_s=act.now + 120)
    assert act.calls == []


def _lost(tmp_path, status="failed"):
    """A resize whose requeue slurmctld lost; the job then ended FAILED 0:15 and was forgotten
    (MinJobAge) before the next pass."""
    act = Slurm(lose_hold="failed")
    journal = Journal(tmp_path / "journal.jsonl")
    journal.write("a1", "begin", RESIZE)
    journal.write("a1", "step:requeue_hold", RESIZE)
    journal.write("a1", status, RESIZE, "set_gpus: slurmctld down" if status == "failed" else "")
    act.job, act.acct = None, ("FAILED", "0:15", act.now + 5)
    return act


@pytest.mark.parametrize("status, gpus", [("failed", None), ("done", 2)])
def test_job_lost_for_good_is_submitted_again_once(tmp_path, status, gpus):
    """Forgotten by slurmctld after the lost requeue ended it: submitted again from the
    accounting, with the action's count where the action ended done, else as it was; once."""
    act = _lost(tmp_path, status)
    res = _pass(tmp_path, act, now_s=act.now + 60)
    assert [o.status for o in res.outcomes] == ["resubmitted"] and res.warnings == []
    assert "job 7 lost" in res.outcomes[0].detail and "as job 100" in res.outcomes[0].detail
    assert ("resubmit", gpus, None) in act.calls and act.resubmissions == ["100"]
    events = [e.event for e in Journal(tmp_path / "journal.jsonl").entries()]
    assert events[-2:] == ["resubmitting", "settled"]
    act.calls = []
    res = _pass(tmp_path, act, now_s=act.now + 120)
    assert act.calls == [] and res.outcomes == []


def test_a_pass_that_died_after_sbatch_never_submits_twice(tmp_path):
    act = _lost(tmp_path)
    act.resubmissions = ["100"]         # sbatch went in; the pass died before its journal line
    res = _pass(tmp_path, act, now_s=act.now + 60)
    assert [o.status for o in res.outcomes] == ["resubmitted"]
    assert "resubmit" not in _steps(act) and act.resubmissions == ["100"]


def test_job_lost_for_good_that_cannot_be_resubmitted_is_said_every_pass_for_watch_s(tmp_path):
    act = _lost(tmp_path)
    act.stored = False
    for minute in (1, 2, 3):
        res = _pass(tmp_path, act, now_s=act.now + 60 * minute, watch_s=600)
        lost = [w for w in res.warnings if "lost" in w]
        assert len(lost) == 1 and "job 7" in lost[0] and "no batch script" in lost[0]
        assert "sacct -j 7 --batch-script" in lost[0] and res.outcomes == []
    res = _pass(tmp_path, act, now_s=act.now + 3600, watch_s=600)
    assert any("no longer said" in w for w in res.warnings)
    res = _pass(tmp_path, act, now_s=act.now + 3660, watch_s=600)
    assert not [w for w in res.warnings if "job 7" in w]


def test_job_forgotten_after_ending_on_its_own_is_settled_silently(tmp_path):
    act = Slurm()
    _pass(tmp_path, act, Fixed(RESIZE))
    act.job, act.acct = None, ("COMPLETED", "0:0", act.now + 50)
    res = _pass(tmp_path, act, now_s=act.now + 60)
    assert res.warnings == [] and res.outcomes == []
    act.calls = []
    _pass(tmp_path, act, now_s=act.now + 120)
    assert act.calls == []


def test_held_job_that_cannot_be_released_is_a_warning_every_pass(tmp_path):
    act = Slurm(launch_fails=True)
    _pass(tmp_path, act, Fixed(RESIZE))
    real_release = act.release

    def refuse(job_id):
        raise CommandError(["scontrol", "release"], 1, "Access/permission denied")
    act.release = refuse
    for minute in (1, 2):
        res = _pass(tmp_path, act, now_s=act.now + 60 * minute)
        assert any("job 7 held (Reason=launch_failed_requeued_held)" in w
                   and "not released" in w for w in res.warnings), res.warnings
    act.release = real_release
    res = _pass(tmp_path, act, now_s=act.now + 10 * 86400)    # however old the action
    assert [o.status for o in res.outcomes] == ["released"]


def test_start_time_waits_for_the_job_to_leave_completing(tmp_path):
    act = Slurm(completing=2)
    res = _pass(tmp_path, act, Fixed(RESIZE), wait_s=10)
    assert [o.status for o in res.outcomes] == ["done"]
    assert _steps(act)[-1] == "start_now" and act.job.running
    events = [e.event for e in Journal(tmp_path / "journal.jsonl").entries()]
    assert events.index("wait:completing") < events.index("step:start_now")


def test_start_time_still_completing_is_set_on_the_next_pass(tmp_path):
    act = Slurm(completing=1000)
    res = _pass(tmp_path, act, Fixed(RESIZE), wait_s=0)
    assert [o.status for o in res.outcomes] == ["waiting"]
    assert "start_now" not in _steps(act)
    assert [a for _, a, _ in Journal(tmp_path / "journal.jsonl").unfinished()] == [RESIZE]
    act.completing = 0
    res = _pass(tmp_path, act, now_s=act.now + 60)
    assert [(o.status, o.recovered) for o in res.outcomes] == [("done", True)]
    assert _steps(act)[-1] == "start_now" and act.job.running


@pytest.mark.parametrize("kind", ["defer", "cancel", "power_cap"])
def test_actions_that_stop_no_job_are_not_watched(tmp_path, kind):
    act = Slurm()
    journal = Journal(tmp_path / "journal.jsonl")
    action = Action(kind, "7", "fixed", why="t")
    journal.write("a1", "begin", action)
    journal.write("a1", "done", action)
    act.job = replace(act.job, state="PENDING", held=True, reason="JobHeldAdmin")
    res = _pass(tmp_path, act)
    assert res.outcomes == [] and "release" not in _steps(act)


def test_snapshot_spares_a_call_per_watched_job(tmp_path):
    """A watched job the pass's snapshot shows plainly pending needs no scontrol call; one
    running since after the action is settled from it; a held one is read and released."""
    from slurm_plugin.model import Job

    act = Slurm()
    _pass(tmp_path, act, Fixed(RESIZE))
    seen = {"7": Job("7", "PENDING", reason="Resources")}

    def one(job_state):
        act.calls = []
        return reconcile_pass(policy=SlurmDefault(), snapshot=lambda: Cluster(nodes=(), jobs={
            "7": job_state}), readings=Readings, actuator=act, state_dir=tmp_path,
            now_s=lambda: act.now + 60)

    one(seen["7"])
    assert act.calls == []
    act.job = replace(act.job, state="PENDING", held=True, reason="launch_failed_requeued_held")
    res = one(Job("7", "PENDING", reason="launch_failed_requeued_held"))
    assert [o.status for o in res.outcomes] == ["released"]
    one(Job("7", "RUNNING", start_s=act.now + 30))
    assert act.calls == []
    one(Job("7", "PENDING", reason="JobHeldAdmin"))
    assert act.calls == []                                  # settled: no longer watched


def _cancelled_in_an_earlier_pass(tmp_path, act) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    action = Action("cancel", "7", "fixed", why="t")
    journal.write("c1", "begin", action)
    journal.write("c1", "done", action)


def _snapshot_pass(tmp_path, act, jobs, now_s):
    return reconcile_pass(policy=SlurmDefault(), snapshot=lambda: Cluster(nodes=(), jobs=jobs),
                          readings=Readings, actuator=act, state_dir=tmp_path,
                          now_s=lambda: now_s, watch_s=3600.0)


def test_a_cancel_slurmctld_lost_is_made_again_then_settled(tmp_path):
    """slurmctld killed before it saved a done cancel: the job is back running; the next pass
    cancels it again, the one after finds it gone and settles; then it is no longer read."""
    from slurm_plugin.model import Job

    act = Slurm()
    _cancelled_in_an_earlier_pass(tmp_path, act)
    back = {"7": Job("7", "RUNNING", start_s=act.now - 100)}
    res = _snapshot_pass(tmp_path, act, back, act.now + 30)
    assert [(o.status, o.action.job_id) for o in res.outcomes] == [("recancelled", "7")]
    assert "slurmctld lost the cancel" in res.outcomes[0].detail
    assert _steps(act) == ["cancel"] and act.job.state == "CANCELLED"
    act.calls = []
    res = _snapshot_pass(tmp_path, act, {}, act.now + 60)
    assert res.outcomes == [] and act.calls == []
    events = [e.event for e in Journal(tmp_path / "journal.jsonl").entries()]
    assert events[-2:] == ["recancelled", "settled"]
    _snapshot_pass(tmp_path, act, back, act.now + 90)      # settled: never cancelled again
    assert act.calls == []


def test_a_cancel_that_took_is_settled_without_a_call(tmp_path):
    from slurm_plugin.model import Job

    act = Slurm()
    _cancelled_in_an_earlier_pass(tmp_path, act)
    ending = {"7": Job("7", "COMPLETING")}       # the cancel's own end: not cancelled again
    res = _snapshot_pass(tmp_path, act, ending, act.now + 5)
    assert res.outcomes == [] and act.calls == []
    assert [e.event for e in Journal(tmp_path / "journal.jsonl").entries()][-1] == "settled"
