"""Trace readers: the Philly CSV and the canonical CSV. Errors name file, line and field.

``philly``: ``timestamp,duration,num_gpus,gpu_time,cluster`` (timestamp UTC ``YYYY-mm-dd HH:MM:SS``).
``canonical``: ``job_id,submit_s,duration_s,num_gpus`` plus optional
``user,app,deadline_s,min_gpus,max_gpus,time_limit_s,slack_s``. Durations are run time alone on
whole GPUs; ``time_limit_s`` is the time the user requested (Slurm's Timelimit), empty or absent
where the trace has none (the simulator then draws one: ``time_limits``). ``slack_s`` is how long
the job's start may be shifted (``--wb-slack``); with the column, an empty value is a job that
may not be shifted; without it the simulator draws slacks (``slack``).
``pollux``: the Pollux (OSDI'21) workload files as they are, ``name,time,application,
num_replicas,batch_size`` (``sim/trace_pollux.py``): elastic jobs whose length comes from their
application's profile. A batch size outside the application's measured range, or more replicas
than the profiles' largest GPU count (64), is read clamped to the profile, with a warning
(``TraceJobs.warnings``: counted, naming the first few jobs).

Files are UTF-8, with or without a byte-order mark. A row with fewer fields than the header
(a cut line) is an error saying so; a header that is another format's suggests that format.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from pathlib import Path

from ..errors import InputError
from ..physics import job_class
from ..resources import data_dir

FORMATS = ("philly", "canonical", "pollux")
BUILTIN_TRACE = "philly-first1000.csv"
_REQUIRED = {"philly": ("timestamp", "duration", "num_gpus"),
             "pollux": ("name", "time", "application", "num_replicas", "batch_size"),
             "canonical": ("job_id", "submit_s", "duration_s", "num_gpus")}


@dataclass(frozen=True, slots=True)
class TraceJob:
    job_id: str
    submit_s: float
    duration_s: float
    num_gpus: int
    line: int
    user: str = ""
    app: str = ""
    deadline_s: float | None = None
    min_gpus: int | None = None
    max_gpus: int | None = None
    time_limit_s: float | None = None   # requested (Slurm Timelimit); None: not in the trace
    slack_s: float | None = None        # --wb-slack; None: not deferrable (or not in the trace)
    has_slack: bool = False             # the trace has a slack_s column: no slack is drawn
    # measured scaling of this job (speedup on n GPUs over one at index n-1); None: its class's
    speedup: tuple[float, ...] | None = None
    samples: float | None = None        # samples to target, where the trace knows them
    # global batch size at ``num_gpus`` and the range it may be changed within (None: the
    # trace does not say; the job keeps its per-GPU batch)
    batch_size: int | None = None
    min_batch_size: int | None = None
    max_batch_size: int | None = None


class TraceJobs(list):
    """``read_trace``'s jobs (a list of ``TraceJob``) and its ``warnings``: inputs read as
    something else than written (clamped), one line per kind, for the caller to print."""

    warnings: tuple[str, ...] = ()


WARN_EXAMPLES = 3      # jobs named per warning


def _pollux_warnings(path: Path, jobs: list[TraceJob]) -> tuple[str, ...]:
    """Pollux jobs whose batch size or GPU count is outside their application's profile (read
    clamped to it): one line per kind, counted, naming the first ``WARN_EXAMPLES`` jobs."""
    from ..physics.pollux import MAX_PROFILE_GPUS
    kinds = {
        "batch_size": ([j for j in jobs if j.batch_size is not None
                        and not j.min_batch_size <= j.batch_size <= j.max_batch_size],
                       lambda j: f"{j.batch_size} not in {j.app}'s {j.min_batch_size}-"
                                 f"{j.max_batch_size}",
                       "outside its application's measured batch sizes (read as the nearest "
                       "measured one)"),
        "num_replicas": ([j for j in jobs if j.num_gpus > MAX_PROFILE_GPUS],
                         lambda j: str(j.num_gpus),
                         f"above the profiles' {MAX_PROFILE_GPUS} GPUs (run no faster than "
                         f"on {MAX_PROFILE_GPUS})"),
    }
    out = []
    for col, (bad, show, why) in kinds.items():
        if bad:
            named = ", ".join(f"{j.job_id} (line {j.line}: {show(j)})"
                              for j in bad[:WARN_EXAMPLES])
            more = f" and {len(bad) - WARN_EXAMPLES} more" if len(bad) > WARN_EXAMPLES else ""
            out.append(f"trace: {path}: {len(bad)} job(s) with {col} {why}: {named}{more}")
    return tuple(out)


def builtin_trace() -> Path:
    return data_dir() / BUILTIN_TRACE


class _Row:
    def __init__(self, path: Path, line: int, rec: dict[str, str]) -> None:
        self.path, self.line, self.rec = path, line, rec

    def fail(self, field: str, why: str) -> InputError:
        return InputError(f"trace: {self.path}: line {self.line}: field {field}: {why}")

    def unique(self, field: str, seen: set[str], fix: str = "") -> str:
        """The field's value, which no earlier row had (added to ``seen``)."""
        value = (self.rec.get(field) or "").strip()
        tail = f"; {fix}" if fix else ""
        if not value:
            raise self.fail(field, "empty value" + tail)
        if value in seen:
            raise self.fail(field, f"{value!r} appears twice" + tail)
        seen.add(value)
        return value

    def num(self, field: str, kind: type = float, optional: bool = False, minimum: float | None = None):
        text = (self.rec.get(field) or "").strip()
        if not text:
            if optional:
                return None
            raise self.fail(field, "empty value")
        try:
            value = kind(float(text)) if kind is int else kind(text)
        except ValueError:
            raise self.fail(field, f"{text!r} is not a number") from None
        if kind is int and float(text) != int(float(text)):
            raise self.fail(field, f"{text!r} is not a whole number")
        if value != value or value in (float("inf"), float("-inf")):
            raise self.fail(field, f"{text!r} is not a finite number")
        if minimum is not None and value < minimum:
            raise self.fail(field, f"{text} must be at least {minimum:g}")
        return value


def _time_s(row: _Row, field: str) -> float:
    text = (row.rec.get(field) or "").strip()
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise row.fail(field, f"{text!r} is not a date-time (YYYY-mm-dd HH:MM:SS)") from None
    return (dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).timestamp()


def _philly_row(rec: dict[str, str], job_id: int, line: int) -> TraceJob | None:
    """A well-formed Philly row, read without the checks' cost; None sends the row through
    them (which say what is wrong, or read what this does not: a whole number written 4.0)."""
    try:
        stamp = datetime.fromisoformat(rec["timestamp"].strip())
        duration_s = float(rec["duration"])
        gpus = int(rec["num_gpus"])
    except (ValueError, TypeError, AttributeError, KeyError):
        return None
    if stamp.tzinfo is not None or not 0 < duration_s < float("inf") or gpus < 1:
        return None
    return TraceJob(job_id=str(job_id), submit_s=stamp.replace(tzinfo=timezone.utc).timestamp(),
                    duration_s=duration_s, num_gpus=gpus, line=line)


def read_trace(path: str | Path, fmt: str = "philly", limit_jobs: int | None = None) -> TraceJobs:
    """Jobs sorted by submit time (ties keep file order), with the warnings about the jobs kept
    (``TraceJobs.warnings``). Raises InputError on bad input."""
    p = Path(path)
    if fmt not in FORMATS:
        raise InputError(f"trace: {p}: format {fmt!r} unknown; choose one of: {', '.join(FORMATS)}")
    try:
        fh = p.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(f"trace: {p}: cannot read ({exc.strerror})") from None
    jobs: list[TraceJob] = []
    seen: set[str] = set()
    with fh:
        reader = csv.DictReader(fh)
        names = [n.strip() for n in (reader.fieldnames or [])]
        reader.fieldnames = names
        for col in _REQUIRED[fmt]:
            if col not in names:
                other = next((f for f in FORMATS if f != fmt
                              and all(c in names for c in _REQUIRED[f])), None)
                hint = f"; the header is a {other} trace's: did you mean --trace-format " \
                       f"{other}?" if other else ""
                raise InputError(f"trace: {p}: line 1: field {col}: missing column "
                                 f"(a {fmt} trace needs {', '.join(_REQUIRED[fmt])}){hint}")
        for line, rec in enumerate(reader, start=2):
            if not any((v or "").strip() for v in rec.values() if isinstance(v, str)):
                continue
            if None in rec.values():
                _check_complete(_Row(p, line, rec), fmt, len(names))
            if fmt == "pollux":
                from .trace_pollux import pollux_row
                job = pollux_row(_Row(p, line, rec), seen)
                jobs.append(job)
                continue
            if fmt == "philly":
                job = _philly_row(rec, len(jobs) + 1, line)
                if job is not None:
                    jobs.append(job)
                    continue
            row = _Row(p, line, rec)
            if fmt == "philly":
                job = TraceJob(job_id=str(len(jobs) + 1), submit_s=_time_s(row, "timestamp"),
                               duration_s=row.num("duration", minimum=0),
                               num_gpus=row.num("num_gpus", int, minimum=1), line=line)
            else:
                job_id = row.unique("job_id", seen)
                app = (rec.get("app") or "").strip().lower()
                if app:
                    try:
                        job_class(app)
                    except InputError as exc:
                        raise row.fail("app", str(exc).split(": ", 1)[1]) from None
                job = TraceJob(job_id=job_id, submit_s=row.num("submit_s", minimum=0),
                               duration_s=row.num("duration_s", minimum=0),
                               num_gpus=row.num("num_gpus", int, minimum=1), line=line,
                               user=(rec.get("user") or "").strip(), app=app,
                               deadline_s=row.num("deadline_s", optional=True, minimum=0),
                               min_gpus=row.num("min_gpus", int, optional=True, minimum=1),
                               max_gpus=row.num("max_gpus", int, optional=True, minimum=1),
                               time_limit_s=row.num("time_limit_s", optional=True, minimum=1),
                               slack_s=row.num("slack_s", optional=True, minimum=0),
                               has_slack="slack_s" in names)
            if job.min_gpus is not None and job.max_gpus is not None \
                    and job.min_gpus > job.max_gpus:
                raise row.fail("min_gpus", f"{job.min_gpus} is above max_gpus {job.max_gpus}; "
                                           "give the fewest GPUs first")
            if job.duration_s <= 0:
                raise row.fail("duration" if fmt == "philly" else "duration_s",
                               f"{job.duration_s:g} must be positive")
            jobs.append(job)
    if not jobs:
        raise InputError(f"trace: {p}: line 2: no jobs (the trace is empty)")
    jobs.sort(key=lambda j: j.submit_s)
    kept = TraceJobs(jobs[:limit_jobs] if limit_jobs else jobs)
    if fmt == "pollux":
        kept.warnings = _pollux_warnings(p, kept)
    return kept


def repeat_trace(jobs: list[TraceJob], copies: int) -> TraceJobs:
    """``copies`` copies of a trace overlaid on its own span: copy ``i`` (0 = the trace as it
    is) submits each job ``i / copies`` of the span later, so the copies interleave evenly
    and the workload keeps its shape (sizes, run times, the daily and weekly swing smoothed)
    at ``copies`` times the arrival rate: ``--repeat 19`` makes the Philly trace's 52,849
    jobs a million. Copy ``i`` renumbers numeric ids past the trace's largest (``i * (largest
    id) + id``) and suffixes others ``#i``; class draws follow the ids, so each copy's jobs
    draw their own classes. Sorted by submit time, copies of one job in copy order."""
    if copies <= 1:
        return jobs if isinstance(jobs, TraceJobs) else TraceJobs(jobs)
    numeric = all(j.job_id.isdigit() for j in jobs)
    top = max(int(j.job_id) for j in jobs) if numeric else 0
    first = min(j.submit_s for j in jobs)
    span_s = max(j.submit_s for j in jobs) - first
    out = TraceJobs(jobs)
    rest = [f.name for f in fields(TraceJob)][2:]     # after job_id, submit_s
    rows = [(j.job_id, j.submit_s, [getattr(j, f) for f in rest]) for j in jobs]
    for i in range(1, copies):
        shift_s = span_s * i / copies
        out.extend(TraceJob(str(i * top + int(job_id)) if numeric else f"{job_id}#{i}",
                            submit_s + shift_s, *others)
                   for job_id, submit_s, others in rows)
    out.sort(key=lambda j: j.submit_s)
    out.warnings = getattr(jobs, "warnings", ())
    return out


def _check_complete(row: _Row, fmt: str, header_fields: int) -> None:
    """A row cut short (fewer fields than the header) that lacks a required field: say so."""
    cut = next((c for c in _REQUIRED[fmt] if row.rec.get(c) is None), None)
    if cut is not None:
        got = sum(1 for k, v in row.rec.items() if k is not None and v is not None)
        raise row.fail(cut, f"the row is cut short ({got} field{'s' * (got != 1)}, the "
                            f"header has {header_fields}); complete the line or remove it")
