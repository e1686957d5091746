"""What running jobs' progress tells the policy, checked: a reading that is NaN, infinite,
zero or negative, stale, from an earlier run, or above what the job's GPUs can physically do is
ignored (the job then keeps its GPU count, as a job writing no progress does).

History keys (``observe`` actions; the simulator keeps them, live the reconciler's history):
``elastic:run:<job>`` the run they belong to (its start), ``elastic:s0:/t0:<job>`` the first
step seen in this run and when, ``elastic:n:/x:<job>`` the count and samples/s of the current
run, ``elastic:pn:/px:<job>`` those of the previous run, on another count.
"""

from __future__ import annotations

import math
from typing import Mapping

from ...model import Job, Progress
from .settings import ElasticSettings


def usable_rate(p: Progress | None, job: Job, n: int, now_s: float, s: ElasticSettings,
                history: Mapping[str, float]) -> float | None:
    """The job's samples/s on its ``n`` GPUs, or None when there is none to trust."""
    if p is None:
        return None
    x = p.samples_per_s
    if not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
        return None
    if now_s - p.taken_s > s.stale_s:
        return None
    if job.start_s is not None and p.started_s + 1.0 < job.start_s:
        return None     # written by the run before the last restart
    if x > s.max_samples_per_s_per_gpu * n:
        return None
    pn, px = history.get(f"elastic:pn:{job.job_id}"), history.get(f"elastic:px:{job.job_id}")
    if pn and px and pn < n and x > s.superlinear * px * n / pn:
        return None     # grown, and faster than superlinear scaling of its smaller count
    # (on fewer GPUs than before, a GPU's share is larger under sublinear scaling: no bound)
    return float(x)


def run_updates(p: Progress, job: Job, n: int, x: float,
                history: Mapping[str, float]) -> dict[str, float]:
    """History changes for this reading: a new run starts its step counter and moves the
    previous run's count and rate to ``pn``/``px``."""
    jid = job.job_id
    run = float(p.started_s)
    out: dict[str, float] = {}
    if history.get(f"elastic:run:{jid}") != run:
        old_n, old_x = history.get(f"elastic:n:{jid}"), history.get(f"elastic:x:{jid}")
        if old_n and old_x and old_n != n:
            out[f"elastic:pn:{jid}"], out[f"elastic:px:{jid}"] = old_n, old_x
        out[f"elastic:run:{jid}"] = run
        out[f"elastic:s0:{jid}"] = float(p.step)
        out[f"elastic:t0:{jid}"] = float(p.taken_s)
    if history.get(f"elastic:n:{jid}") != n or history.get(f"elastic:x:{jid}") != x:
        out[f"elastic:n:{jid}"], out[f"elastic:x:{jid}"] = float(n), x
    return out


def remaining_s(p: Progress, job: Job, now_s: float, history: Mapping[str, float]) -> float | None:
    """Seconds the job still needs on its current GPUs, from its step rate in this run (None
    until two readings of the run differ, or when it gives no total)."""
    jid = job.job_id
    if p.total_steps <= 0 or history.get(f"elastic:run:{jid}") != float(p.started_s):
        return None
    s0, t0 = history.get(f"elastic:s0:{jid}"), history.get(f"elastic:t0:{jid}")
    if s0 is None or t0 is None or p.taken_s <= t0 or p.step <= s0:
        return None
    rate = (p.step - s0) / (p.taken_s - t0)
    return max(0.0, p.total_steps - p.step) / rate


def epoch_fraction(p: Progress) -> float:
    """How far the job is into its epoch (0: just checkpointed at an epoch boundary, 1: about
    to): the older its checkpoint, the more a restart now would cost it."""
    if p.steps_per_epoch <= 0:
        return 0.0
    into = p.step - p.epoch * p.steps_per_epoch
    return min(1.0, max(0.0, into / p.steps_per_epoch))
