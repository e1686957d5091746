"""Append-only, fsync'd journal of reconcile actions, and the pass lock.

Every action is written before it runs (``begin``), after each step, and when it ends
(``done``, ``failed`` or ``dry-run``). A pass that crashed leaves actions with a ``begin`` and
no end: the next pass reads them back with ``unfinished()`` and finishes them.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any, Iterator

from .model import Action
from .record import asdict, fields, record

END_STATES = ("done", "failed", "dry-run", "skipped")


@record
class Entry:
    action_id: str
    event: str                 # begin | step:<name> | done | failed | dry-run | skipped
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


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, action_id: str, event: str, action: Action, detail: str = "") -> Entry:
        entry = Entry(action_id, event, action_to_dict(action), time.time(), detail)
        line = json.dumps(asdict(entry), sort_keys=True) + "\n"
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        return entry

    def entries(self) -> Iterator[Entry]:
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    yield Entry(**json.loads(line))
                except (ValueError, TypeError):
                    continue   # a line torn by a crash mid-write: the action shows as unfinished

    def unfinished(self) -> list[tuple[str, Action, list[str]]]:
        """Actions begun and never ended: (id, action, steps already done), oldest first."""
        begun: dict[str, Action] = {}
        steps: dict[str, list[str]] = {}
        for e in self.entries():
            if e.event == "begin":
                begun[e.action_id] = action_from_dict(e.action)
                steps[e.action_id] = []
            elif e.event.startswith("step:") and e.action_id in steps:
                steps[e.action_id].append(e.event[5:])
            elif e.event in END_STATES:
                begun.pop(e.action_id, None)
        return [(aid, a, steps[aid]) for aid, a in begun.items()]

    def done_keys(self, since_s: float) -> set[str]:
        """Keys of actions that ended ``done`` after ``since_s`` (for idempotence)."""
        return {action_from_dict(e.action).key for e in self.entries()
                if e.event == "done" and e.t_s >= since_s}


class PassLock:
    """A non-blocking exclusive lock: ``acquired`` is False when another pass holds it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: Any = None
        self.acquired = False
        self.holder = ""

    def __enter__(self) -> "PassLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._fh.seek(0)
            self.holder = self._fh.read().strip()
            self._fh.close()
            self._fh = None
            return self
        self.acquired = True
        self._fh.seek(0)
        self._fh.truncate()
        self._fh.write(f"pid {os.getpid()}")
        self._fh.flush()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None
