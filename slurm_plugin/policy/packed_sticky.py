"""``packed-sticky``: PAL's baseline (Blox's Packed-Sticky), variability-blind.

Packed: a job takes the free GPUs of the node with the fewest free GPUs that has enough (best
fit; ties in node order), lowest indexes first; a job over several nodes takes the best-fitting
nodes of one GPU model (of the models with enough such nodes, the one whose best fits come
first). Sticky: a job keeps the GPUs it was given for its whole run (reconcile never moves it).
No node with room now, or jobs already waiting: Slurm places the job in its turn (a pin
would hold it for exactly those GPUs once others take them).
"""

from __future__ import annotations

from ..model import Action, JobRequest, Placement
from .base import Context, plain_placement
from .model_groups import by_model


class PackedSticky:
    name = "packed-sticky"

    def advise(self, request: JobRequest, ctx: Context) -> Placement:
        per = request.gpus
        if per < 1:
            return plain_placement(self.name, request, "packed-sticky: no GPUs asked")
        if ctx.cluster.pending_at_least(1) > 0:   # a pin would hold it for exactly those GPUs
            return plain_placement(self.name, request, "packed-sticky: jobs are waiting; Slurm "
                                   "places it in its turn")
        nodes = ctx.cluster.nodes
        fits = []
        for pos, node in enumerate(nodes):
            if not node.available or len(node.gpus) < per:
                continue
            free = [g.index for g in node.gpus if g.exclusive_job is None and not g.shard_jobs]
            if len(free) >= per:
                fits.append((len(free), pos, node.name, free[:per]))
        n = request.num_nodes
        fits.sort()
        # one node is of one model; several: the best fits of each model with enough of them
        options = [fits[:n]] if n == 1 else \
            [f[:n] for f in by_model(fits, lambda f: nodes[f[1]])]
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
