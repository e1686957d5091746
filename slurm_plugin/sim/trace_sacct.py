"""Trace reader for a site's own accounting: the output of ``wattctl history export``, i.e.

    sacct -a -X -P -o JobIDRaw,JobName,User,Account,Partition,Submit,Start,End,Elapsed,
                      Timelimit,State,ExitCode,ReqTRES,AllocTRES,NodeList,AdminComment,Comment

It yields the same ``TraceJob`` rows as ``trace.read_trace`` (absolute submit times, run time
from ``Elapsed``, GPUs from ``AllocTRES``, the class from job_submit.lua's record in AdminComment
or the comment's ``app=``), and a ``SacctSummary``
that counts every row it did not replay and says why: no GPUs, still running, pending,
cancelled before start, never started, ran zero seconds. Nothing is dropped silently.

``sacct -P`` does not escape ``|`` inside a value. Only JobName and Comment are free text, so a
row with too many separators is read by trying every split of the extra separators between
those two fields and keeping the one whose other fields all parse (dates, durations, state, exit
code, TRES lists, node list); a row with no such split, or with more than one, is an input
error that names the line.

A shard or MPS job becomes ``ceil(shards / shards_per_gpu)`` whole GPUs (at least one): the
replay's policy decides again whether to share. Times are local time, as sacct prints them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Iterable, TextIO

from ..errors import InputError
from ..formats.admin_comment import recorded_app
from ..formats.sacct_rows import duration_s
from ..formats.sacct_rows import split_row as _split_row
from ..physics.classes import class_names
from .trace import TraceJob

FIELDS = ("JobIDRaw", "JobName", "User", "Account", "Partition", "Submit", "Start", "End",
          "Elapsed", "Timelimit", "State", "ExitCode", "ReqTRES", "AllocTRES", "NodeList",
          "AdminComment", "Comment")
SACCT_ARGS = ("-a", "-X", "-P", "-o", ",".join(FIELDS))

# why a row is not replayed -> what the summary calls it
SKIP_REASONS = ("no_gpus", "still_running", "pending", "cancelled_before_start",
                "never_started", "zero_runtime")
_NOT_ENDED = ("RUNNING", "PENDING", "SUSPENDED", "REQUEUED", "RESIZING", "REQUEUE_HOLD",
              "REQUEUE_FED", "SIGNALING", "STAGE_OUT", "COMPLETING", "CONFIGURING")
_UNSET = ("Unknown", "None", "")
_APP = re.compile(r"(?:^|[\s,;])app=([^\s,;|]+)")


@dataclass
class SacctSummary:
    """What a sacct file held: rows read, GPU jobs replayed, the rest counted by reason."""

    path: str
    rows: int = 0
    replayed: int = 0
    skipped: dict[str, int] = field(default_factory=lambda: {r: 0 for r in SKIP_REASONS})
    examples: dict[str, list[str]] = field(default_factory=dict)   # a few job ids per reason
    from_shards: int = 0           # replayed jobs that held shards/MPS, now whole GPUs
    rows_with_bar: int = 0         # rows whose JobName or Comment held '|'

    def skip(self, reason: str, job_id: str) -> None:
        self.skipped[reason] += 1
        ids = self.examples.setdefault(reason, [])
        if len(ids) < 5:
            ids.append(job_id)

    def as_dict(self) -> dict:
        return {"path": self.path, "rows": self.rows, "replayed": self.replayed,
                "skipped": dict(self.skipped), "skipped_job_ids": dict(self.examples),
                "from_shards": self.from_shards, "rows_with_bar": self.rows_with_bar}

    def line(self) -> str:
        parts = [f"{n} {r.replace('_', ' ')}" for r, n in self.skipped.items() if n]
        return (f"sacct: {self.path}: {self.rows} jobs, {self.replayed} GPU jobs replayed"
                + (f" ({self.from_shards} shard/MPS jobs as whole GPUs)" if self.from_shards
                   else "")
                + ("; not replayed: " + ", ".join(parts) if parts else "; none skipped"))


def _fail(path: str, line: int, why: str) -> InputError:
    return InputError(f"sacct: {path}: line {line}: {why}")


def split_row(text: str, header: tuple[str, ...], path: str, line: int) -> dict[str, str]:
    """One sacct -P row -> {field: value}, placing the extra ``|`` in JobName/Comment."""
    try:
        return _split_row(text, header, f"{path}: line {line}")
    except InputError as exc:
        raise InputError(f"{exc}; export it with `wattctl history export`") from None


def _tres(text: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in text.split(",") if "=" in kv)


def _count(tres: dict[str, str], name: str) -> int:
    """GPUs/shards of a TRES list, typed entries (gres/gpu:a100=2) included when untyped absent."""
    if name in tres:
        return int(float(tres[name]))
    return sum(int(float(v)) for k, v in tres.items() if k.startswith(name + ":"))


def _local_s(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").timestamp()


def app_of(comment: str, admin_comment: str = "") -> str:
    """The job's class when it is a known one, else '': the one job_submit.lua recorded in
    AdminComment at submission (``declared_app=NAME``, as the live snapshot reads it), else
    the ``app=NAME`` of the comment (an export without AdminComment, a site without the
    plugin)."""
    name = recorded_app(admin_comment)
    if name is None:
        m = _APP.search(comment)
        name = m.group(1) if m else ""
    return name.lower() if name.lower() in class_names() else ""


def read_sacct_lines(lines: Iterable[str], path: str, *, shards_per_gpu: int = 4,
                     limit_jobs: int | None = None) -> tuple[list[TraceJob], SacctSummary]:
    """GPU jobs that ran to an end, sorted by submit time, and the summary of the rest."""
    summary = SacctSummary(path)
    header: tuple[str, ...] = ()
    jobs: list[TraceJob] = []
    seen: dict[str, int] = {}
    for line, raw in enumerate(lines, start=1):
        text = raw.rstrip("\r\n")
        if not text.strip():
            continue
        if not header:
            header = tuple(text.split("|"))
            if set(header) not in (set(FIELDS), set(FIELDS) - {"AdminComment"}) or \
                    len(set(header)) != len(header):       # earlier exports had no AdminComment
                raise _fail(path, line, f"header {text!r} is not sacct -P -o {','.join(FIELDS)}"
                            "; export with `wattctl history export`")
            continue
        row = split_row(text, header, path, line)
        summary.rows += 1
        if len(text.split("|")) > len(header):
            summary.rows_with_bar += 1
        job_id = row["JobIDRaw"]
        if job_id in seen:
            raise _fail(path, line, f"JobIDRaw {job_id} appears twice (first on line "
                        f"{seen[job_id]}); export with -X (one line per job)")
        seen[job_id] = line
        alloc, req = _tres(row["AllocTRES"]), _tres(row["ReqTRES"])
        tres = alloc if alloc else req
        try:
            gpus = _count(tres, "gres/gpu")
            shares = _count(tres, "gres/shard") + _count(tres, "gres/mps")
        except ValueError:
            raise _fail(path, line, f"AllocTRES/ReqTRES {row['AllocTRES'] or row['ReqTRES']!r}"
                        ": a GPU count is not a number") from None
        state = row["State"].split(" ")[0].rstrip("+")
        started = row["Start"] not in _UNSET and row["NodeList"] not in ("None assigned", "")
        if gpus == 0 and shares == 0:
            summary.skip("no_gpus", job_id)
        elif state in _NOT_ENDED or (started and row["End"] in _UNSET):
            summary.skip("still_running" if started else
                         "pending" if state == "PENDING" else "never_started", job_id)
        elif not started:
            summary.skip("cancelled_before_start" if state == "CANCELLED" else "never_started",
                         job_id)
        elif not duration_s(row["Elapsed"]):
            summary.skip("zero_runtime", job_id)
        else:
            if gpus == 0:
                summary.from_shards += 1
                # MPS counts are percent of a GPU on most sites; shards per gpu from the config
                gpus = max(1, math.ceil(shares / (100 if "gres/mps" in tres else shards_per_gpu)))
            jobs.append(TraceJob(job_id=job_id, submit_s=_local_s(row["Submit"]),
                                 duration_s=duration_s(row["Elapsed"]), num_gpus=gpus, line=line,
                                 user=row["User"],
                                 app=app_of(row["Comment"], row.get("AdminComment", "")),
                                 time_limit_s=duration_s(row["Timelimit"])))
    if not header:
        raise _fail(path, 1, "empty file (no sacct header)")
    jobs.sort(key=lambda j: j.submit_s)
    if limit_jobs:
        jobs = jobs[:limit_jobs]
    summary.replayed = len(jobs)
    if not jobs:
        raise _fail(path, 2, f"no GPU job that ran to an end, nothing to replay ({summary.line()})")
    return jobs, summary


def read_sacct(source: str | Path | TextIO, *, shards_per_gpu: int = 4,
               limit_jobs: int | None = None) -> tuple[list[TraceJob], SacctSummary]:
    """Read a file path, or an open text stream (stdin for ``-``)."""
    if hasattr(source, "read"):
        return read_sacct_lines(source, "<stdin>", shards_per_gpu=shards_per_gpu,
                                limit_jobs=limit_jobs)
    p = Path(source)
    try:
        fh = p.open(encoding="utf-8", newline="")
    except OSError as exc:
        raise InputError(f"sacct: {p}: cannot read ({exc.strerror})") from None
    with fh:
        return read_sacct_lines(fh, str(p), shards_per_gpu=shards_per_gpu, limit_jobs=limit_jobs)
