"""Carrying out one reconcile action, step by step, idempotent against Slurm's actual state.

Each step is checked against the job as Slurm shows it now (``Actuator.observe``) before it
runs, so replaying an action after a crash at any point (after a Slurm command whose journal
line was never written, after a journal line, with slurmctld gone) never repeats a step that
took effect and never fails on one: a job already held is not held again, a GPU count already
set is not set again, a job already released is not released again.

No job we touched is left held: when a step fails, the job is read again and, if it is still
held, released as it is (``release``, ``start_now``). When that cannot be done either (the
controller is down), the action is journaled ``stuck``, which is not an end state: every later
pass tries again until the job is released or gone, and says so.

slurmctld killed before it saved a requeue shows the job as never held: failed by the
requeue's signal, or running again. The hold is then made again (``revived``). A released job
still completing (its processes stopping) gets its start time once it has left COMPLETING: a
bounded wait, then ``waiting`` (not an end state either) and the next pass sets it. What
happens to a job after its action ended is the watch's (``watch.py``).

What each action kind does step by step is defined once, for the live reconciler and the
simulator alike: its steps (``STEPS``, ``_steps``), whether one must still run (``_decide``)
and what it calls (``run_step``) on a ``Port``. ``execute`` runs them on Slurm, journaled and
crash-safe; ``interpret`` runs them without a journal, on the simulated cluster
(``sim/sim_port.py``) or any other port.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from .errors import WattError
from .journal import Journal
from .model import Action
from .record import record


ENDED = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
         "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY")
# The signals a requeue stops a job's processes with (SIGTERM, then SIGKILL after KillWait)
REQUEUE_SIGNALS = (9, 15)


def stopped_by_requeue(state: str, exit_code: str) -> bool:
    """How a job our requeue stopped shows after slurmctld lost the requeue (killed before it
    saved it): NODE_FAIL, or FAILED with its processes ended by the requeue's signal
    (``ExitCode=0:15``), never a job whose own script failed."""
    if state == "NODE_FAIL":
        return True
    signal = exit_code.partition(":")[2]
    return state == "FAILED" and signal.isdigit() and int(signal) in REQUEUE_SIGNALS


@record
class JobView:
    """What a step needs to know about a job, as Slurm shows it now."""

    state: str              # PENDING, RUNNING, ...
    held: bool              # pending with priority 0 (requeuehold, scontrol hold)
    tres_per_node: str      # gres:gpu:2 (the ``gres:`` spelling of every release)
    num_nodes: int = 1
    reason: str = ""        # Slurm's Reason= (launch_failed_requeued_held, JobHeldUser, ...)
    exit_code: str = ""     # Slurm's ExitCode= ("0:15": its processes ended by SIGTERM)
    start_s: float | None = None    # when it started (running) and ended (ended), epoch s
    end_s: float | None = None

    @property
    def running(self) -> bool:
        return self.state in ("RUNNING", "CONFIGURING")

    @property
    def pending(self) -> bool:
        return self.state == "PENDING"

    @property
    def completing(self) -> bool:
        """Requeued and released, its processes still stopping: Slurm starts it only after."""
        return not self.held and (self.state == "COMPLETING" or self.state.startswith("REQUEUE"))

    @property
    def ended(self) -> bool:
        return self.state in ENDED

    @property
    def revivable(self) -> bool:
        return stopped_by_requeue(self.state, self.exit_code)


class Port(Protocol):
    """What the steps of an action run on: Slurm's commands live (``live.SlurmActuator``),
    the simulated cluster's state in the simulator (``sim/sim_port.py``)."""

    def observe(self, job_id: str) -> JobView | None: ...   # None: the job has ended
    def requeue_hold(self, job_id: str) -> None: ...
    def set_gpus(self, job_id: str, gpus: int, num_nodes: int | None = None) -> None: ...
    def whole_gpus(self, job_id: str) -> None: ...
    def set_tier(self, job_id: str, tier: int) -> None: ...
    def release(self, job_id: str) -> None: ...
    def start_now(self, job_id: str) -> None: ...
    def defer(self, job_id: str, begin_s: float) -> None: ...
    def cancel(self, job_id: str) -> None: ...
    def set_power_cap(self, job_id: str, power_cap_w: float | None) -> None: ...
    def set_time_limit(self, job_id: str, time_limit_s: float) -> None: ...
    def advise(self, job_id: str, batch_size: int, lr_scale: float | None,
               from_batch_size: int, why: str) -> None: ...


class Actuator(Port, Protocol):
    """The live port, with what the watch (``watch.py``) needs besides: the accounting of a
    job that ended, and a job slurmctld forgot submitted again."""

    # (state, exit code, end epoch s) from the accounting; None: no such job there either
    def accounting(self, job_id: str) -> tuple[str, str, float | None] | None: ...
    # a job slurmctld forgot, submitted again from the accounting: the new job id; the one
    # already submitted again for it that slurmctld knows (None: none)
    def resubmit(self, job_id: str, gpus: int | None, num_nodes: int | None) -> str: ...
    def resubmitted(self, job_id: str) -> str | None: ...


# The ordered Slurm steps of each action kind; ``observe`` only feeds the history.
STEPS: dict[str, tuple[str, ...]] = {
    "resize": ("requeue_hold", "set_gpus", "release", "start_now"),
    "move_exclusive": ("requeue_hold", "whole_gpus", "release", "start_now"),
    "unpin": ("whole_gpus",),          # a pending job: nothing to hold or restart
    "defer": ("defer",),
    "cancel": ("cancel",),
    "power_cap": ("set_power_cap",),   # recorded in Slurm; the node side applies it
    "batch": ("advise",),              # advice the job reads (progress API); no Slurm change
    "observe": (),
    "note": (),
}
HOLDS = ("resize", "move_exclusive")


@dataclass
class Outcome:
    action: object
    # done | failed | stuck | waiting | dry-run | skipped; the watch's revived | released |
    # recancelled | resubmitted
    status: str
    detail: str = ""
    recovered: bool = False

    def as_dict(self) -> dict:
        a = self.action
        return {"kind": a.kind, "job_id": a.job_id, "policy": a.policy, "gpus": a.gpus,
                "begin_s": a.begin_s, "why": a.why, "predicted": dict(a.predicted),
                "batch_size": a.batch_size, "lr_scale": a.lr_scale, "nice": a.nice,
                # power_cap: the new per-GPU cap (None: cap removed) and the raised time limit;
                # resize: the nodes and node count
                "power_cap_w": a.power_cap_w, "time_limit_s": a.time_limit_s,
                "nodes": list(a.nodes), "num_nodes": a.num_nodes,
                "status": self.status, "detail": self.detail, "recovered": self.recovered}


class Finished(Exception):
    """The action ends before its last step: ``status`` and why."""

    def __init__(self, status: str, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


def whole_gpus(tres_per_node: str) -> int | None:
    """The whole GPUs per node a request asks for, typed or not (``gres:gpu:2``,
    ``gres:gpu:g1:1,gres:gpu:g3:1``: 2); None where it asks for shares (shard, mps) or cannot
    be read: then its GPU count is set whatever it is."""
    total = 0
    for item in (tres_per_node or "").split(","):
        name, _, rest = item.strip().removeprefix("gres:").partition(":")
        if name in ("shard", "mps"):
            return None
        if name == "gpu":
            count = rest.rpartition(":")[2]
            if not count.isdigit():
                return None
            total += int(count)
    return total or None


def _decide(step: str, action: Action, view: JobView | None, done: list[str],
            recovered: bool) -> bool:
    """Whether ``step`` must still run, given the job now; raise ``Finished`` when the action
    has nothing left to do."""
    job = action.job_id
    if view is None or view.ended:
        if step == "cancel":
            raise Finished("done", f"job {job} had already ended")
        shown = "is unknown to Slurm" if view is None else f"ended {view.state}"
        raise Finished("skipped" if not done else "done",
                       f"job {job} {shown} before {step}; nothing is held")
    if step == "requeue_hold":
        if view.held:
            return False                       # the hold took effect before a crash
        if recovered or not view.running:
            raise Finished("skipped", f"job {job} is {view.state.lower()} and not held: the "
                                      "hold never took effect; this pass decides afresh")
        return True
    if step == "set_gpus":
        return (whole_gpus(view.tres_per_node) != int(action.gpus or 1)
                or (action.num_nodes is not None and view.num_nodes != action.num_nodes))
    if step == "release":
        return view.held
    if step == "start_now":
        return view.pending and not view.held
    if step == "defer":
        if not view.pending:
            raise Finished("skipped", f"job {job} is {view.state.lower()}: nothing to defer")
        return True
    if step == "whole_gpus" and action.kind == "unpin" and not view.pending:
        raise Finished("skipped", f"job {job} is {view.state.lower()}: it started where it "
                                  "was pinned; nothing to unpin")
    return True                                # whole_gpus (reads the job itself), cancel


def _hold_undone(action: Action, view: JobView | None, done: list[str],
                 recovered: bool) -> str:
    """Why this action's hold must be made again ('' when not): slurmctld was killed after
    the requeue and before it saved it, so it shows the job as if never held: failed (its
    processes ended by the requeue's signal) or, once the hold was journaled and before the
    release, running."""
    if action.kind not in HOLDS or view is None or "release" in done:
        return ""
    if view.revivable and ("requeue_hold" in done or recovered):
        return f"was {view.state} ({view.exit_code}) after our requeue"
    if "requeue_hold" in done and view.running and not view.held:
        return "was running again after our requeue"
    return ""


def run_step(port: Port, step: str, action: Action) -> None:
    if step == "set_gpus":
        if action.num_nodes is None:
            port.set_gpus(action.job_id, int(action.gpus or 1))
        else:
            port.set_gpus(action.job_id, int(action.gpus or 1), action.num_nodes)
    elif step == "defer":
        port.defer(action.job_id, float(action.begin_s or time.time()))
    elif step == "set_tier":
        port.set_tier(action.job_id, int(action.nice or 0))
    elif step == "set_power_cap":
        port.set_power_cap(action.job_id, action.power_cap_w)
    elif step == "set_time_limit":
        port.set_time_limit(action.job_id, float(action.time_limit_s or 0.0))
    elif step == "advise":
        port.advise(action.job_id, int(action.batch_size or 0), action.lr_scale,
                    int(action.predicted.get("from_batch_size", 0)), action.why)
    else:
        getattr(port, step)(action.job_id)


def _release_if_held(actuator: Actuator, action: Action) -> tuple[bool, str]:
    """After a failure: (still possibly held, what was done). Reads the job first."""
    try:
        view = actuator.observe(action.job_id)
        if view is None or not view.held:
            return False, "; the job is not held"
        actuator.release(action.job_id)
        actuator.start_now(action.job_id)
    except WattError as exc:
        return True, (f"; job {action.job_id} may still be held: the next pass tries again to "
                      f"release it ({exc})")
    return False, "; the job was released as it is"


def _with_extra_steps(steps: tuple[str, ...], action: Action) -> tuple[str, ...]:
    """A resize that sets a batch also writes the advice, and one that sets a queue tier sets
    it, once the GPU count is set and before the job is released: its next run reads the
    advice at start, and it waits in that tier. A cap that raises the job's time limit raises
    it first: if that fails the cap is not set (the next pass decides again), where a cap set
    without its limit could have the job killed at the old one."""
    if action.kind == "power_cap" and action.time_limit_s is not None:
        return ("set_time_limit", *steps)
    if action.kind != "resize" or "set_gpus" not in steps:
        return steps
    extra = (("advise",) if action.batch_size is not None else ()) + \
        (("set_tier",) if action.nice is not None else ())
    at = steps.index("set_gpus") + 1
    return (*steps[:at], *extra, *steps[at:])


def _steps(port: Port, action: Action, done: list[str]) -> tuple[str, ...]:
    """The steps of ``action``. A resize of a job still pending and not held by us (an
    elastic job admitted at another count before it started) only sets its GPU count: there is
    nothing to stop, hold or release, and its start time stays as it was."""
    if action.kind == "resize" and "requeue_hold" not in done:
        try:
            view = port.observe(action.job_id)
        except WattError:
            return _with_extra_steps(STEPS["resize"], action)   # the first step reads the job again
        if view is not None and view.pending and not view.held:
            return _with_extra_steps(("set_gpus",), action)
    return _with_extra_steps(STEPS[action.kind], action)


def interpret(port: Port, action: Action) -> None:
    """Carry out ``action`` on ``port`` as ``execute`` does, without journal or recovery: the
    same steps (``_steps``), the job read before each and a step it no longer needs left out,
    the action ended where nothing is left to do (``_decide``). The simulator runs every
    action this way, on its own port (``sim/sim_port.py``)."""
    done: list[str] = []
    for step in _steps(port, action, done):
        try:
            if _decide(step, action, port.observe(action.job_id), done, False):
                run_step(port, step, action)
        except Finished:
            return
        done.append(step)


class Waiting(Exception):
    """The job is still completing after the bounded wait: the next pass sets its start."""


def _await_completion(actuator: Actuator, journal: Journal, action_id: str, action: Action,
                      view: JobView | None, wait_s: float, poll_s: float) -> JobView | None:
    """The job once it has left COMPLETING after a requeue (its processes stopped), read
    every ``poll_s`` for at most ``wait_s`` (the wait is journaled): Slurm only starts it
    then, so a start time set before would not be read. Raises ``Waiting`` past the bound."""
    if view is None or not view.completing:
        return view
    journal.write(action_id, "wait:completing", action,
                  f"job {action.job_id} is {view.state}: waiting up to {wait_s:g} s")
    deadline = time.monotonic() + wait_s
    while view is not None and view.completing:
        if time.monotonic() >= deadline:
            raise Waiting(f"job {action.job_id} still {view.state} after {wait_s:g} s: its "
                          "start time is set on the next pass")
        time.sleep(poll_s)
        view = actuator.observe(action.job_id)
    return view


def execute(journal: Journal, actuator: Actuator, action_id: str, action: Action,
            done_steps: list[str], recovered: bool, completing_wait_s: float = 10.0,
            poll_s: float = 0.5) -> Outcome:
    """Run the steps of ``action`` not yet done, journaling each; see the module doc."""
    done = list(done_steps)
    for step in _steps(actuator, action, done):
        if step in done:
            continue
        try:
            view = actuator.observe(action.job_id)
            undone = _hold_undone(action, view, done, recovered)
            if undone:
                actuator.requeue_hold(action.job_id)
                journal.write(action_id, "revived", action,
                              f"job {action.job_id} {undone} (slurmctld lost it): requeued "
                              "again, held")
                view = actuator.observe(action.job_id)
            if step == "start_now":
                view = _await_completion(actuator, journal, action_id, action, view,
                                         completing_wait_s, poll_s)
            if _decide(step, action, view, done, recovered):
                run_step(actuator, step, action)
        except Finished as end:
            journal.write(action_id, end.status, action, end.detail)
            return Outcome(action, end.status, end.detail, recovered)
        except Waiting as wait:
            journal.write(action_id, "waiting", action, str(wait))
            return Outcome(action, "waiting", str(wait), recovered)
        except WattError as exc:
            detail = f"{step}: {exc}"
            held = False
            if action.kind in HOLDS:
                held, said = _release_if_held(actuator, action)
                detail += said
            status = "stuck" if held else "failed"
            journal.write(action_id, status, action, detail)
            return Outcome(action, status, detail, recovered)
        journal.write(action_id, f"step:{step}", action)
        done.append(step)
    journal.write(action_id, "done", action)
    return Outcome(action, "done", "", recovered)
