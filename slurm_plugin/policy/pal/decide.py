"""``pal``: PAL's variability-aware placement (SC'24), as a placement stage.

A job that fits one node gets, among the nodes with enough free GPUs, the set of its free GPUs
with the lowest predicted slowdown (the job runs at its slowest GPU): the lowest slowdown level
some node can meet now is the current threshold; ties go to the best fit (fewest free GPUs left
on the node), then node order. A job over several nodes: PM-First, the nodes whose free GPUs give
the lowest slowdown (ties: best fit), its class's locality penalty in the prediction, all of one
GPU model (each model's choice made so, the lowest predicted slowdown taken). GPUs the
profile does not name count as median (1.0). No node with room now: Slurm places the job in its
turn, as without wattbatch. The queue: the class most sensitive to variability first
(``Placement.nice``; ``order_queue``), and within a class the smaller GPU-time asked first
(``size_tiers``); reconcile ages those tiers (``tier_age_s``: a waiting job moves one tier
earlier for every that long it has waited). Never moves a running job.
"""

from __future__ import annotations

from operator import itemgetter

from ...model import Action, Cluster, Job, JobRequest, Node, Placement
from ...physics import job_class
from ..base import Context, plain_placement
from ..model_groups import by_model
from ..queue import AGE_CHECKS, MAX_TIER, age_tiers, queue_tier, tiered_pending
from ..view_changes import PositionCache, ViewChanges
from .freshness import aged
from .predict import CLASS_INDEX, Profile, profile_of, set_slowdown
from .settings import PalSettings, parse_settings

MAX_MOVES = 16      # queue-tier moves (aging) a reconcile pass makes at most


def job_pal_class(request: JobRequest | Job, s: PalSettings) -> str:
    if request.app:
        try:
            return job_class(request.app).variability_class
        except Exception:   # an unknown workload class: the site's default
            return s.default_class
    return s.default_class


class _NodeCache:
    """Per node view (an unchanged view is the same object): whether it is available and its
    free GPUs sorted by factor, per class. Looked up by name, checked by identity. And per
    (class, GPUs per node) asked for, the candidate of each node position with room
    (``_candidate``), made again for the positions whose view changed since."""

    def __init__(self) -> None:
        self.views: dict[str, list] = {}
        self.prof: Profile | None = None
        self.changes = ViewChanges()        # the views the candidates were made of
        # (class index, GPUs per node) -> the candidate of each position, ranked by
        # (slowdown, position) among those leaving as many GPUs free (``_pick_one``)
        self.cands: dict[tuple[int, int], PositionCache] = {}

    def free_sorted(self, node: Node, prof: Profile, ci: int) -> list[tuple[float, int]]:
        hit = self.views.get(node.name)
        if hit is None or hit[0] is not node or hit[1] is not prof:
            ok = node.available
            hit = [node, prof, ok, [None] * 4 if ok else [[]] * 4]
            self.views[node.name] = hit
        lst = hit[3][ci]
        if lst is None:
            f = prof.factors
            name = node.name
            lst = []
            for g in node.gpus:
                if g.exclusive_job is None and not g.shard_jobs:
                    v = f.get((name, g.index))
                    lst.append((1.0 if v is None else v[ci], g.index))
            lst.sort()
            hit[3][ci] = lst
        return lst

    def candidates(self, cluster: Cluster, prof: Profile, ci: int, per_node: int
                   ) -> PositionCache:
        """The candidate of every node with ``per_node`` free GPUs, by position."""
        nodes = cluster.nodes
        changed = self.changes.changed_in(cluster)
        if changed is None or prof is not self.prof:
            self.prof, self.cands = prof, {}
        elif changed:
            for entry in self.cands.values():
                entry.stale.update(changed)
        entry = self.cands.get((ci, per_node))
        if entry is None:
            entry = self.cands[(ci, per_node)] = PositionCache(len(nodes), _SLOWEST, _LEFT)
        entry.refresh(lambda pos: _candidate(
            pos, nodes[pos], self.free_sorted(nodes[pos], prof, ci), per_node))
        return entry


def _candidate(pos: int, node: Node, free: list[tuple[float, int]], per_node: int
               ) -> tuple[float, int, int, Node, list[tuple[float, int]]] | None:
    """(slowdown factor of the set, free GPUs left, position, node, the set: its ``per_node``
    best free GPUs) of a node, None without room."""
    if len(free) < per_node:
        return None
    chosen = free[:per_node]
    return chosen[-1][0], len(free) - per_node, pos, node, chosen


class Pal:
    name = "pal"

    def __init__(self) -> None:
        self._cache = _NodeCache()
        self._aged_s = float("-inf")    # when the queue tiers were last aged

    def advise(self, request: JobRequest, ctx: Context) -> Placement:
        s = parse_settings(ctx.settings)
        if request.gpus < 1:
            return plain_placement(self.name, request, "pal: no GPUs asked; Slurm places it")
        prof = profile_of(ctx.settings, s)
        cls = job_pal_class(request, s)
        ci = CLASS_INDEX[cls]
        nice = _tier(request.time_limit_s, request.total_gpus, prof.rank(cls), s)
        n = request.num_nodes
        if ctx.cluster.pending_at_least(1) > 0:
            # jobs are waiting: this one waits its turn too, and a pin to GPUs free now would
            # hold it for exactly those GPUs (and the queue behind it) once others take them
            pl = plain_placement(self.name, request, f"pal: jobs are waiting; Slurm places the "
                                 f"class {cls} job in its turn")
            return pl if nice is None else _with(pl, nice=nice)
        got = self._cache.candidates(ctx.cluster, prof, ci, request.gpus)
        if n == 1:      # one node is of one model
            one = _pick_one(got, s.tolerance)
            picks = [one] if one is not None else []
        else:           # several: each model's choice, the lowest slowdown taken
            cands = sorted(got.values.values(), key=lambda c: c[2])
            picks = [_pick(g, n, s.tolerance) for g in by_model(cands, lambda c: c[3])
                     if len(g) >= n]
        if not picks:
            pl = plain_placement(self.name, request, f"pal: no {n} node(s) of one GPU model "
                                 f"with {request.gpus} free GPUs now; Slurm places the class "
                                 f"{cls} job in its turn")
            return pl if nice is None else _with(pl, nice=nice)
        slow, best, limit = min(
            ((set_slowdown([f for c in b for f, _ in c[4]], n, cls, s), b, lim)
             for b, lim in picks), key=lambda x: x[0])
        gpus = [(c[3].name, idx, f) for c in best for f, idx in c[4]]
        labels = prof.labels or {}
        shown = ", ".join(f"{node}:{idx} x{f:.3f}" + _label(labels, node, idx, ci)
                          for node, idx, f in gpus[:16])
        if len(gpus) > 16:
            shown += f", ... ({len(gpus)} GPUs)"
        how = f"single node, best fit under the slowdown threshold {limit:.3f}" if n == 1 else \
            f"PM-First over {n} nodes (locality penalty x{s.penalty(cls):.2f})"
        why = f"pal: class {cls} job, {how}: {shown}; predicted slowdown {slow:.3f}"
        old = _stale(prof, gpus, ctx.now_s, s.max_age_days)
        if old:
            why += (f"; profile stale (older than {s.max_age_days:g} days, re-run wattctl "
                    f"profile-gpus run) for {old}")
        nodes = tuple(c[3].name for c in best)
        indexes = tuple(sorted(idx for _, idx in best[0][4])) if n == 1 else ()
        return Placement(policy=self.name, gpus=request.gpus, nodes=nodes, gpu_indexes=indexes,
                         why=(why,), nice=nice,
                         predicted={"slowdown": slow, "threshold": limit})

    def reconcile(self, ctx: Context) -> tuple[Action, ...]:
        """Ages the queue tiers ``advise`` gave (``queue.age_tiers``, recorded as
        ``pal:tier:<job>``), a few times per ``tier_age_s``; nothing else."""
        s = parse_settings(ctx.settings)
        now = ctx.now_s
        if not (s.order_queue or s.size_tiers) or s.tier_age_s <= 0 or \
                now < self._aged_s + s.tier_age_s / AGE_CHECKS or \
                not ctx.cluster.pending_at_least(1):
            return ()
        self._aged_s = now
        prof = profile_of(ctx.settings, s)

        def tier_of(job: Job) -> int:
            return _tier(job.time_limit_s, job.gpus * job.num_nodes,
                         prof.rank(job_pal_class(job, s)), s) or 0
        return tuple(age_tiers(self.name, tiered_pending(ctx.cluster), now, s.tier_age_s,
                               MAX_MOVES, tier_of, _tier_key, ctx.history))


_SLOWEST = itemgetter(0, 2)     # a candidate's rank among those leaving as many GPUs free
_LEFT = itemgetter(1)           # the free GPUs it leaves


def _pick_one(cands: PositionCache, tolerance: float) -> tuple[list, float] | None:
    """``_pick`` of one node, None without a candidate: the best fit (fewest GPUs left, then
    the lowest slowdown, then node order) of the candidates under the threshold, read from
    the ranked candidates (each group of as many GPUs left, fewest first: its least slowdown
    is the best fit of the group, taken when under the threshold)."""
    heads = [(left, cands.least(left)) for left in cands.groups()]
    heads = sorted((left, c) for left, c in heads if c is not None)
    if not heads:
        return None
    limit = min(c[0] for _, c in heads) * (1.0 + tolerance) + 1e-12
    return [next(c for _, c in heads if c[0] <= limit)], limit


def _pick(cands: list, n: int, tolerance: float) -> tuple[list, float]:
    """The ``n`` candidate nodes taken (``2 <= n <= len(cands)``) and the slowdown threshold:
    the lowest slowdown some free set offers (the n-th best over n nodes) plus the tolerance;
    under it, the best fit wins (else the lowest slowdowns)."""
    floor = sorted(c[0] for c in cands)[n - 1]
    limit = floor * (1.0 + tolerance) + 1e-12
    under = [c for c in cands if c[0] <= limit]
    best = sorted(under, key=lambda c: (c[1], c[0], c[2]))[:n] if len(under) >= n \
        else sorted(cands, key=lambda c: c[:3])[:n]
    return best, limit


def _tier_key(job_id: str) -> str:
    return f"pal:tier:{job_id}"


def _tier(time_limit_s: float | None, total_gpus: int, rank: int, s: PalSettings) -> int | None:
    """A job's queue tier: its class's rank (the most variability-sensitive class first, as
    PAL orders its queue), and within it the GPU-time it asks for (``queue.queue_tier`` of its
    time limit x GPUs: smaller first); None with both orders off (Slurm's own)."""
    if not (s.order_queue or s.size_tiers):
        return None
    size = queue_tier((time_limit_s or 0.0) * total_gpus) if s.size_tiers else 0
    return (rank if s.order_queue else 0) * (MAX_TIER + 1) + size


def _label(labels, node: str, idx: int, ci: int) -> str:
    """`` (A0)``: the GPU's cluster for the class in the profile, where it names one
    (`` (unmeasured)``: the profile has no run of the class on it, so it counts as median)."""
    got = labels.get((node, idx))
    if not got or not got[ci]:
        return ""
    return " (unmeasured)" if got[ci] == "-" else f" ({got[ci]})"


def _stale(prof: Profile, gpus: list[tuple[str, int, float]], now_s: float,
           max_age_days: float) -> str:
    """The chosen GPUs whose profile row is older than ``max_age_days`` ("" none)."""
    if not prof.measured_s or max_age_days <= 0 or now_s <= 0:
        return ""
    old = [f"{n}:{i}" for n, i, _ in gpus
           if (n, i) in prof.measured_s and aged(prof.measured_s[(n, i)], now_s, max_age_days)]
    return ", ".join(old)


def _with(pl: Placement, **kw) -> Placement:
    from ...record import replace
    return replace(pl, **kw)
