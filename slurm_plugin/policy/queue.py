"""The head of the queue as the policies that rank by submission read it, the queue tiers
(``Placement.nice``) of the policies that put smaller jobs first, and their aging."""

from __future__ import annotations

import functools
import heapq
import math
import re
from typing import Any, Callable, Iterable, Mapping

from ..model import Action, Cluster, Job


_SLURM_ID = re.compile(r"(\d+)(?:[_+](\d+))?")


@functools.lru_cache(maxsize=1 << 17)
def id_order(job_id: str) -> tuple[int, int, int, str]:
    """A job id as Slurm orders jobs of equal priority: by number, then by array task (or
    heterogeneous component) number, so "123_2" comes before "123_10" and "99" before "100".
    Ids that do not start with a number (a trace's job names) come after, as text."""
    m = _SLURM_ID.match(job_id)
    if m is None:
        return 1, 0, 0, job_id
    return 0, int(m[1]), -1 if m[2] is None else int(m[2]), job_id[m.end():]


def by_submission(job: Job) -> tuple:
    return job.submit_s, id_order(job.job_id)


def head_by(order: Iterable[Job], limit: int, key: Callable[[Job], Any],
            stop: Any = None) -> list[Job] | None:
    """The first ``limit`` jobs holding whole GPUs (no shards) by (``key``, id), from ``order``
    read only up to the last key taken (every tie of it included), and with ``stop`` only
    those whose key is at most ``stop``; None where ``order`` turns out not to be sorted by
    ``key`` (then the caller sorts every job)."""
    out: list[tuple] = []
    last: Any = None
    for j in order:
        k = key(j)
        if last is not None:
            if k < last:
                return None
            if len(out) >= limit and k > last:
                break
        if stop is not None and k > stop:
            break
        last = k
        if not j.shards:
            out.append((k, id_order(j.job_id), j))
    out.sort(key=lambda row: row[:2])
    return [row[2] for row in out[:limit]]


def first_queued(cluster: Cluster, limit: int) -> list[Job]:
    """The first ``limit`` pending jobs holding whole GPUs (no shards) by (submission, id).
    From the caller's priority order where it keeps one and says it is by submission
    (``Cluster.pending_jobs`` with no job in a later tier); else from every job."""
    if cluster.pending_count == 0:
        return []
    order = cluster.pending_jobs
    if order is not None and cluster.pending_tiered == 0:
        out = head_by(order, limit, _submit_s)
        if out is not None:
            return out
    return heapq.nsmallest(limit, (j for j in cluster.jobs.values()
                                   if j.pending and not j.shards), key=by_submission)


def _submit_s(job: Job) -> float:
    return job.submit_s


TIER_GPU_S = 3600.0      # queue tier 0: up to this much predicted GPU-time
MAX_TIER = 12


def queue_tier(gpu_s: float) -> int:
    """The queue tier of a job predicted to hold ``gpu_s`` GPU-seconds: one tier per doubling
    above ``TIER_GPU_S`` (shortest-area first is what minimises average JCT under a queue;
    Slurm's own age factor, and the simulator's submit order within a tier, keep it fair)."""
    if gpu_s <= TIER_GPU_S:
        return 0
    return min(MAX_TIER, int(math.log2(gpu_s / TIER_GPU_S)) + 1)


AGE_CHECKS = 4      # queue tiers are aged this many times per tier_age_s


def tiered_pending(cluster: Cluster) -> Iterable[Job]:
    """The pending jobs that may wait in a later tier than 0: from the caller's priority order
    where it keeps one (the last ``pending_tiered`` of it), else every pending job."""
    order = cluster.pending_jobs
    if order is None:
        return (j for j in cluster.jobs.values() if j.pending)
    if cluster.pending_tiered is not None:
        n = len(order)
        return (order[i] for i in range(n - min(n, cluster.pending_tiered), n))
    return order


def age_tiers(policy: str, jobs: Iterable[Job], now_s: float, tier_age_s: float,
              max_moves: int, tier_of: Callable[[Job], int], key_of: Callable[[str], str],
              history: Mapping[str, float] | None) -> list[Action]:
    """Queue tiers age, so no job waits behind smaller ones for good: a pending job's tier is
    ``tier_of(job)`` less one per ``tier_age_s`` it has waited. A job whose tier so drops below
    the one it waits in (recorded in the history under ``key_of(job_id)``, else its own) is
    moved into it: a resize at its own size with the new ``nice`` (it is not running, so
    nothing restarts; its request, typed or pinned GPUs included, is left as it is), at most
    ``max_moves``, the longest waiting first; then one observation recording the new tiers."""
    due = []
    for job in jobs:
        if job.gpus < 1:        # shares of GPUs: their request is not a whole-GPU resize's
            continue
        base = tier_of(job)
        if not base or job.begin_s is not None and job.begin_s > now_s:
            continue
        aged = max(0, base - int((now_s - job.submit_s) // tier_age_s))
        got = history.get(key_of(job.job_id)) if history else None
        if aged < (base if got is None else int(got)):
            due.append((job.submit_s, id_order(job.job_id), job, aged))
    if not due:
        return []
    due.sort(key=lambda d: d[:2])
    out, tiers = [], {}
    for _, _, job, aged in due[:max_moves]:
        jid = job.job_id
        out.append(Action(kind="resize", job_id=jid, policy=policy, gpus=job.gpus, nice=aged,
                          why=f"{policy}: waited {(now_s - job.submit_s) / 3600:.1f} h: into "
                              f"queue tier {aged} (tier_age_s)"))
        tiers[key_of(jid)] = float(aged)
    out.append(Action(kind="observe", job_id="", policy=policy, predicted=tiers,
                      why=f"{policy}: the queue tiers jobs aged into"))
    return out
