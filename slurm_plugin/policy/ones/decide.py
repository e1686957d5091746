"""The ``ones`` policy's decisions (its baseline ``tiresias`` is in ``policy/tiresias``).

advise (at submission): as ``elastic`` (an elastic job starts now on the GPUs free, at least
its minimum; else it queues as asked). Others: unchanged.

reconcile (each pass): the jobs become ``Plan``s (running elastic jobs past their hysteresis
with a trusted fraction done, and the first ``lookahead`` queued jobs; every other job keeps
its GPUs), each with its options: the allowed GPU counts (one node or whole nodes) whose
best batch gives more predicted goodput than every smaller count (the job's maximum useful
size), each at that batch, plus a running job's current count and batch. ``evolve`` evolves
the population; the fittest schedule replaces the running one when its predicted goodput is
``min_gain`` higher. Its differences become actions: ``resize`` (new count, ``batch_size`` and
``lr_scale``; a running job restarts from its checkpoint), ``batch`` (a running job's new batch
on the GPUs it holds: advice it reads through the progress API, no restart; a live job's batch
is the one it reports with its progress), ``defer`` to now (a held job that
starts), ``resize`` at the same count and ``defer`` by ``hold_s`` (a running job stopped, or
a queued job left out: held so Slurm's queue order does not start it ahead of the schedule).
A non-elastic job is never resized (a queued one may be held or released).
"""

from __future__ import annotations

import random
from functools import lru_cache

from ...model import Action, Cluster, Job, JobRequest, Placement
from ..base import Context
from ..elastic.decide import elastic_placement
from ..elastic.predict import prior, prior_at, shape, sizes
from ..free_gpus import free_map, geometry, gpus_by_node, node_facts
from ..queue import first_queued, id_order
from .evolve import Plan, Room, evolve
from .observe import fraction_done, run_rate, with_reported_batch
from .predict import best_batch, goodput, lr_scale
from .quiet import Quiet, hold, renew, still_quiet
from .settings import OnesSettings, parse_settings

NAME = "ones"
MAX_GENES = 256     # running jobs in the population at most (half longest, half shortest)


def _free(cluster: Cluster) -> dict[str, int]:
    """Free GPUs per available node, in node order (kept from the last call for the nodes
    whose views did not change)."""
    return free_map(cluster)


def _running(cluster: Cluster) -> list[Job]:
    """Running jobs holding whole GPUs, in node and GPU order (each node's exclusive jobs
    read once per view)."""
    seen: set[str] = set()
    out = []
    jobs = cluster.jobs
    for node in cluster.nodes:
        for jid in node_facts(node)[1]:
            if jid not in seen:
                seen.add(jid)
                job = jobs.get(jid)
                if job is not None and job.running and not job.shards:
                    out.append(job)
    return out


_APPS: list = []     # the profiled applications, read on first use


def _apps() -> frozenset:
    """The applications with a Pollux profile."""
    if not _APPS:
        from ...physics.pollux import pollux_apps
        _APPS.append(frozenset(pollux_apps()))
    return _APPS[0]


def _profiled(job: Job) -> bool:
    return job.batch_size is not None and job.app in _apps()


@lru_cache(maxsize=4096)
def _sizes(lo: int, hi: int, gpn: int, cap: int) -> tuple[int, ...]:
    return tuple(sizes(lo, hi, gpn, cap))


@lru_cache(maxsize=4096)
def _speedups(app: str | None, lo: int, hi: int, gpn: int, cap: int,
              n_ref: int) -> tuple[tuple[int, float, float], ...]:
    """Each allowed count with its class's speedup and the speedup at ``n_ref``."""
    p = prior(app)
    return tuple((m, prior_at(p, m), prior_at(p, n_ref)) for m in _sizes(lo, hi, gpn, cap))


@lru_cache(maxsize=4096)
def _next_size(lo: int, hi: int, gpn: int, cap: int, n: int) -> int:
    """The smallest allowed count above ``n`` (0: none)."""
    return next((m for m in _sizes(lo, hi, gpn, cap) if m > n), 0)


def _may_grow(cands: list[tuple], room: Room, gpn: int, cap: int) -> bool:
    """Whether the refill could change a running job's option with no queued job in the
    population: False only when every candidate is unprofiled (its next option is a larger
    count, one of its allowed sizes) and no next allowed count fits (a larger one fits less)."""
    for job, _, _, lo, hi, uses, n, prof in cands:
        if prof:
            return True     # another batch at the same count is a step of the refill too
        m = _next_size(lo, hi, gpn, cap, n)
        if m and room.fits(uses, m):
            return True
    return False


def _range(job: Job, cap: int) -> tuple[int, int]:
    n = job.gpus * job.num_nodes
    if job.min_gpus is None or job.max_gpus is None or job.max_gpus <= job.min_gpus:
        return n, n
    return max(1, job.min_gpus), min(max(job.max_gpus, 1), cap)


def _options(job: Job, n_now: int, x_now: float | None, s: OnesSettings, gpn: int, cap: int,
             f: float, lo: int, hi: int) -> tuple[list[tuple[int, int | None, float]], int]:
    """The job's options (count ascending) and the index of its current one (-1: queued);
    ``lo``, ``hi``: its count range (``_range``)."""
    left = 1.0 - f
    limit = job.time_limit_s
    cur_opt = None
    if _profiled(job):
        eff = bool(s.statistical_efficiency)
        ref = job.batch_size
        opts = []
        for m in _sizes(lo, hi, gpn, cap):
            bb = best_batch(job.app, m, job.min_batch_size, job.max_batch_size, eff, ref)
            if bb is not None:
                opts.append((m, bb[0], bb[1]))
        if n_now:
            cur_opt = (n_now, job.batch_size, goodput(job.app, n_now, job.batch_size, eff, ref))
    else:
        if x_now is None:       # a queued job without a profile: its time limit as its length
            n_req = job.gpus * job.num_nodes
            x_now = left / limit if limit else 0.0
            n_now_ref = n_req
        else:
            n_now_ref = n_now
        opts = [(m, None, x_now * sp / sp_ref)
                for m, sp, sp_ref in _speedups(job.app, lo, hi, gpn, cap, n_now_ref)]
        if n_now:
            cur_opt = (n_now, None, x_now)
    useful: list[tuple[int, int | None, float]] = []
    last = 0.0
    restart_s = s.restart_cost_s
    most_s = 0.9 * limit if limit else 0.0
    for o in opts:      # the maximum useful size: each larger count must add goodput
        r = o[2]
        if r <= 0 or (useful and r <= last * 1.001):
            continue
        if limit and left / r + restart_s > most_s:
            continue    # would not end within its time limit (a requeue restarts it)
        useful.append(o)
        last = r
    cur = -1
    if cur_opt is not None:
        for i, o in enumerate(useful):
            if o[0] == cur_opt[0] and o[1] == cur_opt[1]:
                cur = i
                break
        else:
            useful.append(cur_opt)
            useful.sort(key=lambda o: (o[0], o[2]))
            cur = useful.index(cur_opt)
    return useful, cur


def _running_plans(cands: list[tuple], s: OnesSettings, gpn: int, cap: int,
                   jobs: dict[str, Job], fracs: dict[str, float]) -> list[Plan]:
    """The plans of the running jobs that may move (those with another option), at most
    ``MAX_GENES``: the shortest and longest predicted remaining times; their jobs and
    fractions done into ``jobs`` and ``fracs``."""
    movable: list[tuple[float, Plan]] = []
    for job, f, x, lo, hi, uses, n, _ in cands:
        opts, cur = _options(job, n, x, s, gpn, cap, f, lo, hi)
        if cur < 0 or len(opts) < 2:
            continue
        p = Plan(job.job_id, True, False, opts, cur, 1.0 - f, s.restart_cost_s,
                 (job.submit_s, id_order(job.job_id)), uses)
        jobs[job.job_id], fracs[job.job_id] = job, f
        movable.append((p.remaining / max(opts[cur][2], 1e-12), p))
    if len(movable) > MAX_GENES:
        movable.sort(key=lambda t: (t[0], id_order(t[1].job_id)))
        movable = movable[:MAX_GENES // 2] + movable[-MAX_GENES // 2:]
    return [p for _, p in movable]


class Ones:
    name = NAME

    def __init__(self) -> None:
        self._quiet: Quiet | None = None     # the last pass that only held queued jobs
        # running job id -> (its view, GPUs in all, its count range, its GPUs per node), as
        # the last pass read them (read again when the view or the cluster changes)
        self._seen: dict[str, tuple] = {}
        # queued job id -> (its view, (fraction done, GPUs per node, GPUs in all, settings),
        # its plan or None without options), as the last pass made them
        self._queued: dict[str, tuple] = {}

    def advise(self, request: JobRequest, ctx: Context) -> Placement:
        return elastic_placement(self.name, request, ctx, queue_at_min=False)

    def reconcile(self, ctx: Context) -> tuple[Action, ...]:
        s = parse_settings(ctx.settings)
        cluster, now, hist = ctx.cluster, ctx.now_s, ctx.history
        if still_quiet(self._quiet, cluster, ctx.history_version, now):
            return renew(self._quiet, cluster, now, s.hold_s)
        self._quiet = None
        gpn, cap = geometry(cluster)
        until = float("inf")        # the next hysteresis end
        waiting = False             # a job whose rate is not measured yet
        progress = ctx.readings.progress
        updates: dict[str, float] = {}
        jobs: dict[str, Job] = {}
        fracs: dict[str, float] = {}
        cands: list[tuple] = []     # running jobs that may move, read for their plans
        apps = _apps()
        seen, self._seen = self._seen, {}
        for job in _running(cluster):
            c = seen.get(job.job_id)
            if c is None or c[0] is not job or c[1] != cap:
                c = (job, cap, *_range(job, cap), gpus_by_node(job))
            self._seen[job.job_id] = c
            _, _, lo, hi, uses = c
            if lo == hi and job.app not in apps:
                continue        # not elastic: keeps its GPUs, not in the population
            pr = progress.get(job.job_id)
            job = with_reported_batch(job, pr)
            prof = _profiled(job)
            if lo == hi and not prof:
                continue
            f = fraction_done(pr, job, now, hist)
            young = job.start_s is not None and now - job.start_s < s.min_interval_s
            if young:
                until = min(until, job.start_s + s.min_interval_s)
            x = None
            if f is not None and not prof:      # a new run's first reading is recorded
                x = run_rate(pr, job, f, now, hist, updates)
                waiting = waiting or (x is None and not young)
            if f is None or young or (x is None and not prof):
                continue        # keeps its GPUs: not in the population
            cands.append((job, f, x, lo, hi, uses, len(job.uses), prof))
        queued_plans = self._queued_plans(cluster, now, hist, s, gpn, cap, jobs)
        room = Room(_free(cluster), gpn)
        plans = []
        if queued_plans or _may_grow(cands, room, gpn, cap):
            # else the running schedule refilled is the running one: no plan is needed
            plans = _running_plans(cands, s, gpn, cap, jobs, fracs) + queued_plans
        actions: list[Action] = []
        if updates:
            actions.append(Action(kind="observe", job_id="", policy=NAME, predicted=updates,
                                  why="ones: progress of new runs"))
        genes: tuple[int, ...] = ()
        if plans:
            rng = random.Random(f"{s.seed}:{now!r}")
            seed, best = evolve(plans, room, s.population, s.generations,
                                s.crossover_p, s.mutation_p, rng, 1.0 + s.min_gain)
            genes = (best if best[0] > seed[0] * (1.0 + s.min_gain) else seed)[1]
            actions += self._actions(plans, genes, jobs, fracs, now, s, gpn)
        if cluster.nodes_version is not None and not waiting and \
                all(a.kind == "defer" and a.begin_s > now for a in actions):
            held = tuple(p.job_id for p, g in zip(plans, genes) if g < 0 and not p.running)
            self._quiet = Quiet(cluster.nodes_version, cluster.pending_count, ctx.history_version,
                                until, held)
        return tuple(actions)

    def _queued_plans(self, cluster: Cluster, now: float, hist, s: OnesSettings, gpn: int,
                      cap: int, jobs: dict[str, Job]) -> list[Plan]:
        """The plans of the first ``lookahead`` queued jobs with options (each kept while its
        view, fraction done, geometry and settings are the same); their jobs into ``jobs``."""
        out = []
        queued, self._queued = self._queued, {}
        for job in first_queued(cluster, s.lookahead):
            f = fraction_done(None, job, now, hist)
            c = queued.get(job.job_id)
            if c is None or c[0] is not job or c[1] != (f, gpn, cap, s):
                opts, _ = _options(job, 0, None, s, gpn, cap, f, *_range(job, cap))
                c = (job, (f, gpn, cap, s), Plan(
                    job.job_id, False, False, opts, -1, 1.0 - f, 0.0,
                    (job.submit_s, id_order(job.job_id)), {}) if opts else None)
            self._queued[job.job_id] = c
            if c[2]:
                out.append(c[2])
                jobs[job.job_id] = job
        return out

    @staticmethod
    def _actions(plans: list[Plan], genes: tuple[int, ...], jobs: dict[str, Job],
                 fracs: dict[str, float], now: float, s: OnesSettings, gpn: int) -> list[Action]:
        out: list[Action] = []
        stopped: dict[str, float] = {}
        budget = s.max_resizes_per_pass
        for p, g in zip(plans, genes):
            job = jobs[p.job_id]
            held = job.begin_s is not None and job.begin_s > now
            if g < 0:
                if p.running:
                    if budget <= 0:
                        continue
                    budget -= 1
                    stopped[p.job_id] = fracs[p.job_id]
                    out.append(Action(kind="resize", job_id=p.job_id, policy=NAME, gpus=job.gpus,
                                      num_nodes=job.num_nodes, why="ones: stopped for the schedule"))
                    out.append(Action(kind="defer", job_id=p.job_id, policy=NAME,
                                      begin_s=now + s.hold_s, why="ones: held"))
                elif (a := hold(job, now, s.hold_s)) is not None:
                    out.append(a)
                continue
            n, batch, rate = p.options[g]
            queued = job.gpus * job.num_nodes
            changed = g != p.cur if p.running else (n != queued or
                                                     (batch is not None and batch != job.batch_size))
            if changed and p.running and batch is not None and job.batch_size and \
                    n == p.options[p.cur][0] and batch != job.batch_size:
                # the same GPUs, another batch: advice the job follows without a restart
                out.append(Action(
                    kind="batch", job_id=p.job_id, policy=NAME, batch_size=batch,
                    lr_scale=lr_scale(job.lr_scaling, job.batch_size, batch),
                    why=f"ones: batch {job.batch_size}->{batch} on {n} GPU"
                        + ("s" if n != 1 else ""),
                    predicted={"goodput_per_s": rate, "from_batch_size": job.batch_size}))
                continue
            if changed and budget > 0:
                budget -= 1
                per, k = shape(n, gpn)
                lr = None
                if batch is not None and job.batch_size:
                    lr = lr_scale(job.lr_scaling, job.batch_size, batch)
                out.append(Action(
                    kind="resize", job_id=p.job_id, policy=NAME, gpus=per,
                    num_nodes=k, batch_size=batch, lr_scale=lr,
                    why=f"ones: {len(p.uses) if p.running else queued}->{n} GPUs"
                        + (f", batch {job.batch_size}->{batch}" if batch != job.batch_size else ""),
                    predicted={"goodput_per_s": rate}))
                if p.running:
                    stopped[p.job_id] = fracs[p.job_id]
            if held and not p.running:
                out.append(Action(kind="defer", job_id=p.job_id, policy=NAME, begin_s=now,
                                  why="ones: starts"))
        if stopped:
            out.insert(0, Action(kind="observe", job_id="", policy=NAME,
                                 predicted={f"ones:f:{j}": f for j, f in stopped.items()},
                                 why="ones: fraction done of jobs it restarts"))
        return out
