"""Jobs as people name them, through ``sacct``. Every measurement stores a job under its raw id
(``SLURM_JOB_ID``; Slurm gives the epilog no array ids), while users know a job array's tasks
as ``sacct`` shows them, ``<array job id>_<task id>`` (``14543_1``; one task holds the array's
own raw id). ``name_records`` names a report's records so; ``raw_job_ids`` turns a ``--job``
value, raw id, array task or array job id (every task), into the raw ids stored."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Mapping

from ..errors import CommandError, InputError
from ..slurm.cli import slurm
from .records import EnergyRecord

_ARRAY_TASK = re.compile(r"[0-9]+_[0-9]+")
_JOB_SELECTOR = re.compile(r"[0-9]+(?:_[0-9]+)?")
SACCT = ["-n", "-X", "-P", "-a", "-o"]       # then the columns, -j ID[,ID...]
SACCT_CHUNK = 500                             # job ids per sacct -j


def job_selector(text: str) -> str:
    """A ``--job`` value: a raw job id (``14544``), a job array's task (``14543_1``) or an array
    job id (``14543``)."""
    value = text.strip()
    if not _JOB_SELECTOR.fullmatch(value):
        raise InputError(f"report: --job = {text!r}: expected a job id (14544), an array task "
                         "(14543_1) or an array job id (14543)")
    return value


def raw_ids(sacct_stdout: str) -> list[str]:
    """The raw job ids ``sacct ... -o JobIDRaw`` printed, each once, in its order."""
    out: list[str] = []
    for line in sacct_stdout.splitlines():
        value = line.strip()
        if value.isascii() and value.isdigit() and value not in out:
            out.append(value)
    return out


def array_names(sacct_stdout: str) -> dict[str, str]:
    """Raw job id -> its name as a job array's task (``14544`` -> ``14543_1``), from the lines
    ``sacct ... -o JobIDRaw,JobID`` printed; jobs that are no array task, and lines of any
    other shape, are left out."""
    out: dict[str, str] = {}
    for line in sacct_stdout.splitlines():
        raw, _, name = line.strip().partition("|")
        if raw.isascii() and raw.isdigit() and _ARRAY_TASK.fullmatch(name):
            out[raw] = name
    return out


def with_array_names(records: list[EnergyRecord], names: Mapping[str, str],
                     cluster: str) -> list[EnergyRecord]:
    """``records`` with the array task names of ``cluster``'s jobs (``array_names``); a record
    with no cluster tag (an older epilog) counts as ``cluster``'s."""
    return [replace(r, array_task=names[r.job_id])
            if r.job_id in names and r.cluster in (cluster, "") else r for r in records]


def _first_line(exc: CommandError) -> str:
    return (exc.stderr.strip() or str(exc)).splitlines()[0]


def name_records(records: list[EnergyRecord], cfg: Any) -> tuple[list[EnergyRecord], list[str]]:
    """(``records`` with their job array tasks named as ``sacct`` names them, notes); where
    sacct fails, the records as they are, with a note saying why."""
    local = cfg["cluster.name"]
    ids = sorted({r.job_id for r in records if r.cluster in (local, "")})
    names: dict[str, str] = {}
    for i in range(0, len(ids), SACCT_CHUNK):
        chunk = ",".join(ids[i:i + SACCT_CHUNK])
        try:
            names.update(array_names(slurm("sacct", [*SACCT, "JobIDRaw,JobID", "-j", chunk],
                                           cfg).stdout))
        except CommandError as exc:
            return records, [f"jobs are named by raw job id: sacct failed ({_first_line(exc)}), "
                             "so job array tasks (14543_1) are not named"]
    return with_array_names(records, names, local), []


def raw_job_ids(selector: str, cfg: Any) -> tuple[list[str], list[str]]:
    """(the raw ids of ``--job`` (``job_selector``) from ``sacct -j``: an array task's, or every
    task's of an array job id; notes). Without sacct a raw id stands for itself alone (a note
    says so); an array task cannot be resolved then (``InputError``)."""
    try:
        found = raw_ids(slurm("sacct", [*SACCT, "JobIDRaw", "-j", selector], cfg).stdout)
    except CommandError as exc:
        if "_" in selector:
            raise InputError(f"report: --job {selector}: an array task's raw job id is asked of "
                             f"sacct, which failed: {exc}; give the raw id (sacct -o JobIDRaw, "
                             "squeue -o %A)") from None
        return [selector], [f"--job {selector}: sacct failed ({_first_line(exc)}): only raw job "
                            f"id {selector} is shown (an array job's other tasks are not)"]
    if not found and "_" in selector:
        raise InputError(f"report: --job {selector}: sacct knows no such array task; give the "
                         "raw id (sacct -o JobIDRaw, squeue -o %A)")
    return found or [selector], []
