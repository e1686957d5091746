"""The head of the queue as the policies that rank by submission read it."""

from __future__ import annotations

import heapq

from ..model import Cluster, Job


def by_submission(job: Job) -> tuple:
    return job.submit_s, job.job_id


def first_queued(cluster: Cluster, limit: int) -> list[Job]:
    """The first ``limit`` pending jobs holding whole GPUs (no shards) by (submission, id).
    From the caller's priority order where it keeps one (``Cluster.pending_jobs``, read up to
    the last submission time taken, while that order is by submission); else, or where it is
    not (--nice tiers), from every job."""
    if cluster.pending_count == 0:
        return []
    order = cluster.pending_jobs
    if order is not None:
        out: list[Job] = []
        last = -float("inf")
        for j in order:
            t = j.submit_s
            if t < last:
                break           # not by submission: read them all
            if len(out) >= limit and t > last:
                out.sort(key=by_submission)
                return out[:limit]
            last = t
            if not j.shards:
                out.append(j)
        else:
            out.sort(key=by_submission)
            return out[:limit]
    return heapq.nsmallest(limit, (j for j in cluster.jobs.values()
                                   if j.pending and not j.shards), key=by_submission)
