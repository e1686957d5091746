"""EaCO's repair of a stale pin (``Eaco.reconcile``).

At submission EaCO may pin a job to shares of one GPU (its typed GRES on one node), to join
jobs it runs well with or to keep a free GPU open to them. The pin was right when it was made;
if the job could not start there at once (its GPU was taken meanwhile, or the jobs it was to
join held on longer than predicted) it waits for exactly that GPU, however many others are
free. Once it has waited ``pin_wait_s`` (0: never), an ``unpin`` action has it ask for whole
GPUs that Slurm may take anywhere: it then runs alone, which costs it nothing over waiting.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...model import Action, Cluster, Job
from ..queue import id_order
from .settings import EacoSettings


def _pinned_waiting(cluster: Cluster) -> Iterable[Job]:
    if cluster.pending_pinned is not None:
        return cluster.pending_pinned
    return (j for j in cluster.jobs.values() if j.pending and j.pinned)


def _where(job: Job) -> str:
    node, gres_type, shares = job.pinned[0]
    what = f"{shares} shares of GPU {gres_type}" if shares else f"GPU {gres_type}"
    more = f" (and {len(job.pinned) - 1} more)" if len(job.pinned) > 1 else ""
    return f"{what} on {node}{more}"


def stale_pins(cluster: Cluster, now_s: float, s: EacoSettings, policy: str,
               acted: frozenset[str] | set[str] = frozenset()) -> tuple[Action, ...]:
    """An ``unpin`` for each pending pinned job that has waited ``pin_wait_s`` since it was
    submitted or its --begin passed, unless held (a user's or a resize's hold: its owner
    releases it) or already acted on this pass; in job-id order."""
    if s.pin_wait_s <= 0:
        return ()
    out = []
    for job in _pinned_waiting(cluster):
        since_s = max(job.submit_s, job.begin_s or 0.0)
        if job.job_id in acted or "Held" in job.reason or now_s - since_s < s.pin_wait_s:
            continue
        out.append(Action(kind="unpin", job_id=job.job_id, policy=policy, gpus=len(job.pinned),
                          why=(f"{policy}: pinned to {_where(job)}, waited "
                               f"{now_s - since_s:,.0f} s (pin_wait_s {s.pin_wait_s:g}): asks for "
                               "whole GPUs anywhere instead, as if placed alone")))
    out.sort(key=lambda a: id_order(a.job_id))
    return tuple(out)
