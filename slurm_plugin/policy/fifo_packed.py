"""``fifo-packed``: FIFO, one-GPU jobs packed onto a GPU already busy when they fit (EaCO's
FIFO_packed baseline): first GPU, in node and index order, that holds shared jobs, has shards
left for one more (at most ``MAX_JOBS_PER_GPU``) and memory for the job; else the first free GPU
(as a shared job, so later jobs can join it). When jobs are already waiting, or no GPU has room,
the job asks for shards unpinned and Slurm gives it, in its turn, the first GPU (by index) with
room, which packs as well. Multi-GPU jobs: as slurm-default.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Iterator

from ..model import Action, Cluster, Gpu, JobRequest, Node, Placement
from ..physics import job_class
from .base import Context, plain_placement
from .view_changes import NodePicks

MAX_JOBS_PER_GPU = 2
FIRST = itemgetter(0, 1)     # a pick's place in Slurm's first-fit order: node, then GPU index


def resident_apps(cluster: Cluster, gpu: Gpu) -> list[str]:
    jobs = cluster.jobs
    return [jobs[j].app for j in gpu.shard_jobs if j in jobs and jobs[j].app]


def fits_memory(cluster: Cluster, gpu: Gpu, app: str) -> bool:
    used = sum(job_class(a).memory_mib for a in resident_apps(cluster, gpu))
    return used + job_class(app).memory_mib <= gpu.memory_mib


def shard_placement(policy: str, request: JobRequest, gpu: Gpu, shards: int, why: str) -> Placement:
    return Placement(policy=policy, gpus=1, nodes=(gpu.node,), gpu_indexes=(gpu.index,),
                     share_mode="shard", shards=shards, why=(why,))


def shareable_gpus(node: Node, max_jobs: int) -> Iterator[Gpu]:
    """The GPUs of ``node``, where it is available, that offer at least ``max_jobs`` shards and
    hold no exclusive job, in index order (Slurm's first-fit order)."""
    if node.available:
        for g in node.gpus:
            if g.shards_total >= max_jobs and not g.exclusive_job:
                yield g


def first_free(node: Node, pos: int) -> tuple | None:
    """(position, index, GPU) of the node's first shareable GPU holding no job, or None."""
    for g in shareable_gpus(node, MAX_JOBS_PER_GPU):
        if not g.shard_jobs:
            return pos, g.index, g
    return None


def has_backlog(ctx: Context) -> bool:
    """Some job is waiting: a new job would wait its turn, so pinning it to a GPU that has room
    now would only pile later jobs onto the same GPU."""
    return ctx.cluster.pending_at_least(1) > 0


def queued_shard(policy: str, request: JobRequest, ctx: Context, why: str) -> Placement:
    """No GPU has room now: ask Slurm for shards on whichever GPU frees first (unpinned), so
    jobs submitted while the cluster is full do not pile up on one GPU."""
    # a node offers the same shards on each of its GPUs (gres.conf splits shard:N evenly)
    total = max((n.gpus[0].shards_total for n in ctx.cluster.nodes if n.gpus), default=0)
    if total < MAX_JOBS_PER_GPU:
        return plain_placement(policy, request, why)
    return Placement(policy=policy, gpus=1, share_mode="shard", shards=total // MAX_JOBS_PER_GPU,
                     why=(why,))


def shardable(request: JobRequest, gpu_model_ok: bool = True) -> bool:
    """Only one-GPU jobs that know their class and did not opt out are packed."""
    return (request.total_gpus == 1 and bool(request.app) and request.allow_share is not False
            and "share" not in request.opt_out and gpu_model_ok)


def not_shared_why(policy: str, request: JobRequest) -> str:
    """Why ``shardable`` said no, for a job's explanation."""
    if request.total_gpus != 1:
        return f"{policy}: multi-GPU job, exclusive GPUs"
    if request.allow_share is False or "share" in request.opt_out:
        return f"{policy}: the job opted out of sharing, exclusive GPU"
    if not request.app:
        return (f"{policy}: job class unknown (no --wb-app), so not packed with others; "
                "exclusive GPU")
    return f"{policy}: not shareable, exclusive GPU"


class FifoPacked:
    name = "fifo-packed"

    def __init__(self) -> None:
        self._picks = NodePicks()     # per node: its first GPU a job fits (per class), free

    def advise(self, request: JobRequest, ctx: Context) -> Placement:
        if not shardable(request):
            return plain_placement(self.name, request, not_shared_why(self.name, request))
        if has_backlog(ctx):
            return queued_shard(self.name, request, ctx,
                                "fifo-packed: jobs are waiting; Slurm gives it the first GPU with room")
        cluster, app = ctx.cluster, request.app

        def first_busy(node: Node, pos: int) -> tuple | None:
            for g in shareable_gpus(node, MAX_JOBS_PER_GPU):
                per_job = g.shards_total // MAX_JOBS_PER_GPU
                if g.shard_jobs and g.shards_used + per_job <= g.shards_total and \
                        fits_memory(cluster, g, app):
                    return pos, g.index, g, per_job
            return None

        # the first busy GPU it fits, in Slurm's first-fit order; else the first free one
        busy = self._picks.least(cluster, app, first_busy, FIRST)
        if busy is not None:
            g = busy[2]
            return shard_placement(self.name, request, g, busy[3],
                                   f"fifo-packed: packed onto busy {g.node}:{g.index}")
        free = self._picks.least(cluster, None, first_free, FIRST)
        if free is not None:
            g = free[2]
            return shard_placement(self.name, request, g, g.shards_total // MAX_JOBS_PER_GPU,
                                   f"fifo-packed: no busy GPU fits; free {g.node}:{g.index}")
        return queued_shard(self.name, request, ctx,
                            "fifo-packed: no GPU has room now; Slurm gives it the first that has")

    def reconcile(self, ctx: Context) -> tuple[Action, ...]:
        return ()
