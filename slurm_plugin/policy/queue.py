"""The head of the queue as the policies that rank by submission read it."""

from __future__ import annotations

import heapq

from ..model import Cluster, Job


def by_submission(job: Job) -> tuple:
    return job.submit_s, job.job_id


def first_queued(cluster: Cluster, limit: int) -> list[Job]:
    """The first ``limit`` pending jobs holding whole GPUs (no shards) by (submission, id).
    From the caller's priority order where it keeps one and says it is by submission
    (``Cluster.pending_jobs`` with no job in a later tier: read up to the last submission time
    taken); else from every job."""
    if cluster.pending_count == 0:
        return []
    order = cluster.pending_jobs
    if order is not None and cluster.pending_tiered == 0:
        out: list[Job] = []
        last = -float("inf")
        for j in order:
            t = j.submit_s
            if len(out) >= limit and t > last:
                break           # the ties at the last time taken are all in
            last = t
            if not j.shards:
                out.append(j)
        out.sort(key=by_submission)
        return out[:limit]
    return heapq.nsmallest(limit, (j for j in cluster.jobs.values()
                                   if j.pending and not j.shards), key=by_submission)
