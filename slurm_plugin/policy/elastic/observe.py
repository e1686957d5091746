"""What running jobs' progress tells the policy, checked: a reading that is NaN, infinite,
zero or negative, stale, from an earlier run, or above what the job's GPUs can physically do is
ignored (the job then keeps its GPU count, as a job writing no progress does).

History keys (``observe`` actions, written by ``track._model``; the simulator keeps them, live the reconciler's history):
``elastic:run:<job>`` the run they belong to (its start), ``elastic:s0:/t0:<job>`` the first
step seen in this run and when, ``elastic:n:/x:<job>`` the count and samples/s of the current
run, ``elastic:pn:/px:<job>`` those of the previous run, on another count, ``elastic:stop_t:/
stop_step:<job>`` when the job was last stopped for a resize and the step it had reached,
``elastic:rc:<job>`` its measured restart cost and ``elastic:rc_run:<job>`` the run that last
measured it (``track.stop_marks``, ``track.restart_cost``).
"""

from __future__ import annotations

import math

from ...model import Job, Progress
from .settings import ElasticSettings


def usable_rate(p: Progress, job: Job, n: int, now_s: float, s: ElasticSettings,
                pn: float | None, px: float | None) -> float | None:
    """The job's samples/s on its ``n`` GPUs, or None when there is none to trust; ``pn`` and
    ``px`` are the count and samples/s of its previous run (``elastic:pn:/px:<job>``)."""
    x = p.samples_per_s
    if not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
        return None
    if now_s - p.taken_s > s.stale_s:
        return None
    if job.start_s is not None and p.started_s + 1.0 < job.start_s:
        return None     # written by the run before the last restart
    if x > s.max_samples_per_s_per_gpu * n:
        return None
    if pn and px and pn < n and x > s.superlinear * px * n / pn:
        return None     # grown, and faster than superlinear scaling of its smaller count
    # (on fewer GPUs than before, a GPU's share is larger under sublinear scaling: no bound)
    return float(x)


def epoch_fraction(p: Progress) -> float:
    """How far the job is into its epoch (0: just checkpointed at an epoch boundary, 1: about
    to): the older its checkpoint, the more a restart now would cost it."""
    if p.steps_per_epoch <= 0:
        return 0.0
    into = p.step - p.epoch * p.steps_per_epoch
    return min(1.0, max(0.0, into / p.steps_per_epoch))
