"""One ``sacct -P`` row split into its fields, whatever ``|`` its free text holds. Pure.

``sacct -P`` separates fields with ``|`` and does not escape a ``|`` inside a value. Only
JobName and Comment are free text (a user can put anything there), so a row with extra
separators is split every way that places them in those two fields, and the one split whose
structured fields all read as what they are wins. No such split, or more than one, is an error
naming the line.
"""

from __future__ import annotations

import re
from typing import Callable, Mapping, Sequence

from ..errors import InputError

FREE_TEXT = ("JobName", "Comment")
_UNSET = ("Unknown", "None", "")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")
_DURATION = re.compile(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)(?:\.\d+)?$")
_STATE = re.compile(r"[A-Z_]+(?: by -?\d+)?\+?$")
_EXIT = re.compile(r"\d+:\d+$")
_TRES = re.compile(r"(?:[\w/:.-]+=[\w.:/-]+(?:,[\w/:.-]+=[\w.:/-]+)*)?$")
_JOBID = re.compile(r"\d+(?:[_+]\d+)?(?:\.\w+)?$")
_NODES = re.compile(r"None assigned$|[\w.\-\[\],]+$|$")


def duration_s(text: str) -> float | None:
    """sacct ``[D-][HH:]MM:SS`` -> seconds; None when it is not one."""
    m = _DURATION.match(text)
    if not m:
        return None
    d, h, mi, s = (int(g) if g else 0 for g in m.groups())
    return float(((d * 24 + h) * 60 + mi) * 60 + s)


def _time_ok(text: str) -> bool:
    return text in _UNSET or bool(_DATE.match(text))


def _limit_ok(text: str) -> bool:
    return text in ("UNLIMITED", "Partition_Limit", "INVALID", "") or duration_s(text) is not None


def _raw_limit_ok(text: str) -> bool:
    return text.isdigit() or text in ("UNLIMITED", "Partition_Limit", "INVALID", "")


# the check each structured field must pass for a split to be right
CHECKS: Mapping[str, Callable[[str], bool]] = {
    "JobID": lambda v: bool(_JOBID.match(v)),
    "JobIDRaw": lambda v: bool(_JOBID.match(v)),
    "User": lambda v: "|" not in v and " " not in v,
    "Account": lambda v: " " not in v,
    "Partition": lambda v: " " not in v,
    "Submit": lambda v: bool(_DATE.match(v)),
    "Start": _time_ok,
    "End": _time_ok,
    "Elapsed": lambda v: duration_s(v) is not None,
    "ElapsedRaw": lambda v: v.isdigit() or v == "",
    "Timelimit": _limit_ok,
    "TimelimitRaw": _raw_limit_ok,
    "State": lambda v: bool(_STATE.match(v)),
    "ExitCode": lambda v: bool(_EXIT.match(v)),
    "DerivedExitCode": lambda v: bool(_EXIT.match(v)) or v == "",
    "ReqTRES": lambda v: bool(_TRES.match(v)),
    "AllocTRES": lambda v: bool(_TRES.match(v)),
    "NodeList": lambda v: bool(_NODES.match(v)),
}


def split_row(text: str, header: Sequence[str], where: str) -> dict[str, str]:
    """One row -> {field: value}; ``where`` names the input and line for errors."""
    parts = text.split("|")
    extra = len(parts) - len(header)
    if extra < 0:
        raise InputError(f"sacct: {where}: {len(parts)} fields, expected {len(header)} "
                         f"({'|'.join(header)}); is the row cut short?")
    free = sorted(header.index(f) for f in FREE_TEXT if f in header)
    if extra and not free:
        raise InputError(f"sacct: {where}: {len(parts)} fields for {len(header)} and no free "
                         "text field to hold the extra '|'")
    fits = []
    for k in range(extra + 1 if len(free) > 1 else 1):   # k extra separators in the first
        widths = [1] * len(header)
        widths[free[0] if free else 0] += k if len(free) > 1 else extra
        if len(free) > 1:
            widths[free[1]] += extra - k
        row, i = {}, 0
        for name, w in zip(header, widths):
            row[name] = "|".join(parts[i:i + w])
            i += w
        if all(check(row[name]) for name, check in CHECKS.items() if name in row):
            fits.append(row)
    if not fits:
        bad = ""
        if extra == 0:
            row = dict(zip(header, parts))
            wrong = [n for n, check in CHECKS.items() if n in row and not check(row[n])]
            bad = f"; field {wrong[0]} = {row[wrong[0]]!r} is not a valid value" if wrong else ""
        raise InputError(f"sacct: {where}: cannot read the row ({len(parts)} fields for "
                         f"{len(header)}){bad}")
    if len(fits) > 1:
        raise InputError(f"sacct: {where}: the {extra} extra '|' can be placed in JobName or "
                         f"Comment in {len(fits)} ways; edit the job name or comment there")
    return fits[0]
