"""How each Slurm JSON version spells the fields the parsers read (see ``formats``).

``dialect(fmt)`` gives the reader for one document; ``parse`` asks it for states, counts,
times, exit codes and allocated nodes, and builds one model whatever the version. A value of
the wrong shape raises ``FormatError`` naming the command, release and field.
"""

from __future__ import annotations

from typing import Any, Mapping

from .formats import SlurmFormat

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
        value = raw.get(key)
        if value is None:
            return None
        if type(value) is int or type(value) is float:
            return int(value)
        raise self.fmt.error(_where(raw, key), value, "an integer")

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
        if status is None:
            return None
        return 128 + (status & 0x7F) if status & 0x7F else status >> 8

    def alloc_nodes(self, raw: Mapping[str, Any]) -> tuple[str, ...]:
        res = raw.get("job_resources") or {}
        return tuple(n["nodename"] for n in res.get("allocated_nodes") or ())

    def node_rows(self, doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        rows = doc.get("nodes")
        if not isinstance(rows, list):
            raise self.fmt.error("nodes", rows, "a list of nodes (sinfo --json)")
        return rows

    def node_state(self, raw: Mapping[str, Any]) -> str:
        flags = [str(f).lower() for f in raw.get("state_flags") or ()]
        return "+".join([str(raw.get("state", "unknown")).lower(), *flags])

    def features(self, raw: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(f for f in str(raw.get("features") or "").split(",") if f)


class Current(Legacy):
    """Slurm 23.02+ (data_parser v0.0.42 and later): ``{set, infinite, number}`` numbers,
    state lists, exit code objects, ``job_resources.nodes.allocation``."""

    def _int(self, raw: Mapping[str, Any], key: str) -> int | None:
        """A ``{set, infinite, number}`` value (or a plain number): None when unset or
        infinite (an unlimited time limit)."""
        value = raw.get(key)
        if type(value) is dict:
            if value.get("set") and not value.get("infinite"):
                number = value.get("number")
                if type(number) is int or type(number) is float:
                    return int(number)
            elif "set" in value:
                return None
        elif value is None:
            return None
        elif type(value) is int or type(value) is float:
            return int(value)
        raise self.fmt.error(_where(raw, key), value, "{set, infinite, number}")

    def job_state(self, raw: Mapping[str, Any]) -> str:
        names = raw.get("job_state")
        if not isinstance(names, list) or not names:
            raise self.fmt.error(_where(raw, "job_state"), names, "a list of state names")
        for flag in _SHOWN_FLAGS:
            if flag in names:
                return flag
        for name in names:
            if name in _JOB_BASES:
                return str(name)
        raise self.fmt.error(_where(raw, "job_state"), names,
                             f"one of {', '.join(sorted(_JOB_BASES))}")

    def exit_code(self, raw: Mapping[str, Any]) -> int | None:
        value = raw.get("exit_code")
        if value is None:
            return None
        if not isinstance(value, dict) or not isinstance(value.get("status"), list):
            raise self.fmt.error(_where(raw, "exit_code"), value,
                                 "{status: [...], return_code: {...}, signal: {...}}")
        status = value["status"]
        if "SIGNALED" in status or "CORE_DUMPED" in status:
            signal = value.get("signal")
            number = self._int(signal, "id") if isinstance(signal, dict) else None
            return 128 + number if number else None
        if "SUCCESS" in status or "ERROR" in status:
            return self._int(value, "return_code")
        return None     # PENDING, INVALID: no exit code yet

    def alloc_nodes(self, raw: Mapping[str, Any]) -> tuple[str, ...]:
        res = raw.get("job_resources") or {}
        nodes = res.get("nodes") if isinstance(res, dict) else None
        if not nodes:
            return ()
        alloc = nodes.get("allocation") if isinstance(nodes, dict) else None
        if not isinstance(alloc, list):
            raise self.fmt.error(_where(raw, "job_resources.nodes.allocation"), nodes,
                                 "a list of {name, ...}")
        return tuple(str(n["name"]) for n in alloc)

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
        names = raw.get("state")
        if not isinstance(names, list) or not names:
            raise self.fmt.error(_where(raw, "state"), names, "a list of node state names")
        base = next((n for n in names if n in _NODE_BASES), "UNKNOWN")
        return "+".join([base.lower(), *(str(n).lower() for n in names if n != base)])

    def features(self, raw: Mapping[str, Any]) -> tuple[str, ...]:
        value = raw.get("features")
        if isinstance(value, list):
            return tuple(str(f) for f in value if f)
        return super().features(raw)


def _where(raw: Mapping[str, Any], key: str) -> str:
    ident = raw.get("job_id") or raw.get("name")
    return f"{key} (of {ident})" if ident is not None else key


def dialect(fmt: SlurmFormat) -> Legacy:
    return Legacy(fmt) if fmt.legacy else Current(fmt)
