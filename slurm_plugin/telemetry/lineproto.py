"""InfluxDB line protocol: one ``Point`` -> one line, with the escaping rules of InfluxDB 1.x.

Escaping (https://docs.influxdata.com/influxdb/v1/write_protocols/line_protocol_reference/):
measurement names escape ``,`` and space; tag keys, tag values and field keys escape ``,``,
``=`` and space; string field values are double-quoted with ``"`` and ``\\`` escaped.
Integers get the ``i`` suffix, so a field must keep one Python type for its whole life
(InfluxDB rejects a float written to an integer field of the same shard). Times are written
in nanoseconds (``precision=ns``); the model's times are epoch seconds.
"""

from __future__ import annotations

import math
from ..errors import InputError
from ..record import field, record

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Mapping

FieldValue = float | int | bool | str

_MEASUREMENT = str.maketrans({",": r"\,", " ": r"\ "})
_KEY = str.maketrans({",": r"\,", "=": r"\=", " ": r"\ "})


def _name(kind: str, text: str, table: dict) -> str:
    if not text:
        raise InputError(f"line protocol: {kind} is empty: give every {kind} a non-empty name")
    if "\n" in text or "\r" in text:
        raise InputError(f"line protocol: {kind} {text!r} contains a newline: remove it")
    if text.endswith("\\"):
        raise InputError(f"line protocol: {kind} {text!r} ends with a backslash: remove it")
    return text.translate(table)


def _field_value(key: str, value: FieldValue) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value}i"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else None
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise InputError(f"line protocol: field {key!r} = {value!r}: "
                     "use float, int, bool or str")


def time_ns(time_s: float) -> int:
    """Epoch seconds (float) -> epoch nanoseconds, exact for whole and millisecond seconds."""
    return round(time_s * 1_000_000) * 1000


@record
class Point:
    """One measurement at one time. Empty tag values are left out (InfluxDB forbids them);
    non-finite float fields are left out; a point with no field left is an error."""

    measurement: str
    tags: Mapping[str, str] = field(default_factory=dict)
    fields: Mapping[str, FieldValue] = field(default_factory=dict)
    time_s: float | None = None     # None: the server's receive time

    def to_line(self) -> str:
        parts = [_name("measurement", self.measurement, _MEASUREMENT)]
        for key in sorted(self.tags):
            value = str(self.tags[key])
            if value:
                parts.append(f"{_name('tag key', key, _KEY)}={_name('tag value', value, _KEY)}")
        fields = []
        for key in sorted(self.fields):
            text = _field_value(key, self.fields[key])
            if text is not None:
                fields.append(f"{_name('field key', key, _KEY)}={text}")
        if not fields:
            raise InputError(f"line protocol: point {self.measurement!r} {dict(self.tags)} has "
                             "no finite field value: give at least one field")
        line = ",".join(parts) + " " + ",".join(fields)
        if self.time_s is not None:
            line += f" {time_ns(self.time_s)}"
        return line
