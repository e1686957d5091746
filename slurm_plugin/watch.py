"""After a resize or move has ended: the job it stopped is watched until it runs again.

An action's steps can all succeed and the job still not come back. slurmctld killed before it
saved the requeue forgets it, while the requeue's SIGTERM has already reached the job's
processes: the job ends FAILED (``ExitCode=0:15``) once slurmctld is back. Or slurmctld saved
the requeue and lost the hold, the old batch step still alive on its node: Slurm then fails the
next launch and requeues the job held (``Reason=launch_failed_requeued_held``, priority 0),
where it stays. So every pass checks the newest resize or move of each job (``Journal.touched``)
until that job is seen running, or ended on its own:

- held, and not by its user: released (``released``; with the count the action set, which
  Slurm keeps across requeues);
- ended by the requeue's signal while Slurm still holds it: requeued again, given the count the
  journal says (the action's if it ended ``done``, else the job's own) and released
  (``revived``);
- forgotten by slurmctld (``MinJobAge`` after it ended) and shown by the accounting as ended by
  that signal: it cannot be requeued; it is submitted again from what the accounting kept
  (``slurm/resubmit.py``: its script, environment and request, with the count the journal
  says; ``resubmitted``, the new job id in the journal). Where that cannot be done (the site
  keeps no scripts), a warning on every pass says why and how to resubmit it by hand, for
  ``watch_s`` after the action ended;
- running since after the action began, or ended otherwise (done, cancelled, its own
  failure), or held by its user: settled (``settled`` in the journal), no longer checked; so is
  a job pending or running since before the action ``watch_s`` after the action ended.

A job still held that cannot be released is a warning on every pass, however old its action.

A cancel that ended ``done`` is watched the same way: slurmctld killed before it saved the
cancel brings the job back pending or running. Seen so within ``watch_s``, it is cancelled
again (``recancelled``); seen gone or ended, it is settled.
"""

from __future__ import annotations

from typing import Mapping

from .actuate import HOLDS, Actuator, JobView, Outcome, run_step, stopped_by_requeue
from .errors import WattError
from .journal import Journal, Touched
from .model import Job

# Slurm's reasons of a pending job held (priority 0), as squeue shows them
HELD_REASONS = ("JobHeldAdmin", "JobHeldUser", "launch_failed_requeued_held")


def watch(journal: Journal, actuator: Actuator, busy: set[str], now_s: float,
          watch_s: float, seen: Mapping[str, Job] | None = None
          ) -> tuple[list[Outcome], list[str]]:
    """Check every watched job not in ``busy`` (jobs whose action is still unfinished); return
    what was done to them and the warnings. Jobs acted on are added to ``busy``. ``seen``: the
    pass's snapshot of pending and running jobs, where a job plainly pending, or running
    again, needs no ``scontrol`` call of its own."""
    outcomes: list[Outcome] = []
    warnings: list[str] = []
    for t in journal.touched(("cancel",)):
        if t.status == "done" and t.action.job_id not in busy:
            _cancel_again(journal, actuator, t, seen, now_s, watch_s, outcomes, warnings)
            busy.add(t.action.job_id)
    for t in journal.touched(HOLDS):
        job = t.action.job_id
        if t.status is None or job in busy:
            continue
        if seen is not None and _fine(journal, t, seen.get(job), now_s, watch_s):
            continue
        try:
            outcome, warning = _check(journal, actuator, t, now_s, watch_s)
        except WattError as exc:
            outcome, warning = None, (f"job {job} after {t.action.kind} {t.action_id}: not "
                                      f"checked ({exc}); checked again next pass")
        if outcome is not None:
            outcomes.append(outcome)
            busy.add(job)
        if warning:
            warnings.append(warning)
    return outcomes, warnings


def _fine(journal: Journal, t: Touched, job: Job | None, now_s: float, watch_s: float) -> bool:
    """Whether the snapshot alone shows the job needs nothing: running since after the action
    (then settled) or before it, or pending and not held, while it is watched."""
    if job is None or now_s - (t.ended_s or t.begun_s) > watch_s:
        return False
    if job.state == "RUNNING" and job.start_s is not None:
        if job.start_s >= t.begun_s - 1:
            journal.write(t.action_id, "settled", t.action, f"job {job.job_id} running again")
        return True
    return job.state == "PENDING" and job.reason not in HELD_REASONS


def _check(journal: Journal, actuator: Actuator, t: Touched, now_s: float,
           watch_s: float) -> tuple[Outcome | None, str]:
    view = actuator.observe(t.action.job_id)
    old = now_s - (t.ended_s or t.begun_s) > watch_s
    if view is None:
        return _forgotten(journal, actuator, t, old)
    if view.held and view.reason != "JobHeldUser":
        return _release(journal, actuator, t, view)
    since = t.begun_s - 1           # Slurm's times are whole seconds
    if view.ended and view.revivable and (view.end_s is None or view.end_s >= since):
        return _revive(journal, actuator, t, view)
    # A job still running since before the action (its hold never took effect, or took
    # effect and was lost with the requeue's signal on its way) stays watched: it may yet end
    # by that signal.
    restarted = view.running and view.start_s is not None and view.start_s >= since
    if restarted or view.ended or view.held or old:
        shown = "held by its user" if view.held else \
            "running again" if restarted else view.state.lower()
        journal.write(t.action_id, "settled", t.action, f"job {t.action.job_id} {shown}")
    return None, ""


def _forgotten(journal: Journal, actuator: Actuator, t: Touched,
               old: bool) -> tuple[Outcome | None, str]:
    """A job slurmctld no longer knows: submitted again from the accounting when it was lost
    to the requeue (with the count the journal says: the action's if it ended ``done``, else
    the job's own), settled otherwise."""
    job = t.action.job_id
    ended = actuator.accounting(job)
    lost = ended is not None and stopped_by_requeue(ended[0], ended[1]) and \
        (ended[2] is None or ended[2] >= t.begun_s - 1)
    if not lost:
        journal.write(t.action_id, "settled", t.action, f"job {job} forgotten by slurmctld")
        return None, ""
    state, exit_code, _ = ended
    why = (f"job {job} lost: the requeue of {t.action.kind} {t.action_id} stopped it and "
           f"slurmctld lost that requeue; it ended {state} (ExitCode {exit_code}) and "
           "slurmctld has forgotten it (MinJobAge)")
    try:
        new = actuator.resubmitted(job)       # a pass that died after sbatch submitted it
        if new is None:
            journal.write(t.action_id, "resubmitting", t.action, why)
            done = t.status == "done"
            new = actuator.resubmit(job, int(t.action.gpus or 1) if done else None,
                                    t.action.num_nodes if done else None)
    except WattError as exc:
        if old:
            journal.write(t.action_id, "settled", t.action, f"{why}; not submitted again")
        return None, (f"{why}; not submitted again ({exc}): resubmit it by hand (its script: "
                      f"sacct -j {job} --batch-script)"
                      + ("; no longer said after this pass (reconcile.watch_s)" if old
                         else "; tried again every pass"))
    count = "with the action's count" if t.status == "done" else "as it was"
    detail = f"{why}: submitted again from the accounting {count}, as job {new}"
    journal.write(t.action_id, "settled", t.action, detail)
    return Outcome(t.action, "resubmitted", detail, True), ""


def _release(journal: Journal, actuator: Actuator, t: Touched,
             view: JobView) -> tuple[Outcome | None, str]:
    job = t.action.job_id
    why = f"held (Reason={view.reason or '?'}) after {t.action.kind} {t.action_id}"
    try:
        actuator.release(job)
        actuator.start_now(job)
    except WattError as exc:
        return None, f"job {job} {why}: not released ({exc}); tried again every pass"
    journal.write(t.action_id, "released", t.action, f"job {job} {why}: released")
    return Outcome(t.action, "released", f"job {job} {why}: released", True), ""


def _revive(journal: Journal, actuator: Actuator, t: Touched,
            view: JobView) -> tuple[Outcome | None, str]:
    """Requeue a job the action's requeue ended, with the count the journal says, and release
    it. A pass that dies here leaves it held: the next one releases it (``_release``)."""
    job = t.action.job_id
    why = f"{view.state} (ExitCode {view.exit_code}) after {t.action.kind} {t.action_id}"
    try:
        actuator.requeue_hold(job)
        if t.status == "done":
            run_step(actuator, "set_gpus" if t.action.kind == "resize" else "whole_gpus",
                      t.action)
        actuator.release(job)
        actuator.start_now(job)
    except WattError as exc:
        return None, f"job {job} {why}: not requeued ({exc}); tried again every pass"
    count = "with the action's count" if t.status == "done" else "as it was"
    journal.write(t.action_id, "revived", t.action, f"job {job} {why}: requeued {count}")
    return Outcome(t.action, "revived", f"job {job} {why}: requeued {count}", True), ""


def _cancel_again(journal: Journal, actuator: Actuator, t: Touched,
                  seen: Mapping[str, Job] | None, now_s: float, watch_s: float,
                  outcomes: list[Outcome], warnings: list[str]) -> None:
    """A job a ``done`` cancel stopped: cancelled again when slurmctld shows it pending or
    running (it lost the cancel), else settled; after ``watch_s``, settled as it is."""
    job = t.action.job_id
    try:
        if seen is not None:
            alive = job in seen and seen[job].state in ("PENDING", "RUNNING")
        else:
            view = actuator.observe(job)
            alive = view is not None and view.state in ("PENDING", "RUNNING")
    except WattError as exc:
        warnings.append(f"job {job} after cancel {t.action_id}: not checked ({exc}); checked "
                        "again next pass")
        return
    if not alive or now_s - (t.ended_s or t.begun_s) > watch_s:
        journal.write(t.action_id, "settled", t.action,
                      f"job {job} {'gone' if not alive else 'still there, no longer watched'}")
        return
    why = f"back after cancel {t.action_id} (slurmctld lost the cancel)"
    try:
        run_step(actuator, "cancel", t.action)
    except WattError as exc:
        warnings.append(f"job {job} {why}: not cancelled ({exc}); tried again every pass")
        return
    journal.write(t.action_id, "recancelled", t.action, f"job {job} {why}: cancelled again")
    outcomes.append(Outcome(t.action, "recancelled", f"job {job} {why}: cancelled again", True))
