"""Attained service of each job: GPU-seconds it has run, kept in the history
(``tiresias:a:<job>`` the total up to ``tiresias:t:<job>``, the last pass that saw it run)."""

from __future__ import annotations

from typing import Mapping

from ...model import Job


def attained(job: Job, now_s: float, history: Mapping[str, float],
             updates: dict[str, float]) -> float:
    """The job's GPU-seconds so far; a running job's new share goes into ``updates``."""
    jid = job.job_id
    total = history.get(f"tiresias:a:{jid}", 0.0)
    if not job.running:
        return total
    seen = history.get(f"tiresias:t:{jid}")
    since = job.start_s if job.start_s is not None else now_s
    if seen is not None and seen > since:
        since = seen
    n = len(job.uses) or job.gpus * job.num_nodes
    total += n * max(0.0, now_s - since)
    updates[f"tiresias:a:{jid}"] = total
    updates[f"tiresias:t:{jid}"] = now_s
    return total
