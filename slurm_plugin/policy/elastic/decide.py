"""The ``elastic`` policy's decisions, and the termination-based baseline.

Both compare predicted job completion times (queue wait plus run) and what resizes cost:

advise (at submission): a job that fits as asked starts as asked; an elastic job
(``min_gpus < max_gpus``) that does not, with nothing queued, starts now on the largest
allowed count that fits when that run is predicted to end before waiting for its request
would (the waits of the last pass); else it queues as asked. Others: unchanged. With
``order_queue``, every job (elastic or not) goes into the queue tier (``Placement.nice``,
``queue.queue_tier``) of the GPU-time it asks for (time limit x GPUs): smaller jobs first.

reconcile (each pass):
1. admit: pending jobs in priority order. One that does not fit takes the cheapest of: waiting
   for its count (its wait times 1 + the jobs queued behind it), starting smaller now (elastic
   only: its longer run), or shrinking running elastic jobs (their loss counted over its run
   only: the GPUs come back when it ends). The first job left waiting stops admission; the
   nodes its wait counts on are kept for it (as Slurm's reservation does).
2. grow: free GPUs outside those nodes go to the jobs whose new count saves the most time per
   added GPU, where each added GPU adds at least ``min_efficiency`` of one GPU's throughput
   and the time saved over the job's remaining time exceeds ``gain_factor`` x its restart cost
   (measured from its own restarts, ``track.restart_cost``; the site's until then).
A job (re)started less than ``min_interval_s`` ago, one without usable progress, and a
non-elastic job are never resized. A resize is the live path's ``resize`` action (requeue with
a new GPU count; ``num_nodes`` when the node count changes).

Run time of a queued elastic job (``run_estimate_s``): its time limit covers a run on its
minimum (the elastic contract: it may be given its minimum at any time), other counts scaled
by its class's prior; of a running one: its measured remaining time (``observe``).
"""

from __future__ import annotations

import heapq
from itertools import islice

from ...model import Action, Cluster, Job, JobRequest, Placement
from ...record import replace
from ..base import Context, plain_placement
from ..queue import AGE_CHECKS, age_tiers, id_order, queue_tier, tiered_pending
from .plan import fits, growths, take, victims, wait_s
from .predict import prior, prior_at, shape, sizes
from .settings import parse_settings
from ..free_gpus import any_free, free_map, geometry
from .track import Tracker, elastic_range, stop_marks

NAME = "elastic"
ADMIT_LOOKAHEAD = 64     # pending jobs looked at per pass


def run_estimate_s(limit_s: float | None, app: str, lo: int, m: int) -> float | None:
    """Predicted run of a queued elastic job on ``m`` GPUs: its time limit covers a run on its
    minimum ``lo``; other counts scaled by its class's prior. None without a limit."""
    if not limit_s or limit_s <= 0:
        return None
    p = prior(app)
    return limit_s * prior_at(p, lo) / max(prior_at(p, m), 1e-12)


def elastic_placement(name: str, req: JobRequest, ctx: Context, queue_at_min: bool = True,
                      ends: tuple | None = None, as_asked: bool = False) -> Placement:
    """Start now on the largest allowed count up to the request that fits, at least the
    minimum (with ``ends``, per node when its running jobs are expected to end, and now, only
    when that run ends before a wait for the request would; with ``as_asked``, a request that
    fits in its own shape starts as asked); behind a queue, the minimum or as asked."""
    rng = elastic_range(req.min_gpus, req.max_gpus)
    if rng is None or req.total_gpus < 1:
        return plain_placement(name, req, "not elastic: unchanged")
    lo, hi = rng
    cluster = ctx.cluster
    gpn, cap = geometry(cluster)
    want = max(lo, min(req.total_gpus, hi))
    options = list(sizes(lo, min(want, hi), gpn, cap))
    if not options:
        return plain_placement(name, req, "elastic: no allowed count fits the cluster")
    choice = options[0] if queue_at_min else options[-1]
    why = "queued: at its minimum" if queue_at_min else "queued: as asked"
    if cluster.pending_at_least(1) == 0:
        free = free_map(cluster)
        if as_asked and lo <= req.total_gpus <= hi \
                and fits(free, req.gpus, req.num_nodes) is not None:
            return Placement(policy=name, gpus=req.gpus,
                             why=("elastic: starts now as asked",))    # its own shape
        for m in reversed(options):
            p, k = shape(m, gpn)
            if fits(free, p, k) is None:
                continue
            if ends is not None and m < options[-1] and not _start_small(
                    req, lo, m, options[-1], gpn, ends, free):
                why = "queued: waiting for its count ends sooner"
                break
            choice, why = m, "starts now on the GPUs free"
            break
    p, k = shape(choice, gpn)
    if choice == req.total_gpus and k == req.num_nodes:
        return Placement(policy=name, gpus=p, why=(f"elastic: {why} ({choice} GPUs)",))
    return Placement(policy=name, gpus=p, num_nodes=k, why=(f"elastic: {why} ({choice} GPUs)",),
                     predicted={"gpus": float(choice)})


def _start_small(req: JobRequest, lo: int, m: int, q: int, gpn: int, ends, free) -> bool:
    """A run on ``m`` GPUs now ends before waiting for ``q`` would (True when unknown)."""
    now_s = run_estimate_s(req.time_limit_s, req.app, lo, m)
    later = run_estimate_s(req.time_limit_s, req.app, lo, q)
    got = wait_s(ends[0], free, *shape(q, gpn), ends[1])
    if now_s is None or later is None or got is None:
        return True
    return now_s <= got[0] + later


def _resize(name: str, job: Job, m: int, gpn: int, why: str, pred: dict[str, float]) -> Action:
    """Requeue ``job`` on ``m`` GPUs (in the queue tier it had: it keeps its priority)."""
    p, k = shape(m, gpn)
    return Action(kind="resize", job_id=job.job_id, policy=name, gpus=p,
                  num_nodes=k if k != job.num_nodes else None, why=why, predicted=pred,
                  run=job.restart_count)


def _tier(time_limit_s: float | None, gpus: int) -> int:
    """The queue tier of a job of ``gpus`` GPUs in all and this time limit (the GPU-time it asks
    for; 0 without a limit)."""
    return queue_tier(time_limit_s * gpus) if time_limit_s else 0


def _tier_of(job: Job) -> int:
    return _tier(job.time_limit_s, job.gpus * job.num_nodes)


def _tier_key(job_id: str) -> str:
    return f"elastic:tier:{job_id}"


def _tier_now(job: Job, hist) -> int:
    """The tier a pending job waits in: the one recorded (aged into, or kept through a resize
    at another size), else its size's."""
    got = hist.get(_tier_key(job.job_id)) if hist else None
    return int(got) if got is not None else _tier_of(job)


def _age_tiers(name: str, cluster: Cluster, now: float, s, hist) -> list[Action]:
    """``queue.age_tiers`` over the pending jobs, recorded as ``elastic:tier:<job>``, at most
    ``max_resizes_per_pass`` a pass."""
    return age_tiers(name, tiered_pending(cluster), now, s.tier_age_s, s.max_resizes_per_pass,
                     _tier_of, _tier_key, hist)


def _kept_tiers(actions: list[Action], cluster: Cluster, hist) -> dict[str, float]:
    """The tiers that jobs resized at another size keep (a requeue keeps Nice), recorded
    (``elastic:tier:<job>``) where the new size alone would give another: a live snapshot
    has no queue order, and its jobs' tiers are read from their sizes (``_tier_now``)."""
    out: dict[str, float] = {}
    for a in actions:
        if a.kind != "resize" or a.nice is not None or _tier_key(a.job_id) in hist:
            continue
        job = cluster.jobs.get(a.job_id)
        if job is None:
            continue
        tier = _tier_of(job)
        if tier != _tier(job.time_limit_s, (a.gpus or job.gpus) * (a.num_nodes or job.num_nodes)):
            out[_tier_key(a.job_id)] = float(tier)
    return out


class Elastic:
    name = NAME

    def __init__(self) -> None:
        # the last pass that decided nothing: (nodes_version, pending count, when the next
        # job's hysteresis ends); a pass with all three unchanged decides nothing either
        self._quiet: tuple | None = None
        self._track = Tracker()     # running jobs and their models, from pass to pass
        self._due: float | None = None  # when the job left waiting at the last pass is due
        self._aged_s = float("-inf")    # when the queue tiers were last aged

    def advise(self, request: JobRequest, ctx: Context) -> Placement:
        ends = (self._track.ends_on, ctx.now_s) if self._track.seen else None
        pl = elastic_placement(self.name, request, ctx, queue_at_min=False, ends=ends,
                               as_asked=True)
        s = parse_settings(ctx.settings)
        if elastic_range(request.min_gpus, request.max_gpus) is not None and s.min_interval_s:
            pl = replace(pl, why=(*pl.why, f"elastic: not resized within {s.min_interval_s:g} s "
                                           "of a start or restart (min_interval_s)"))
        if not s.order_queue:
            return pl
        tier = _tier(request.time_limit_s, pl.gpus * (pl.num_nodes or request.num_nodes))
        return replace(pl, nice=tier) if tier else pl

    # ------------------------------------------------------------------ reconcile
    def reconcile(self, ctx: Context) -> tuple[Action, ...]:
        s = parse_settings(ctx.settings)
        cluster, now = ctx.cluster, ctx.now_s
        q = self._quiet
        if q is not None and cluster.nodes_version is not None and q[0] == cluster.nodes_version \
                and q[1] == cluster.pending_count and now < q[2]:
            return ()
        aged: list[Action] = []
        if s.order_queue and s.tier_age_s > 0 and cluster.pending_at_least(1) and \
                now >= self._aged_s + s.tier_age_s / AGE_CHECKS:
            self._aged_s = now
            aged = _age_tiers(self.name, cluster, now, s, ctx.history)
        gpn, cap = geometry(cluster)
        if not any_free(cluster) and not cluster.pending_at_least(1):
            return tuple(aged)      # nothing to admit, nothing to grow into: nothing to read
        free = free_map(cluster)
        models, updates = self._track.update(ctx, s, cap)
        ends = self._track.ends_on
        actions: list[Action] = list(aged)
        if updates:
            actions.append(Action(kind="observe", job_id="", policy=self.name, predicted=updates,
                                  why="elastic: progress per GPU count"))
        pending = self._pending(cluster, s.order_queue, ctx.history)
        if not models and not pending[1]:
            return tuple(actions)
        movable = self._track.movable     # this pass's: decisions take jobs out of it
        n_actions = len(actions)
        dues: dict[str, float] = {}
        kept = self._admit(pending, free, movable, ends, gpn, cap, s, actions, cluster,
                           ctx.history, dues)
        if dues:
            actions.append(Action(kind="observe", job_id="", policy=self.name, predicted=dues,
                                  why="elastic: when the waiting job is due (fairness_factor)"))
        budget = s.max_resizes_per_pass - sum(1 for a in actions if a.kind == "resize")
        for name in kept or ():
            free[name] = 0      # growth leaves the waiting job's nodes alone
        if budget > 0:
            self._grow(free, movable, gpn, cap, s, actions, budget, cluster)
        if len(actions) == n_actions and not aged and cluster.nodes_version is not None:
            expiry = self._track.expiry    # when the next hysteresis ends
            if self._due is not None and now < self._due < expiry:
                expiry = self._due      # the waiting job's due time: it may shrink others then
            if s.order_queue and s.tier_age_s > 0:
                expiry = min(expiry, self._aged_s + s.tier_age_s / AGE_CHECKS)
            self._quiet = (cluster.nodes_version, cluster.pending_count, expiry)
        else:
            self._quiet = None
            marks: dict[str, float] = {}
            for a in actions[n_actions:]:
                job = cluster.jobs.get(a.job_id)
                if a.kind == "resize" and job is not None and job.running:
                    marks.update(stop_marks(a.job_id, now, ctx.readings.progress, ctx.history))
            if marks:
                actions.append(Action(kind="observe", job_id="", policy=self.name,
                                      predicted=marks,
                                      why="elastic: resized jobs stopped (their restarts measured)"))
            kept = _kept_tiers(actions[n_actions:], cluster, ctx.history) if s.order_queue \
                else None
            if kept:
                actions.append(Action(kind="observe", job_id="", policy=self.name,
                                      predicted=kept,
                                      why="elastic: the queue tiers resized jobs keep"))
        return tuple(actions)

    @staticmethod
    def _pending(cluster: Cluster, tiers: bool, hist=None):
        """(the first ``ADMIT_LOOKAHEAD`` pending jobs in priority order (queue tier, then
        submission, then id), how many). Where the caller keeps them in order (the simulator's
        ``Cluster.pending_jobs``), they are read lazily: admission stops at the first job left
        waiting. Else (the live path) a job's tier is the one ``advise`` gives its size, or the
        one recorded (``_tier_now``; without ``tiers``: 0 for every job)."""
        jobs = cluster.jobs
        if cluster.pending_count == 0:
            return iter(()), 0
        if cluster.pending_jobs is not None:
            n = min(len(cluster.pending_jobs), ADMIT_LOOKAHEAD)
            return islice(cluster.pending_jobs, n), n
        out = heapq.nsmallest(ADMIT_LOOKAHEAD, (j for j in jobs.values() if j.pending),
                              key=lambda j: (_tier_now(j, hist) if tiers else 0, j.submit_s,
                                             id_order(j.job_id)))
        return iter(out), len(out)

    def _admit(self, pending, free, movable, ends, gpn, cap, s, actions, cluster, hist, dues):
        """Pending jobs in priority order; the nodes kept for the first one left waiting (None:
        none waits). The first time a job waits at the head of the queue it is given a due
        time (``dues``, kept in the history): its submission plus ``fairness_factor`` x the
        wait predicted then (so far plus what Slurm's reservation predicts); past it, the job
        is admitted by shrinking elastic jobs whenever that makes room, whatever it costs
        them."""
        budget = s.max_resizes_per_pass
        restart = s.restart_cost_s
        now = cluster.taken_s
        jobs_in, count = pending
        self._due = None
        for i, job in enumerate(jobs_in):
            behind = count - i - 1
            if job.begin_s is not None and job.begin_s > cluster.taken_s:
                continue
            per, k = (job.gpus, job.num_nodes) if not job.shards else (1, 1)
            names = fits(free, per, k)
            if names is not None:
                take(free, names, per)
                continue
            queued = per * k
            got = wait_s(ends, free, per, k, cluster.taken_s)
            wait, reserved = got if got is not None else (None, [])
            rng = elastic_range(job.min_gpus, job.max_gpus) if not job.shards else None
            if rng is not None:
                est = run_estimate_s(job.time_limit_s, job.app, rng[0], queued)
                horizon = est if est is not None else (wait or 0.0)
            else:
                est, horizon = None, job.time_limit_s or (wait or 0.0)
            due_key = f"elastic:due:{job.job_id}"
            due = hist.get(due_key)
            if due is None and wait is not None:
                due = dues[due_key] = job.submit_s + s.fairness_factor * (
                    max(0.0, now - job.submit_s) + wait)
            overdue = due is not None and now >= due
            trial = dict(free)
            plan = None
            # a shrink costs at least a restart: looked for only when waiting costs more
            if budget > 0 and (overdue or wait is None
                               or wait * (1 + behind) > restart * s.gain_factor):
                plan = victims(trial, movable, per, k, gpn, horizon)
                if plan is not None and len(plan[1]) > budget:
                    plan = None
            # the cost of each way, as time added to the jobs' completions
            # every job queued behind this one waits with it (Slurm starts them in order)
            cost_wait = wait * (1 + behind) if wait is not None else float("inf")
            cost_shrink = plan[0] * max(1.0, s.gain_factor) if plan is not None else float("inf")
            start = None
            if rng is not None and budget > 0:
                options = sizes(rng[0], max(rng[0], min(queued, rng[1])), gpn, cap)
                for m in reversed(options):
                    if m >= queued:
                        continue
                    p2, k2 = shape(m, gpn)
                    got = fits(free, p2, k2)
                    if got is None:
                        continue
                    small = run_estimate_s(job.time_limit_s, job.app, rng[0], m)
                    extra = (small - est) if small is not None and est is not None else 0.0
                    start = (extra, m, p2, got)
                    break
            cost_start = start[0] if start is not None else float("inf")
            best = min(cost_wait, cost_shrink, cost_start)
            if overdue and plan is not None:
                best = cost_shrink      # past its due time: room is made for it
            if best == float("inf") or best == cost_wait:
                self._due = due
                return reserved     # waiting is cheapest: its nodes are kept for it
            if best == cost_start:
                _, m, p2, got = start
                take(free, got, p2)
                actions.append(_resize(self.name, job, m, gpn,
                                       f"elastic: start {queued}->{m} GPUs now",
                                       {"extra_run_s": cost_start, "wait_s": cost_wait}))
                budget -= 1
                continue
            loss, cuts = plan
            late = " (past its due time)" if cost_shrink > min(cost_wait, cost_start) else ""
            for m, new in cuts:
                actions.append(_resize(self.name, cluster.jobs[m.job_id], new, gpn,
                                       f"elastic: shrink {m.n}->{new} GPUs to admit "
                                       f"{job.job_id}{late}",
                                       {"wait_saved_s": cost_wait, "loss_s": loss}))
                del movable[m.job_id]
                budget -= 1
            free.clear()
            free.update(trial)
            names = fits(free, per, k)
            if names is None:      # not reached: victims checked the fit
                return reserved
            take(free, names, per)
        return None

    def _grow(self, free, movable, gpn, cap, s, actions, budget, cluster) -> None:
        """Free GPUs to the growths that save the most time per added GPU, in turn, each job
        once, where the new count fits (its own GPUs count as free)."""
        total_free = sum(free.values())
        if total_free <= 0 or budget <= 0:
            return
        grown: set[str] = set()
        top = max(free.values(), default=0)     # the most GPUs free on one node
        for _, m, new, saved in growths(total_free, movable, gpn, cap, s.gain_factor,
                                        s.min_efficiency):
            if budget <= 0 or total_free <= 0:
                return
            if m.job_id in grown or new - m.n > total_free:
                continue
            p, k = shape(new, gpn)
            if k == 1 and top < p and all(free.get(nd, 0) + c < p for nd, c in m.uses.items()):
                continue        # no node could hold it
            own = dict(free)
            for node, c in m.uses.items():
                own[node] = own.get(node, 0) + c
            names = fits(own, p, k)
            if names is None:
                continue
            take(own, names, p)
            free.clear()
            free.update(own)
            total_free = sum(free.values())
            top = max(free.values(), default=0)
            actions.append(_resize(self.name, cluster.jobs[m.job_id], new, gpn,
                                   f"elastic: grow {m.n}->{new} GPUs",
                                   {"saved_s": saved, "remaining_s": m.remaining_s}))
            grown.add(m.job_id)
            budget -= 1


class TerminationElastic:
    """Termination-based elastic baseline: an elastic job's count is chosen when it starts by
    itself (at submission: the GPUs free, at least its minimum; behind a queue, as asked) and never
    changed while it runs."""

    name = "elastic-restart"

    def advise(self, request: JobRequest, ctx: Context) -> Placement:
        return elastic_placement(self.name, request, ctx, queue_at_min=False)

    def reconcile(self, ctx: Context) -> tuple[Action, ...]:
        return ()
