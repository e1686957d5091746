"""GreenFlow's decisions: minimise average JCT subject to the carbon budget.

At submit, every choice of (start, GPU count, power cap) is scored by
``(1 - w) * JCT / JCT_now + w * carbon / carbon_now`` (``JCT_now``, ``carbon_now``: the job run
now, unchanged), ties going to the lower carbon, with ``w`` the carbon weight that the budget's
state sets (``observe.py``). Starts: now, and for a deferrable job (``slack_s``, a shiftable
partition) every forecast hour within its slack. GPU counts: the powers of two in the job's
allowed range on one node (the requested count when it gives none). Caps: the GPU model's
(``settings.model_caps_w``: 90 % to 40 % of its top limit), their power and speed from the
configuration models (``physics.job_cap``) with the model's own constants. On a cluster of
several GPU models each model is scored so (against the job run now unchanged on the first
model in node order) and the best taken, a model with room now first for a job that starts now
without a queue. A job that starts now on a cluster without a queue is placed by buddy
allocation and network packing (``place.py``) on nodes of that model; one Slurm places runs on
the model it gets, its cap moved into that model's range, and reconcile re-plans the cap with
its own model. Its queue tier (``Placement.nice``) grows with its predicted GPU-time
(``queue_tier``).

Reconcile (hourly): re-plans as the forecast and the budget change: a deferred pending job's
start moves to its best hour (earlier or later), a running job's cap follows the weight scaled
by how dirty this hour is against the day ahead (the caps and power of its nodes' model), and a
running elastic job may get another GPU count by the same weight (``size.py``, through the
journaled requeue). Missing carbon data: every job goes in unchanged (as ``slurm-default``)
with a warning, and nothing is re-planned.
"""

from __future__ import annotations

from collections import ChainMap
from functools import lru_cache

from ...errors import ConfigError, InputError
from ...model import Action, Cluster, Job, JobRequest, Placement
from ...physics import idle_power_w, job_class, node_base_power_w
from ...physics.job_cap import capped_job
from ..base import Context, carbon_missing, plain_placement
from ..model_groups import cluster_models, node_model
from ..powersave import POWER_SAVE
from ..queue import queue_tier
from ..view_changes import ViewChanges
from .observe import LAST_S, OBSERVE_S, observe, weight
from .place import place
from .predict import CarbonCurve
from .settings import DAY_S, parse_settings
from .size import MAX_RESIZES_PER_PASS, POWERS, free_per_node, is_resizable, resize

NAME = "greenflow"
MOVE_S = 1800.0          # a re-planned start closer than this to the current one stays put


class _Shape:
    """The most GPUs a node has and the GPU models of the nodes in node order, with what they
    are made of per node position (its GPU count and first GPU's model), made again only when
    that changes at some position."""

    __slots__ = ("changes", "facts", "gpus_per_node", "models")

    def __init__(self) -> None:
        self.changes = ViewChanges()
        self.facts: list[tuple[int, str]] = []
        self.gpus_per_node, self.models = 8, ()

    def of(self, cluster: Cluster) -> tuple[int, tuple[str, ...]]:
        nodes = cluster.nodes
        changed = self.changes.changed_in(cluster)
        if changed is None:
            self.facts = [_facts(n) for n in nodes]
        else:
            moved = False
            for i in changed:
                got = _facts(nodes[i])
                if got != self.facts[i]:
                    self.facts[i], moved = got, True
            if not moved:
                return self.gpus_per_node, self.models
        self.gpus_per_node = max((f[0] for f in self.facts), default=8)
        self.models = cluster_models(cluster) or ("V100",)
        return self.gpus_per_node, self.models


def _facts(node) -> tuple[int, str]:
    return len(node.gpus), node.gpus[0].model if node.gpus else ""


_SHAPE = _Shape()
_CURVE: list = [None, None, None]   # the last curve: (intensity now, forecast points, curve)


def _curve(now_gco2_per_kwh: float, points: tuple) -> CarbonCurve:
    """The carbon curve of these readings, made again only when they differ from the last."""
    c = _CURVE
    if c[0] != now_gco2_per_kwh or c[1] != points:
        c[0], c[1], c[2] = now_gco2_per_kwh, points, CarbonCurve(now_gco2_per_kwh, points)
    return c[2]


def _shape(cluster: Cluster) -> tuple[int, tuple[str, ...]]:
    """The most GPUs a node has and the GPU models of the nodes in node order (``V100`` on a
    cluster without GPUs); made again only when a node's GPU count or model changes."""
    return _SHAPE.of(cluster)


def _gpu_options(req: JobRequest, gpn: int) -> tuple[int, ...]:
    """Total GPU counts to try: powers of two in [min, max] on one node, else the request."""
    total = req.total_gpus
    lo, hi = req.min_gpus or total, req.max_gpus or total
    if req.num_nodes > 1 or lo == hi:
        return (total,)
    out = tuple(g for g in POWERS if lo <= g <= min(hi, gpn))
    return out or (total,)


def _headroom(request: JobRequest) -> float:
    """How much slower than on its request a job may run within its time limit: an elastic
    job's limit covers a run on its minimum count (docs/elastic.md), any other job's only the
    run as requested (the limit is the run-time estimate: a cap that slows the job is left to
    reconcile, which raises the limit with it)."""
    lo = request.min_gpus
    if not request.app or lo is None or lo >= request.total_gpus:
        return 1.0
    cls = job_class(request.app)
    return cls.speedup(request.total_gpus) / max(cls.speedup(lo), 1e-12)


def _options(request: JobRequest, caps_w, model: str, gpn: int,
             base_w: float) -> list[tuple[int, float, tuple]]:
    """(GPU count, run-time factor against the request, cap table) of each count the job may
    run on, on ``model``: only the caps its time limit covers (Slurm would kill it at it)."""
    total = request.total_gpus
    headroom = _headroom(request)
    options = []
    for g in _gpu_options(request, gpn):
        factor = 1.0
        if g != total:
            if not request.app:
                continue            # no class: another count's speed is not known
            cls = job_class(request.app)
            factor = cls.speedup(total) / cls.speedup(g)
        rows = tuple(r for r in _cap_table(request.app, g, caps_w, model, gpn, base_w)
                     if factor * r[2] <= headroom * (1 + 1e-9))
        if rows:
            options.append((g, factor, rows))
    return options


@lru_cache(maxsize=4096)
def _cap_table(app: str, gpus: int, caps_w, gpu_model: str, gpn: int, base_w: float):
    """(cap, job power_w incl. its share of node power, time multiplier) per cap; a pure
    function of the configuration models, so kept (a run asks for a few dozen tables)."""
    out = []
    for cap in caps_w:
        try:
            gpu_w, slow = capped_job(app, gpus, cap, gpu_model, gpn)
        except (ConfigError, InputError):    # no class for the app: only uncapped
            return ((None, gpus * base_w / gpn, 1.0),) if cap is None else tuple(out)
        out.append((cap, gpus * (gpu_w + base_w / gpn), slow))
    return tuple(out)


def best_choice(now_s: float, run_s: float, starts: list[float], curve: CarbonCurve,
                options: list[tuple[int, float, list]], w: float,
                ref: tuple[float, float] | None = None):
    """(score, start, gpus, cap, jct_s, carbon_g, jct_now_s, carbon_now_g) of the best choice.
    ``options``: (gpus, run-time factor against the request, cap table) per GPU count; the
    first option's first cap row is the request run now unchanged, unless ``ref`` gives that
    run's (JCT, carbon) (another model's: scores of several models compare)."""
    if ref is None:
        _, factor0, caps0 = options[0]
        jct0 = run_s * factor0 * caps0[0][2]
        c0 = caps0[0][1] * jct0 * curve.mean_gco2_per_kwh(now_s, now_s + jct0) / 3.6e6
    else:
        jct0, c0 = ref
    best = None
    best_score = best_carbon = 0.0
    w_jct, w_carbon, c_ref = 1 - w, w, max(c0, 1e-9)
    mean = curve.mean_gco2_per_kwh
    for gpus, factor, caps in options:
        run_g = run_s * factor
        means = [(s, mean(s, s + run_g)) for s in starts]
        for cap, power_w, slow in caps:
            run = run_g * slow
            energy = power_w * run
            for start, ci in means:
                jct = start - now_s + run
                carbon = energy * ci / 3.6e6
                score = w_jct * jct / jct0 + w_carbon * carbon / c_ref
                # the lowest (score, carbon)
                if best is None or score < best_score or (score == best_score
                                                          and carbon < best_carbon):
                    best, best_score, best_carbon = (start, gpus, cap, jct), score, carbon
    start, gpus, cap, jct = best
    return best_score, start, gpus, cap, jct, best_carbon, jct0, c0


class GreenFlow:
    name = NAME
    # Idle nodes power down as with slurm-powersave: no budget is met while idle nodes burn.
    slurm_settings = POWER_SAVE
    # the live reconciler reads Cluster.limit_use (sacct) for it: owed work is priced with it
    reads_limit_use = True
    # and the carbon intensity, its forecast and the period's spend (Readings)
    reads_carbon = True
    # it plans to a carbon budget (simulate --carbon-budget-kg; the site's greenflow budget)
    reads_budget = True

    def advise(self, request: JobRequest, ctx: Context) -> Placement:
        s = parse_settings(ctx.settings)
        r = ctx.readings
        if r.carbon_g_per_kwh is None or not r.carbon_forecast:
            return plain_placement(self.name, request, carbon_missing(r))
        now = ctx.now_s
        curve = _curve(r.carbon_g_per_kwh, tuple(r.carbon_forecast))
        gpn, models = _shape(ctx.cluster)
        base_w = node_base_power_w()
        starts = [now]
        if request.slack_s and "defer" not in request.opt_out and s.may_shift(request.partition):
            starts += [t for t, _ in curve.points if now < t <= now + request.slack_s]
        run_s = request.time_limit_s or 3600.0
        w = weight(s, ctx.history, request.account)
        queued = ctx.cluster.pending_at_least(1)
        # in a stack whose placement is another policy's, the spot only ranks models (on a
        # cluster of one model it is not looked for)
        places = not ctx.stage_kinds or "placement" in ctx.stage_kinds
        best = None
        ref = None
        for model in models:
            options = _options(request, s.caps_for(model), model, gpn, base_w)
            if not options:
                continue
            got = best_choice(now, run_s, starts, curve, options, w, ref)
            ref = ref or (got[6], got[7])
            per_node = got[2] // request.num_nodes if got[2] >= request.num_nodes else got[2]
            spot = None
            if got[1] <= now and not queued and (places or len(models) > 1):
                spot = place(ctx.cluster, per_node, request.num_nodes,
                             model if len(models) > 1 else None)
            # a choice to start now on a model without room now comes after one with room
            key = (got[1] <= now and not queued and spot is None, got[0], got[5])
            if best is None or key < best[0]:
                best = (key, got, per_node, spot)
        if best is None:
            return plain_placement(self.name, request, "greenflow: no GPU count its time "
                                   "limit covers; unchanged")
        _, (_, start, gpus, cap, jct, carbon, jct0, c0), per_node, spot = best
        nodes, indexes = spot or ((), ())
        whose = f" (account {request.account}'s budget)" if \
            w > weight(s, ctx.history) else ""
        why = (f"carbon weight {w:.2f}{whose}: start +{start - now:.0f} s, {gpus} GPU(s), "
               f"cap {cap or 'none'}; predicted JCT {jct:.0f} s and {carbon:.0f} g against "
               f"{jct0:.0f} s and {c0:.0f} g run now unchanged",)
        nice = queue_tier((jct - max(0.0, start - now)) * gpus) if s.order_queue else None
        return Placement(policy=self.name, gpus=per_node, nodes=nodes, gpu_indexes=indexes,
                         begin_s=start if start > now else None, power_cap_w=cap, why=why,
                         nice=nice or None,
                         predicted={"jct_s": jct, "co2_g": carbon, "jct_now_s": jct0,
                                    "co2_now_g": c0, "carbon_weight": w})

    def reconcile(self, ctx: Context) -> tuple[Action, ...]:
        last_s = ctx.history.get(LAST_S)
        if last_s is not None and ctx.now_s - last_s < OBSERVE_S:
            return ()                   # observed this hour: nothing to re-plan yet
        s = parse_settings(ctx.settings)
        r = ctx.readings
        if r.carbon_g_per_kwh is None or not r.carbon_forecast:
            return ()
        seen = observe(s, ctx.history, r, ctx.now_s, node_base_power_w(), ctx.cluster)
        if seen is None:
            return ()
        actions = [Action(kind="observe", job_id="", policy=self.name, predicted=seen)]
        history = ChainMap(seen, ctx.history)      # this pass's view, without copying the history
        cluster_w = weight(s, history)
        account_w: dict[str, float] = {}            # each account's weight, read once a pass
        now = ctx.now_s
        curve = _curve(r.carbon_g_per_kwh, tuple(r.carbon_forecast))
        day_ci = curve.mean_gco2_per_kwh(now, now + DAY_S)
        dirty = r.carbon_g_per_kwh / day_ci if day_ci > 0 else 1.0
        gpn, models = _shape(ctx.cluster)
        base_w = node_base_power_w()
        # each running job's caps and power are those of its nodes' model
        model_of = {n.name: node_model(n) for n in ctx.cluster.nodes} if len(models) > 1 \
            else {}
        # with no job queued, running elastic jobs may be resized (``size.py``): the free GPUs
        # per node are read when the first one is looked at
        may_resize = not any(j.pending and (j.begin_s is None or j.begin_s <= now)
                             for j in ctx.cluster.jobs.values())
        free: dict[str, int] | None = None
        resizes = 0
        for job in ctx.cluster.jobs.values():
            if job.running:
                if not job.app:
                    continue
            elif not (job.pending and job.begin_s is not None and job.begin_s > ctx.now_s
                      and job.slack_s):
                continue    # the queue, or eligible already: nothing to re-plan (cheaply)
            w = account_w.get(job.account)
            if w is None:
                w = account_w[job.account] = weight(s, history, job.account)
            w_now = min(1.0, w * dirty)
            if job.running:
                model = model_of.get(job.nodes[0], models[0]) if job.nodes else models[0]
                caps_w = s.caps_for(model)
                gpus = len(job.uses) or job.gpus * job.num_nodes
                if may_resize and resizes < MAX_RESIZES_PER_PASS and is_resizable(job):
                    if free is None:
                        free = free_per_node(ctx.cluster)
                    a = resize(job, now, free, gpn,
                               lambda g, app=job.app: capped_job(app, g, None, model, gpn)[0],
                               idle_power_w(model), base_w, curve.mean_gco2_per_kwh, w,
                               s.restart_cost_s, s.resize_interval_s, self.name)
                    if a is not None:
                        actions.append(a)
                        resizes += 1
                        node = job.nodes[0]
                        free[node] = free.get(node, 0) + gpus - a.gpus
                        continue
                cap = _running_cap(job.app, gpus, caps_w, model, gpn, base_w, round(w_now, 1))
                if cap != job.power_cap_w:
                    actions.append(Action(kind="power_cap", job_id=job.job_id, policy=self.name,
                                          power_cap_w=cap,
                                          time_limit_s=raised_limit_s(job, gpus, cap, now, model,
                                                                      gpn),
                                          why=f"carbon weight {w_now:.1f} this hour"
                                          + (f" (account {job.account}'s budget)"
                                             if w > cluster_w else "")))
            elif s.may_shift(job.partition):
                end = job.submit_s + job.slack_s
                starts = [now] + [t for t, _ in curve.points if now < t <= end]
                run_s = job.time_limit_s or 3600.0
                caps = [(job.power_cap_w, 1.0, 1.0)]
                _, start, *_ = best_choice(now, run_s, starts, curve, [(0, 1.0, caps)], w)
                if abs(start - job.begin_s) >= MOVE_S:
                    actions.append(Action(kind="defer", job_id=job.job_id, policy=self.name,
                                          begin_s=start, why="re-planned on the new forecast"))
        return tuple(actions)


def raised_limit_s(job: Job, gpus: int, cap_w: float | None, now_s: float, model: str,
                   gpn: int) -> float | None:
    """The time limit a running job needs under ``cap_w`` so that the cap does not kill it:
    what is left of its limit stretched by the new cap's slowdown over the old one's (None:
    the cap slows it no more, or the job has no limit or start known). Never lower."""
    if job.time_limit_s is None or job.start_s is None:
        return None
    try:
        old = capped_job(job.app, gpus, job.power_cap_w, model, gpn)[1]
        new = capped_job(job.app, gpus, cap_w, model, gpn)[1]
    except (ConfigError, InputError):
        return None
    left_s = job.start_s + job.time_limit_s - now_s
    if new <= old * (1 + 1e-9) or left_s <= 0:
        return None
    return job.time_limit_s + left_s * (new / old - 1)


@lru_cache(maxsize=4096)
def _running_cap(app: str, gpus: int, caps_w, model: str, gpn: int, base_w: float,
                 w: float) -> float | None:
    """The cap minimising ``(1 - w) * slowdown + w * energy ratio`` of a running job (its
    start is fixed: the carbon ratio is the energy ratio); pure, so kept."""
    table = _cap_table(app, gpus, caps_w, model, gpn, base_w)
    p0 = table[0][1]
    return min(table, key=lambda c: ((1 - w) * c[2] + w * c[2] * c[1] / p0, c[2] * c[1]))[0]
