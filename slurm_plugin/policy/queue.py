"""The head of the queue as the policies that rank by submission read it, and the queue tiers
(``Placement.nice``) of the policies that put smaller jobs first."""

from __future__ import annotations

import heapq
import math
from typing import Any, Callable, Iterable

from ..model import Cluster, Job


def by_submission(job: Job) -> tuple:
    return job.submit_s, job.job_id


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
            out.append((k, j.job_id, j))
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
