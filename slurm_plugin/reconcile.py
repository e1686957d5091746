"""One reconcile pass: snapshot -> policy.reconcile -> journal -> Slurm actions -> journal.

The pass is a thin shell around the policy. Adapters are injected, so the same pass runs on
the live cluster (``wattctl reconcile``) and in tests; the simulator calls ``policy.reconcile``
directly with its own snapshot.

Guarantees:
- one pass at a time (``PassLock``); a second concurrent pass returns ``ran=False``;
- every action is journaled before and after each step; a crash leaves an unfinished action
  that the next pass finishes first, each step checked against the job's actual state
  (``actuate``); an action that could not release a job it held stays unfinished (``stuck``)
  and every later pass tries again, so no job is left held;
- after a resize or move has ended, its job is watched until it runs again (``watch``): one
  Slurm left held is released, one the requeue ended is requeued, one lost is a warning;
- idempotent: an action whose key was ``done`` in the last ``repeat_window_s`` is skipped;
- ``dry_run`` records each action as ``dry-run`` in the journal and runs no Slurm command.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping

from .actuate import Actuator, Outcome, execute
from .errors import StateError, WattError
from .gc_pause import gc_paused
from .history import FILE_NAME, History
from .journal import Journal, PassLock
from .model import Cluster, Readings
from .policy.base import Context, Policy
from .watch import watch


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
    watch_s: float = 3600.0,
    completing_wait_s: float = 10.0,
    now_s: Callable[[], float] = time.time,
) -> PassResult:
    t0 = time.perf_counter()
    state_dir = Path(state_dir)
    with PassLock(state_dir / "reconcile.lock") as lock:
        if not lock.acquired:
            return PassResult(ran=False, dry_run=dry_run, holder=lock.holder)
        result = PassResult(ran=True, dry_run=dry_run)
        journal = Journal(state_dir / "journal.jsonl")
        try:
            with gc_paused():       # the snapshot's millions of objects: no collection walks them
                _pass(result, journal, policy=policy, snapshot=snapshot, readings=readings,
                      actuator=actuator, state_dir=state_dir, settings=settings,
                      dry_run=dry_run, max_actions=max_actions,
                      repeat_window_s=repeat_window_s, watch_s=watch_s,
                      completing_wait_s=completing_wait_s, now_s=now_s)
        except StateError as exc:
            result.warnings.append(f"pass stopped, no further Slurm change: {exc}")
        result.warnings[:0] = journal.warnings
    result.total_s = time.perf_counter() - t0
    return result


def _stuck(result: PassResult, busy: set[str], outcome: Outcome) -> None:
    """An action left unfinished keeps its job from any other action this pass; one that
    could not release its job is a warning."""
    if outcome.status in ("stuck", "waiting"):
        busy.add(outcome.action.job_id)
    if outcome.status == "stuck":
        a = outcome.action
        result.warnings.append(f"{a.kind} of job {a.job_id} unfinished: {outcome.detail}")


def _pass(result: PassResult, journal: Journal, *, policy: Policy,
          snapshot: Callable[[], Cluster], readings: Callable[[], Readings],
          actuator: Actuator, state_dir: Path, settings: Mapping[str, Any], dry_run: bool,
          max_actions: int, repeat_window_s: float, watch_s: float, completing_wait_s: float,
          now_s: Callable[[], float]) -> None:
    """The pass under the lock: recovery first, then snapshot, readings, policy, actions.
    Bad input becomes a warning in ``result``: the pass decides without it."""
    history = History(state_dir / FILE_NAME)
    if history.warning:
        result.warnings.append(history.warning)

    busy: set[str] = set()       # jobs whose unfinished action could not be finished
    if not dry_run:
        for action_id, action, done_steps in journal.unfinished():
            outcome = execute(journal, actuator, action_id, action, done_steps, recovered=True,
                              completing_wait_s=completing_wait_s)
            result.outcomes.append(outcome)
            _stuck(result, busy, outcome)

    t1 = time.perf_counter()
    try:
        cluster: Cluster | None = snapshot()
    except WattError as exc:
        result.warnings.append(f"Slurm snapshot failed, no decision this pass: {exc}")
        cluster = None
    if not dry_run:
        outcomes, said = watch(journal, actuator, busy, now_s(), watch_s,
                               cluster.jobs if cluster is not None else None)
        result.outcomes.extend(outcomes)
        result.warnings.extend(said)
    if cluster is None:
        return
    result.warnings.extend(cluster.warnings)
    try:
        reads = readings()
    except WattError as exc:
        result.warnings.append(f"telemetry unavailable, deciding without it: {exc}")
        reads = Readings()
    result.warnings.extend(reads.warnings)
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
        if action.job_id in busy:
            result.outcomes.append(Outcome(action, "skipped", "an earlier action on this "
                                                              "job is still unfinished"))
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
        outcome = execute(journal, actuator, action_id, action, [], False,
                          completing_wait_s=completing_wait_s)
        result.outcomes.append(outcome)
        _stuck(result, busy, outcome)
    if not dry_run:
        history.forget_groups(cluster.jobs)
        history.save()
