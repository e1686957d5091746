"""``dialects`` for the typed records of ``decode``: what differs between releases, read from
msgspec's ``Struct`` values (``parse._typed_job`` reads the rest straight from the record).

msgspec has checked each field's type already (``str | None``, ``int | Number | None``, ...),
so a reader only picks the dialect's shape out of a union and applies the rule ``dialects``
applies. Where ``dialects`` would raise, or the record does not say what it reads unambiguously
(``job_resources.nodes`` without ``allocation``: ``{}`` or a malformed one), a reader raises
``Unforeseen`` and ``parse`` reads the whole document again with ``dialects``, which gives the
warnings and errors. Whatever a reader here returns equals what its ``dialects`` counterpart
returns on the same JSON (tests/unit/test_slurm_decode.py holds them to that).
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from .decode import AllocationNodes, ExitCode, JobRecord, NodeRecord, Number
from .dialects import job_state_shown, legacy_node_state, node_state_of, wait_status_code
from .formats import SlurmFormat

T = TypeVar("T")
_LOW, _HIGH = -2**63, 2**64      # the integers dialects accept (64-bit, signed or not)


class Unforeseen(Exception):
    """A typed record that does not read the way its dialect says: read the json tree."""


class TypedLegacy:
    """Slurm 22.05 (openapi/v0.0.38), as ``dialects.Legacy``."""

    def __init__(self, fmt: SlurmFormat) -> None:
        self.fmt = fmt

    @staticmethod
    def number(value: Any) -> int | None:
        """A count or time (``parse._typed_job`` calls it a dozen times a job: a plain
        function, no method)."""
        if value is None:
            return None
        if type(value) is int and _LOW <= value < _HIGH:
            return value
        raise Unforeseen

    def job_id(self, raw: JobRecord) -> str:
        value = raw.job_id
        if type(value) is int or (type(value) is str and value):
            return str(value)
        raise Unforeseen

    def _string(self, value: Any) -> str:
        """A field typed ``str | list[str] | None`` where a string is read."""
        if value is None:
            return ""
        if type(value) is str:
            return value
        raise Unforeseen

    def texts(self, raw: Any, key: str) -> tuple[str, ...]:
        value = getattr(raw, key)
        if value is None:
            return ()
        if type(value) is list:
            return tuple(value)
        raise Unforeseen

    def parsed(self, raw: Any, key: str, parse: Callable[[str], T], expected: str) -> T:
        """``parse`` of a field typed ``str | None``."""
        return parse(getattr(raw, key) or "")

    def job_state(self, raw: JobRecord) -> str:
        value = raw.job_state
        if type(value) is str:
            return value
        raise Unforeseen

    def count(self, raw: Any, key: str) -> int | None:
        return self.number(getattr(raw, key))

    def exit_code(self, raw: JobRecord) -> int | None:
        status = self.number(raw.exit_code)
        return None if status is None else wait_status_code(status)

    def alloc_nodes(self, raw: JobRecord) -> tuple[str, ...]:
        res = raw.job_resources
        rows = res.allocated_nodes if res is not None else None
        return tuple([row.nodename for row in rows]) if rows is not None else ()

    def node_name(self, raw: NodeRecord, k: int) -> str:
        if type(raw.name) is str and raw.name:
            return raw.name
        raise Unforeseen

    def node_state(self, raw: NodeRecord) -> str:
        flags = self.texts(raw, "state_flags")
        return legacy_node_state(self._string(raw.state), flags)

    def features(self, raw: NodeRecord) -> tuple[str, ...]:
        return tuple(f for f in self._string(raw.features).split(",") if f)


class TypedCurrent(TypedLegacy):
    """Slurm 23.02+ (data_parser v0.0.42 and later), as ``dialects.Current``."""

    @staticmethod
    def number(value: Any) -> int | None:
        if type(value) is Number:
            if not value.set or value.infinite:
                return None
            value = value.number
            if value is None:
                raise Unforeseen
        elif value is None:
            return None
        if type(value) is int and _LOW <= value < _HIGH:
            return value
        raise Unforeseen

    def job_state(self, raw: JobRecord) -> str:
        names = raw.job_state
        if type(names) is not list:
            raise Unforeseen
        state = job_state_shown(names)
        if state is None:
            raise Unforeseen
        return state

    def exit_code(self, raw: JobRecord) -> int | None:
        value = raw.exit_code
        if value is None:
            return None
        if type(value) is not ExitCode:
            raise Unforeseen
        status = value.status
        if "SIGNALED" in status or "CORE_DUMPED" in status:
            number = self.number(value.signal.id) if value.signal is not None else None
            return 128 + number if number else None
        if "SUCCESS" in status or "ERROR" in status:
            return self.number(value.return_code)
        return None

    def alloc_nodes(self, raw: JobRecord) -> tuple[str, ...]:
        res = raw.job_resources
        nodes = res.nodes if res is not None else None
        if not nodes:
            return ()
        if type(nodes) is AllocationNodes and nodes.allocation is not None:
            return tuple([row.name for row in nodes.allocation])
        raise Unforeseen

    def node_state(self, raw: NodeRecord) -> str:
        names = self.texts(raw, "state")
        if not names:
            raise Unforeseen
        return node_state_of(names)

    def features(self, raw: NodeRecord) -> tuple[str, ...]:
        if type(raw.features) is list:
            return tuple(f for f in raw.features if f)
        return super().features(raw)


def typed_dialect(fmt: SlurmFormat) -> TypedLegacy:
    return TypedLegacy(fmt) if fmt.legacy else TypedCurrent(fmt)
