"""``gandiva``: Gandiva-style packing when the queue is long, migration off.

While fewer than ``QUEUE_THRESHOLD`` jobs wait and a GPU is free, a one-GPU job gets a free GPU
to itself (as a shared job, so it can be packed with later). When the queue is long or no GPU is
free, it is packed onto the busy shared GPU with the lowest summed utilisation of its residents
(Gandiva packs by profiled utilisation), if that sum plus its own stays at most 100% and its
memory fits. Multi-GPU jobs: as slurm-default. No migration: reconcile does nothing.
"""

from __future__ import annotations

from operator import itemgetter

from ..model import Action, JobRequest, Node, Placement
from ..physics import job_class
from .base import Context, plain_placement
from .fifo_packed import (FIRST, first_free, has_backlog, not_shared_why, queued_shard,
                          resident_apps, shard_placement, shardable, shareable_gpus)
from .view_changes import NodePicks

QUEUE_THRESHOLD = 8
MAX_JOBS_PER_GPU = 2

# (node, GPU index) -> (GPU view, its residents' summed utilisation %, their memory MiB): read
# again only for another view object (the simulator hands in the same object while a GPU's
# jobs are unchanged; a job's class never changes)
_RESIDENTS: dict[tuple[str, int], tuple] = {}


def _residents(cluster, g) -> tuple[float, float]:
    """(summed utilisation %, memory MiB) of the jobs sharing GPU view ``g``."""
    key = (g.node, g.index)
    got = _RESIDENTS.get(key)
    if got is not None and got[0] is g:
        return got[1], got[2]
    util = mem = 0.0
    for a in resident_apps(cluster, g):
        cls = job_class(a)
        util += cls.util_at(1)
        mem += cls.memory_mib
    if len(_RESIDENTS) > 100_000:
        _RESIDENTS.clear()
    _RESIDENTS[key] = (g, util, mem)
    return util, mem


def _queue_is_long(ctx: Context) -> bool:
    return ctx.cluster.pending_at_least(QUEUE_THRESHOLD) >= QUEUE_THRESHOLD


_LEAST_USED = itemgetter(0, 1, 2)   # least summed utilisation, then node, then GPU index


class Gandiva:
    name = "gandiva"

    def __init__(self) -> None:
        self._picks = NodePicks()     # per node: its busy GPU a job fits best (per class), free

    def advise(self, request: JobRequest, ctx: Context) -> Placement:
        if not shardable(request):
            return plain_placement(self.name, request, not_shared_why(self.name, request))
        if has_backlog(ctx):
            return queued_shard(self.name, request, ctx,
                                "gandiva: jobs are waiting; packed by Slurm onto the first GPU with room")
        own = job_class(request.app)
        mine, my_mib = own.util_at(1), own.memory_mib
        cluster = ctx.cluster

        def least_used(node: Node, pos: int) -> tuple | None:
            """(utilisation, position, index, GPU) of the node's busy GPU of least summed
            utilisation (the lowest index of equals) the job fits, or None."""
            best = None
            for g in shareable_gpus(node, MAX_JOBS_PER_GPU):
                if not g.shard_jobs:
                    continue
                util, mib = _residents(cluster, g)
                if (util + mine <= 100
                        and g.shards_used + g.shards_total // MAX_JOBS_PER_GPU <= g.shards_total
                        and mib + my_mib <= g.memory_mib    # fifo_packed.fits_memory
                        and (best is None or util < best[0])):
                    best = (util, pos, g.index, g)
            return best

        # the busy GPU of least utilisation (the first in node and index order of equals) and
        # the first free one
        picked = self._picks.least(cluster, (mine, my_mib), least_used, _LEAST_USED)
        best, best_util = (picked[3], picked[0]) if picked is not None else (None, 101.0)
        got = self._picks.least(cluster, None, first_free, FIRST)
        free = got[2] if got is not None else None
        per_job = (free or best).shards_total // MAX_JOBS_PER_GPU if (free or best) else 0
        if free is not None and not _queue_is_long(ctx):
            return shard_placement(self.name, request, free, per_job,
                                   f"gandiva: queue short, free {free.node}:{free.index}")
        if best is not None:
            return shard_placement(self.name, request, best, per_job,
                                   f"gandiva: queue long, packed onto {best.node}:{best.index} "
                                   f"(resident util {best_util:.0f}%)")
        if free is not None:
            return shard_placement(self.name, request, free, per_job,
                                   f"gandiva: nothing to pack with, free {free.node}:{free.index}")
        return queued_shard(self.name, request, ctx,
                            "gandiva: no GPU has room now; Slurm gives it the first that has")

    def reconcile(self, ctx: Context) -> tuple[Action, ...]:
        return ()
