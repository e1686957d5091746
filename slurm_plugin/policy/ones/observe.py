"""What running jobs' progress tells ``ones``, checked: the fraction of each job done, and for
a job without an application profile its measured progress rate. A reading that is NaN,
infinite, negative, past its total, stale or from an earlier run is ignored (the job then keeps
its allocation, as a job writing no progress does).

History keys (``observe`` actions): ``ones:run:<job>`` the run a rate belongs to (its start),
``ones:f0:/t0:<job>`` the fraction done when the run was first seen and when, ``ones:f:<job>``
the fraction done when ``ones`` last stopped the job (a requeued job has no progress).
"""

from __future__ import annotations

import math
from typing import Mapping

from ...model import Job, Progress
from ...record import replace

STALE_S = 900.0


def fraction_done(p: Progress | None, job: Job, now_s: float,
                  history: Mapping[str, float]) -> float | None:
    """How much of the job is done (0..1): from its progress while it runs, from the history
    once ``ones`` requeued it, 0 for a job that never ran; None when it cannot be trusted."""
    if not job.running:
        return history.get(f"ones:f:{job.job_id}", 0.0)
    if p is None or p.total_steps <= 0 or now_s - p.taken_s > STALE_S:
        return None
    if job.start_s is not None and p.started_s + 1.0 < job.start_s:
        return None     # written by the run before the last restart
    if not isinstance(p.step, (int, float)) or not math.isfinite(p.step) or p.step < 0 \
            or p.step > p.total_steps:
        return None
    return p.step / p.total_steps


def run_rate(p: Progress, job: Job, f: float, now_s: float, history: Mapping[str, float],
             updates: dict[str, float]) -> float | None:
    """Fraction per second measured over the current run (None until two readings differ);
    a new run's first reading goes into ``updates``."""
    jid = job.job_id
    run = float(p.started_s)
    if history.get(f"ones:run:{jid}") != run:
        updates[f"ones:run:{jid}"] = run
        updates[f"ones:f0:{jid}"] = f
        updates[f"ones:t0:{jid}"] = now_s
        return None
    f0, t0 = history.get(f"ones:f0:{jid}"), history.get(f"ones:t0:{jid}")
    if f0 is None or t0 is None or now_s <= t0 or f <= f0:
        return None
    return (f - f0) / (now_s - t0)


def with_reported_batch(job: Job, p: Progress | None) -> Job:
    """A live job's current global batch from its progress (``report_progress(...,
    batch_size=)``) when Slurm's record has none: only a job that reports its batch, and so
    reads the advice, has one to change. A report from an earlier run, or outside the job's
    declared range, does not count."""
    if job.batch_size is not None or p is None or not p.batch_size or \
            job.min_batch_size is None or job.max_batch_size is None:
        return job
    if job.start_s is not None and p.started_s + 1.0 < job.start_s:
        return job
    if not job.min_batch_size <= p.batch_size <= job.max_batch_size:
        return job
    return replace(job, batch_size=int(p.batch_size))
