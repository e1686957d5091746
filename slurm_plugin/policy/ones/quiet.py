"""When a ``ones`` pass can be skipped: a pass whose only decisions were holds of queued jobs
left out (no resize, no start, no progress recorded, no job waiting for its rate) leaves a
``Quiet`` mark. A later pass with the same nodes version, pending count and history version,
before the next job's hysteresis ends, would see the same jobs, the same GPUs and the same
options, so it decides the same: it only renews the holds that are running out.
(Progress moves the predicted remaining times between passes; the mark ignores that, as
``elastic``'s does.) Without a nodes version (the live cluster) no pass is skipped."""

from __future__ import annotations

from dataclasses import dataclass

from ...model import Action, Cluster, Job

NAME = "ones"


@dataclass(frozen=True, slots=True)
class Quiet:
    nodes_version: int
    pending_count: int | None
    history_version: int | None
    until_s: float                  # when the next running job's hysteresis ends
    held: tuple[str, ...]           # queued jobs left out (held) by that pass


def still_quiet(q: Quiet | None, cluster: Cluster, history_version: int | None,
                now_s: float) -> bool:
    return q is not None and cluster.nodes_version is not None \
        and q.nodes_version == cluster.nodes_version and q.pending_count == cluster.pending_count \
        and q.history_version == history_version and now_s < q.until_s


def hold(job: Job, now_s: float, hold_s: float) -> Action | None:
    """The hold of a queued job left out of the schedule, when its hold runs out soon."""
    held = job.begin_s is not None and job.begin_s > now_s
    if held and job.begin_s >= now_s + hold_s / 2:
        return None
    return Action(kind="defer", job_id=job.job_id, policy=NAME, begin_s=now_s + hold_s,
                  why="ones: held")


def renew(q: Quiet, cluster: Cluster, now_s: float, hold_s: float) -> tuple[Action, ...]:
    """A skipped pass's actions: the holds of the jobs the quiet pass left out."""
    out = []
    for jid in q.held:
        job = cluster.jobs.get(jid)
        if job is not None and job.pending:
            a = hold(job, now_s, hold_s)
            if a is not None:
                out.append(a)
    return tuple(out)
