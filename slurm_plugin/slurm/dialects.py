"""How each Slurm JSON version spells the fields the parsers read (see ``formats``).

``dialect(fmt)`` gives the reader for one document; ``parse`` asks it for states, counts,
times, exit codes, allocated nodes and strings, and builds one model whatever the version. A
value of the wrong shape or type raises ``FormatError`` naming the command, release, record and
field, where it is read.
"""

from __future__ import annotations

from math import isfinite
from typing import Any, Callable, Mapping, Sequence, TypeVar

from ..errors import InputError
from .formats import SlurmFormat

T = TypeVar("T")

# job_state_string() of Slurm: the flag shown instead of the base state, in this order.
_SHOWN_FLAGS = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_FED",
                "REQUEUE_HOLD", "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD",
                "SIGNALING")
_JOB_BASES = frozenset({"PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED",
                        "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
                        "OUT_OF_MEMORY"})
_NODE_BASES = frozenset({"IDLE", "DOWN", "ALLOCATED", "ERROR", "MIXED", "FUTURE", "UNKNOWN"})


class Legacy:
    """Slurm 22.05 (openapi/v0.0.38): plain integers with 0 for unset, strings for states."""

    def __init__(self, fmt: SlurmFormat) -> None:
        self.fmt = fmt

    def _int(self, raw: Mapping[str, Any], key: str) -> int | None:
        return self._number(raw, key, raw.get(key))

    def _number(self, raw: Mapping[str, Any], field: str, value: object) -> int | None:
        if value is None:
            return None
        if _is_number(value):
            return int(value)
        raise self.fmt.error(_where(raw, field), value, "an integer")

    def job_id(self, raw: Mapping[str, Any]) -> str:
        value = raw.get("job_id")
        if type(value) is int or (type(value) is str and value):
            return str(value)
        raise self.fmt.error("job_id", value, "a job id")

    def text(self, raw: Mapping[str, Any], key: str) -> str:
        """A string field: "" when absent or null, a number as its decimal text."""
        value = raw.get(key)
        return "" if value is None else self._string(raw, key, value)

    def texts(self, raw: Mapping[str, Any], key: str) -> tuple[str, ...]:
        """A list of strings: () when absent or null."""
        value = raw.get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.fmt.error(_where(raw, key), value, "a list of strings")
        return tuple(self._string(raw, f"{key}[{i}]", v) for i, v in enumerate(value))

    def _string(self, raw: Mapping[str, Any], field: str, value: object) -> str:
        if type(value) is str:
            return value
        if _is_number(value):
            return str(value)
        raise self.fmt.error(_where(raw, field), value, "a string")

    def parsed(self, raw: Mapping[str, Any], key: str, parse: Callable[[str], T],
               expected: str) -> T:
        """``parse`` of the string field ``key``; the ``InputError`` it raises names the
        record and the field."""
        return self._parse(raw, key, self.text(raw, key), parse, expected)

    def parsed_each(self, raw: Mapping[str, Any], key: str, parse: Callable[[str], T],
                    expected: str) -> tuple[T, ...]:
        """``parse`` of each string of the list field ``key``."""
        return tuple(self._parse(raw, f"{key}[{i}]", text, parse, expected)
                     for i, text in enumerate(self.texts(raw, key)))

    def _parse(self, raw: Mapping[str, Any], field: str, text: str, parse: Callable[[str], T],
               expected: str) -> T:
        try:
            return parse(text)
        except InputError as exc:
            reason = str(exc).removeprefix("slurm: ")
            raise self.fmt.error(_where(raw, field), text, f"{expected} ({reason})") from None

    def _object(self, raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        """An object field: {} when absent or null."""
        value = raw.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fmt.error(_where(raw, key), value, "an object")
        return value

    def _names(self, raw: Mapping[str, Any], field: str, rows: object,
               key: str) -> tuple[str, ...]:
        """The ``key`` of each entry of the list ``rows`` (at ``field`` of job ``raw``): the
        names of its allocated nodes."""
        if not isinstance(rows, list):
            raise self.fmt.error(_where(raw, field), rows, f"a list of {{{key}, ...}}")
        names = []
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise self.fmt.error(_where(raw, f"{field}[{i}]"), row, f"{{{key}, ...}}")
            names.append(self._string(raw, f"{field}[{i}].{key}", row.get(key)))
        return tuple(names)

    def job_state(self, raw: Mapping[str, Any]) -> str:
        value = raw.get("job_state")
        if not isinstance(value, str):
            raise self.fmt.error(_where(raw, "job_state"), value, "a state name")
        return value

    def count(self, raw: Mapping[str, Any], key: str) -> int | None:
        return self._int(raw, key)

    def epoch(self, raw: Mapping[str, Any], key: str) -> float | None:
        value = self._int(raw, key)
        return float(value) if value else None

    def minutes(self, raw: Mapping[str, Any], key: str) -> float | None:
        """A time limit in minutes; None when unlimited or unset."""
        value = self._int(raw, key)
        return float(value) if value is not None else None

    def exit_code(self, raw: Mapping[str, Any]) -> int | None:
        """The raw wait status -> exit code (128 + signal when killed)."""
        status = self._int(raw, "exit_code")
        return None if status is None else wait_status_code(status)

    def alloc_nodes(self, raw: Mapping[str, Any]) -> tuple[str, ...]:
        rows = self._object(raw, "job_resources").get("allocated_nodes")
        return self._names(raw, "job_resources.allocated_nodes", rows, "nodename") \
            if rows is not None else ()

    def node_rows(self, doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        rows = doc.get("nodes")
        if not isinstance(rows, list):
            raise self.fmt.error("nodes", rows, "a list of nodes (sinfo --json)")
        return rows

    def node_name(self, raw: Mapping[str, Any], k: int) -> str:
        """The name of entry ``k`` of the node listing."""
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise self.fmt.error(f"nodes[{k}].name", name, "a node name")
        return name

    def node_state(self, raw: Mapping[str, Any]) -> str:
        flags = self.texts(raw, "state_flags")
        return legacy_node_state(self.text(raw, "state"), flags)

    def features(self, raw: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(f for f in self.text(raw, "features").split(",") if f)


class Current(Legacy):
    """Slurm 23.02+ (data_parser v0.0.42 and later): ``{set, infinite, number}`` numbers,
    state lists, exit code objects, ``job_resources.nodes.allocation``."""

    def _number(self, raw: Mapping[str, Any], field: str, value: object) -> int | None:
        """A ``{set, infinite, number}`` value (or a plain number): None when unset or
        infinite (an unlimited time limit)."""
        if type(value) is dict:
            if value.get("set") and not value.get("infinite"):
                number = value.get("number")
                if _is_number(number):
                    return int(number)
            elif "set" in value:
                return None
        elif value is None:
            return None
        elif _is_number(value):
            return int(value)
        raise self.fmt.error(_where(raw, field), value, "{set, infinite, number}")

    def job_state(self, raw: Mapping[str, Any]) -> str:
        names = self.texts(raw, "job_state")
        if not names:
            raise self.fmt.error(_where(raw, "job_state"), names, "a list of state names")
        state = job_state_shown(names)
        if state is None:
            raise self.fmt.error(_where(raw, "job_state"), names,
                                 f"one of {', '.join(sorted(_JOB_BASES))}")
        return state

    def exit_code(self, raw: Mapping[str, Any]) -> int | None:
        value = raw.get("exit_code")
        if value is None:
            return None
        if not isinstance(value, dict) or not isinstance(value.get("status"), list):
            raise self.fmt.error(_where(raw, "exit_code"), value,
                                 "{status: [...], return_code: {...}, signal: {...}}")
        status = value["status"]
        if not all(type(s) is str for s in status):
            raise self.fmt.error(_where(raw, "exit_code.status"), status,
                                 "a list of status names")
        if "SIGNALED" in status or "CORE_DUMPED" in status:
            signal = value.get("signal")
            number = self._number(raw, "exit_code.signal.id", signal.get("id")) \
                if isinstance(signal, dict) else None
            return 128 + number if number else None
        if "SUCCESS" in status or "ERROR" in status:
            return self._number(raw, "exit_code.return_code", value.get("return_code"))
        return None     # PENDING, INVALID: no exit code yet

    def alloc_nodes(self, raw: Mapping[str, Any]) -> tuple[str, ...]:
        nodes = self._object(raw, "job_resources").get("nodes")
        if not nodes:
            return ()
        alloc = nodes.get("allocation") if isinstance(nodes, dict) else None
        return self._names(raw, "job_resources.nodes.allocation", alloc, "name")

    def node_rows(self, doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        rows = doc.get("nodes")
        if not isinstance(rows, list):
            if "sinfo" in doc:
                raise self.fmt.error("nodes", "(sinfo rows)", "one entry per node: read "
                                     "`scontrol --json show nodes`, not `sinfo --json` "
                                     "(which merges nodes of one state since 23.02)")
            raise self.fmt.error("nodes", rows, "a list of nodes (scontrol --json show nodes)")
        return rows

    def node_state(self, raw: Mapping[str, Any]) -> str:
        names = self.texts(raw, "state")
        if not names:
            raise self.fmt.error(_where(raw, "state"), names, "a list of node state names")
        return node_state_of(names)

    def features(self, raw: Mapping[str, Any]) -> tuple[str, ...]:
        if isinstance(raw.get("features"), list):
            return tuple(f for f in self.texts(raw, "features") if f)
        return super().features(raw)


def wait_status_code(status: int) -> int:
    """A raw wait status -> exit code (128 + signal when killed)."""
    return 128 + (status & 0x7F) if status & 0x7F else status >> 8


def job_state_shown(names: Sequence[str]) -> str | None:
    """The state Slurm shows for a job's state names (23.02+): the first shown flag, else the
    base state; None when neither is there."""
    if len(names) == 1 and names[0] in _JOB_BASES:     # the common case: a base state alone
        return names[0]
    for flag in _SHOWN_FLAGS:
        if flag in names:
            return flag
    return next((name for name in names if name in _JOB_BASES), None)


def legacy_node_state(state: str, flags: tuple[str, ...]) -> str:
    """22.05: ``"idle"`` + ``["DRAIN"]`` -> ``"idle+drain"``."""
    return "+".join([(state or "unknown").lower(), *(f.lower() for f in flags if f)])


def node_state_of(names: tuple[str, ...]) -> str:
    """23.02+: ``["IDLE", "DRAIN"]`` -> ``"idle+drain"`` (the base state first)."""
    base = next((n for n in names if n in _NODE_BASES), "UNKNOWN")
    return "+".join([base.lower(), *(n.lower() for n in names if n != base and n)])


def _is_number(value: object) -> bool:
    """A number Slurm can write: a 64-bit integer or a finite float (not a bool)."""
    return (type(value) is int and -2**63 <= value < 2**64) or \
        (type(value) is float and isfinite(value))


def _where(raw: Mapping[str, Any], key: str) -> str:
    ident = raw.get("job_id") or raw.get("name")
    return f"{key} (of {ident})" if ident is not None else key


def dialect(fmt: SlurmFormat) -> Legacy:
    return Legacy(fmt) if fmt.legacy else Current(fmt)
