"""``packed-sticky``: PAL's baseline (Blox's Packed-Sticky), variability-blind.

Packed: a job takes the free GPUs of the node with the fewest free GPUs that has enough (best
fit; ties in node order), lowest indexes first; a job over several nodes takes the best-fitting
nodes of one GPU model (of the models with enough such nodes, the one whose best fits come
first). Sticky: a job keeps the GPUs it was given for its whole run (reconcile never moves it).
No node with room now, or jobs already waiting: Slurm places the job in its turn (a pin
would hold it for exactly those GPUs once others take them).
"""

from __future__ import annotations

from operator import itemgetter

from ..model import Action, JobRequest, Node, Placement
from .base import Context, plain_placement
from .model_groups import by_model
from .view_changes import NodePicks

_BEST_FIT = itemgetter(0, 1)    # a fit's order: fewest free GPUs, then node order


def _fit(node: Node, pos: int, per: int) -> tuple | None:
    """(free GPUs, position, name, the ``per`` lowest free indexes) of a node with room for
    ``per`` GPUs, else None."""
    if not node.available or len(node.gpus) < per:
        return None
    free = [g.index for g in node.gpus if g.exclusive_job is None and not g.shard_jobs]
    return (len(free), pos, node.name, free[:per]) if len(free) >= per else None


class PackedSticky:
    name = "packed-sticky"

    def __init__(self) -> None:
        # per GPUs per node asked for, each node's fit, kept between calls and made again only
        # where a node's view changed; the best fit found without a scan
        self._picks = NodePicks()

    def advise(self, request: JobRequest, ctx: Context) -> Placement:
        per = request.gpus
        if per < 1:
            return plain_placement(self.name, request, "packed-sticky: no GPUs asked")
        if ctx.cluster.pending_at_least(1) > 0:   # a pin would hold it for exactly those GPUs
            return plain_placement(self.name, request, "packed-sticky: jobs are waiting; Slurm "
                                   "places it in its turn")
        nodes = ctx.cluster.nodes
        fits = self._picks.cache(ctx.cluster, per, lambda node, pos: _fit(node, pos, per),
                                 _BEST_FIT)
        n = request.num_nodes
        if n == 1:      # one node is of one model
            best = fits.least()
            options = [[best]] if best is not None else []
        else:           # several: the best fits of each model with enough of them
            ranked = sorted(fits.values.values(), key=_BEST_FIT)
            options = [f[:n] for f in by_model(ranked, lambda f: nodes[f[1]])]
        options = [o for o in options if len(o) == n]
        if not options:
            return plain_placement(self.name, request, f"packed-sticky: no {n} node(s) of one "
                                   f"GPU model with {per} free GPUs now; Slurm places it in its "
                                   f"turn")
        best = min(options)
        nodes = tuple(b[2] for b in best)
        idx = tuple(best[0][3]) if n == 1 else ()
        shown = ", ".join(f"{b[2]}:{','.join(map(str, b[3]))}" for b in best)
        return Placement(policy=self.name, gpus=per, nodes=nodes, gpu_indexes=idx,
                         why=(f"packed-sticky: best-fit {shown}",))

    def reconcile(self, ctx: Context) -> tuple[Action, ...]:
        return ()
