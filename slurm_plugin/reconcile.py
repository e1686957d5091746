"""One reconcile pass: snapshot -> policy.reconcile -> journal -> Slurm actions -> journal.

The pass is a thin shell around the policy. Adapters are injected, so the same pass runs on
the live cluster (``wattctl reconcile``) and in tests; the simulator calls ``policy.reconcile``
directly with its own snapshot.

Guarantees:
- one pass at a time (``PassLock``); a second concurrent pass returns ``ran=False``;
- every action is journaled before and after each step; a crash leaves an unfinished action
  that the next pass finishes first (a half-done resize is never left held);
- idempotent: an action whose key was ``done`` in the last ``repeat_window_s`` is skipped;
- ``dry_run`` records each action as ``dry-run`` in the journal and runs no Slurm command.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping, Protocol

from .errors import WattError
from .history import FILE_NAME, History
from .journal import Journal, PassLock
from .model import Action, Cluster, Readings
from .policy.base import Context, Policy


class Actuator(Protocol):
    def requeue_hold(self, job_id: str) -> None: ...
    def set_gpus(self, job_id: str, gpus: int) -> None: ...
    def whole_gpus(self, job_id: str) -> None: ...
    def release(self, job_id: str) -> None: ...
    def start_now(self, job_id: str) -> None: ...
    def defer(self, job_id: str, begin_s: float) -> None: ...
    def cancel(self, job_id: str) -> None: ...


# The ordered Slurm steps of each action kind; ``observe`` only feeds the history.
STEPS: dict[str, tuple[str, ...]] = {
    "resize": ("requeue_hold", "set_gpus", "release", "start_now"),
    "move_exclusive": ("requeue_hold", "whole_gpus", "release", "start_now"),
    "defer": ("defer",),
    "cancel": ("cancel",),
    "observe": (),
    "note": (),
}


def _run_step(actuator: Actuator, step: str, action: Action) -> None:
    if step == "set_gpus":
        actuator.set_gpus(action.job_id, int(action.gpus or 1))
    elif step == "defer":
        actuator.defer(action.job_id, float(action.begin_s or time.time()))
    else:
        getattr(actuator, step)(action.job_id)


@dataclass
class Outcome:
    action: Action
    status: str                 # done | failed | dry-run | skipped
    detail: str = ""
    recovered: bool = False

    def as_dict(self) -> dict[str, Any]:
        a = self.action
        return {"kind": a.kind, "job_id": a.job_id, "policy": a.policy, "gpus": a.gpus,
                "begin_s": a.begin_s, "why": a.why, "predicted": dict(a.predicted),
                "status": self.status, "detail": self.detail, "recovered": self.recovered}


@dataclass
class PassResult:
    ran: bool
    dry_run: bool
    holder: str = ""
    outcomes: list[Outcome] = field(default_factory=list)
    jobs_seen: int = 0
    nodes_seen: int = 0
    snapshot_s: float = 0.0
    policy_s: float = 0.0
    total_s: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"ran": self.ran, "dry_run": self.dry_run, "holder": self.holder,
                "jobs_seen": self.jobs_seen, "nodes_seen": self.nodes_seen,
                "snapshot_s": round(self.snapshot_s, 4), "policy_s": round(self.policy_s, 4),
                "total_s": round(self.total_s, 4), "warnings": self.warnings,
                "actions": [o.as_dict() for o in self.outcomes]}


def _undo_hold(actuator: Actuator, action: Action, failed: str, done_steps: list[str]) -> str:
    """After a failed step of a held job: release it as it was, so no job is left held."""
    if "requeue_hold" not in done_steps or failed in ("requeue_hold", "release", "start_now"):
        return ""
    try:
        actuator.release(action.job_id)
        actuator.start_now(action.job_id)
    except WattError as exc:
        return f"; the job stays held, release it by hand (scontrol release {action.job_id}): {exc}"
    return "; the job was released unchanged"


def _execute(journal: Journal, actuator: Actuator, action_id: str, action: Action,
             done_steps: list[str], recovered: bool) -> Outcome:
    done = list(done_steps)
    for step in STEPS[action.kind]:
        if step in done:
            continue
        try:
            _run_step(actuator, step, action)
        except WattError as exc:
            detail = f"{step}: {exc}" + _undo_hold(actuator, action, step, done)
            journal.write(action_id, "failed", action, detail)
            return Outcome(action, "failed", detail, recovered)
        journal.write(action_id, f"step:{step}", action)
        done.append(step)
    journal.write(action_id, "done", action)
    return Outcome(action, "done", "", recovered)


def reconcile_pass(
    *,
    policy: Policy,
    snapshot: Callable[[], Cluster],
    readings: Callable[[], Readings],
    actuator: Actuator,
    state_dir: Path,
    settings: Mapping[str, Any] = MappingProxyType({}),
    dry_run: bool = False,
    max_actions: int = 50,
    repeat_window_s: float = 600.0,
    now_s: Callable[[], float] = time.time,
) -> PassResult:
    t0 = time.perf_counter()
    state_dir = Path(state_dir)
    with PassLock(state_dir / "reconcile.lock") as lock:
        if not lock.acquired:
            return PassResult(ran=False, dry_run=dry_run, holder=lock.holder)
        journal = Journal(state_dir / "journal.jsonl")
        history = History(state_dir / FILE_NAME)
        result = PassResult(ran=True, dry_run=dry_run)
        if history.warning:
            result.warnings.append(history.warning)

        if not dry_run:
            for action_id, action, done_steps in journal.unfinished():
                result.outcomes.append(
                    _execute(journal, actuator, action_id, action, done_steps, recovered=True))

        t1 = time.perf_counter()
        cluster = snapshot()
        try:
            reads = readings()
        except WattError as exc:
            result.warnings.append(f"telemetry unavailable, deciding without it: {exc}")
            reads = Readings()
        result.snapshot_s = time.perf_counter() - t1
        result.jobs_seen, result.nodes_seen = len(cluster.jobs), len(cluster.nodes)

        t2 = time.perf_counter()
        ctx = Context(cluster=cluster, readings=reads, now_s=now_s(), settings=settings,
                      history=history.view())
        actions = policy.reconcile(ctx)
        result.policy_s = time.perf_counter() - t2

        recent = journal.done_keys(now_s() - repeat_window_s)
        acted = 0
        for action in actions:
            action_id = uuid.uuid4().hex[:12]
            if action.kind == "observe":
                if not dry_run:
                    for key, value in action.predicted.items():
                        history.add(key, float(value))
                journal.write(action_id, "dry-run" if dry_run else "done", action)
                result.outcomes.append(Outcome(action, "dry-run" if dry_run else "done"))
                continue
            if action.key in recent:
                result.outcomes.append(Outcome(action, "skipped", "done in an earlier pass"))
                continue
            if acted >= max_actions:
                result.outcomes.append(Outcome(action, "skipped", f"max_actions={max_actions}"))
                continue
            acted += 1
            if dry_run:
                journal.write(action_id, "dry-run", action)
                result.outcomes.append(Outcome(action, "dry-run"))
                continue
            journal.write(action_id, "begin", action)
            result.outcomes.append(_execute(journal, actuator, action_id, action, [], False))
        if not dry_run:
            history.forget_groups(cluster.jobs)
            history.save()
    result.total_s = time.perf_counter() - t0
    return result
