"""Append-only, fsync'd journal of reconcile actions, and the pass lock.

Every action is written before it runs (``begin``), after each step, and when it ends
(``done``, ``failed`` or ``dry-run``). A pass that crashed leaves actions with a ``begin`` and
no end: the next pass reads them back with ``unfinished()`` and finishes them.

A line that cannot be read (torn by a crash mid-write, bytes that are not UTF-8, JSON of
another shape) is skipped and named in ``Journal.warnings``: one bad line never stops the
recovery of the others. A write that fails (full disk) raises ``StateError``; the lock works
on a full disk too (its holder note is then missing).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from .errors import StateError
from .model import Action
from .record import asdict, fields, record

END_STATES = ("done", "failed", "dry-run", "skipped")


@record
class Entry:
    action_id: str
    # begin | step:<name> | done | failed | dry-run | skipped; not ends: stuck, waiting,
    # revived, wait:completing; after the end, the watch's released, revived, recancelled,
    # resubmitting and settled
    event: str
    action: dict[str, Any]
    t_s: float
    detail: str = ""


def action_to_dict(action: Action) -> dict[str, Any]:
    d = {name: getattr(action, name) for name in fields(action)}
    d["predicted"] = dict(action.predicted)
    d["nodes"] = list(action.nodes)
    return d


def action_from_dict(d: dict[str, Any]) -> Action:
    return Action(**{**d, "nodes": tuple(d.get("nodes", ())), "predicted": d.get("predicted", {})})


@dataclass
class Touched:
    """An action that changed a job, as the journal has it: its end status (None while
    unfinished) and when it began and ended (epoch s)."""

    action_id: str
    action: Action
    begun_s: float
    status: str | None = None
    ended_s: float | None = None


def _time(t_s: object) -> float:
    return float(t_s) if isinstance(t_s, (int, float)) else 0.0


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._warnings: dict[str, None] = {}      # each once, in order
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateError(f"reconcile: journal directory {path.parent}: {exc.strerror}; "
                             "fix reconcile.state_dir or its permissions") from None

    def write(self, action_id: str, event: str, action: Action, detail: str = "") -> Entry:
        entry = Entry(action_id, event, action_to_dict(action), time.time(), detail)
        line = json.dumps(asdict(entry), sort_keys=True) + "\n"
        try:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise StateError(f"reconcile: journal {self.path}: cannot write {event} of action "
                             f"{action_id} ({exc.strerror}); free space in reconcile.state_dir"
                             ) from None
        return entry

    @property
    def warnings(self) -> list[str]:
        """The lines and actions skipped by the reads so far, each named once."""
        return list(self._warnings)

    def entries(self) -> Iterator[Entry]:
        try:
            fh = open(self.path, "rb")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StateError(f"reconcile: journal {self.path}: {exc.strerror}") from None
        with fh:
            for number, raw in enumerate(fh, 1):
                raw = raw.strip()
                if not raw:
                    continue
                try:
                    entry = Entry(**json.loads(raw.decode("utf-8")))
                    if not isinstance(entry.action, dict) or not isinstance(entry.event, str):
                        raise TypeError("action is not an object")
                except (ValueError, TypeError) as exc:
                    # torn by a crash mid-write (its action shows as unfinished), or damaged
                    shown = raw[:80].decode("utf-8", "replace")
                    self._warnings[f"journal {self.path} line {number} skipped "
                                   f"({type(exc).__name__}: {exc}): {shown!r}"] = None
                    continue
                yield entry

    def _action(self, e: Entry) -> Action | None:
        try:
            return action_from_dict(e.action)
        except (TypeError, ValueError, AttributeError) as exc:
            self._warnings[f"journal {self.path}: action {e.action_id!r} skipped: {exc}"] = None
            return None

    def unfinished(self) -> list[tuple[str, Action, list[str]]]:
        """Actions begun and never ended: (id, action, steps already done), oldest first."""
        begun: dict[str, Action] = {}
        steps: dict[str, list[str]] = {}
        for e in self.entries():
            if e.event == "begin":
                action = self._action(e)
                if action is None:
                    continue
                begun[e.action_id] = action
                steps[e.action_id] = []
            elif e.event.startswith("step:") and e.action_id in steps:
                steps[e.action_id].append(e.event[5:])
            elif e.event in END_STATES:
                begun.pop(e.action_id, None)
        return [(aid, a, steps[aid]) for aid, a in begun.items()]

    def touched(self, kinds: tuple[str, ...]) -> list[Touched]:
        """The newest action of ``kinds`` per job that began and was not ``settled``, oldest
        first: what the watch checks after the action (``watch.py``). An older action on the
        same job is superseded by the newer one."""
        newest: dict[str, Touched] = {}
        by_id: dict[str, Touched] = {}
        for e in self.entries():
            if e.event == "begin" and e.action.get("kind") in kinds:
                action = self._action(e)
                if action is None:
                    continue
                t = Touched(e.action_id, action, _time(e.t_s))
                by_id[e.action_id] = newest[action.job_id] = t
            elif e.action_id in by_id and (e.event in END_STATES or e.event == "settled"):
                t = by_id[e.action_id]
                t.status, t.ended_s = e.event, _time(e.t_s)
        return [t for t in newest.values() if t.status != "settled"]

    def done_keys(self, since_s: float) -> set[str]:
        """Keys of actions that ended ``done`` after ``since_s`` (for idempotence)."""
        return {action.key for e in self.entries()
                if e.event == "done" and isinstance(e.t_s, (int, float)) and e.t_s >= since_s
                and (action := self._action(e)) is not None}


class PassLock:
    """A non-blocking exclusive lock: ``acquired`` is False when another pass holds it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: Any = None
        self.acquired = False
        self.holder = ""

    def __enter__(self) -> "PassLock":
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a+", encoding="utf-8", errors="replace")
        except OSError as exc:
            raise StateError(f"reconcile: lock {self.path}: {exc.strerror}; fix "
                             "reconcile.state_dir, its permissions or free space") from None
        try:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._fh.seek(0)
            self.holder = self._fh.read().strip()
            self._fh.close()
            self._fh = None
            return self
        self.acquired = True
        try:     # the holder note is for humans: on a full disk the lock holds without it
            self._fh.seek(0)
            self._fh.truncate()
            self._fh.write(f"pid {os.getpid()}")
            self._fh.flush()
        except OSError:
            pass
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None
