"""Attained service of each job: GPU-seconds it has run, kept in the history
(``tiresias:a:<job>`` the total up to ``tiresias:t:<job>``). A running job's total is written
when it first crosses into another queue and when it is preempted: its queue is all a pass
reads of it, and its GPU count does not change while it runs, so the total between writes is
that written plus its GPUs times the time since."""

from __future__ import annotations

from typing import Mapping

from ...model import Job


def attained(job: Job, now_s: float, history: Mapping[str, float]) -> tuple[float, float]:
    """(the job's GPU-seconds so far, its GPUs while it runs: 0 for a queued job)."""
    jid = job.job_id
    total = history.get(f"tiresias:a:{jid}", 0.0)
    if not job.running:
        return total, 0.0
    seen = history.get(f"tiresias:t:{jid}")
    since = job.start_s if job.start_s is not None else now_s
    if seen is not None and seen > since:
        since = seen
    n = len(job.uses) or job.gpus * job.num_nodes
    return total + n * max(0.0, now_s - since), float(n)


def record(job_id: str, total: float, now_s: float, updates: dict[str, float]) -> None:
    """Write the job's total as of now."""
    updates[f"tiresias:a:{job_id}"] = total
    updates[f"tiresias:t:{job_id}"] = now_s
