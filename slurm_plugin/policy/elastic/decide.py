"""The ``elastic`` policy's decisions, and the termination-based baseline.

advise (at submission): an elastic job (``min_gpus < max_gpus``) starts now on as many of the
GPUs it asked for as are free (the largest allowed count, at least its minimum); with jobs
already queued it queues as asked (``elastic_placement(queue_at_min=True)`` queues it at its
minimum instead: measured worse on the Pollux workloads, docs/elastic.md). Others: unchanged.

reconcile (each pass):
1. admit: pending jobs in priority order; one that does not fit takes GPUs from running elastic
   jobs with the lowest marginal throughput per GPU (ties: the most recent checkpoint), never
   below their minimum, when the wait it saves (until enough GPUs would free by themselves)
   exceeds what the victims lose (their longer remaining time plus restart cost); the first that
   cannot be admitted blocks growth (its GPUs are kept for it, as Slurm's reservation does);
2. grow: with nothing blocked, free GPUs go to the jobs whose next count gains the most time per
   added GPU, only when each added GPU adds at least ``min_efficiency`` of a GPU's throughput and
   the time saved over the job's remaining time exceeds ``gain_factor`` x the restart cost.
A job resized (or started) less than ``min_interval_s`` ago, one without usable progress, and a
non-elastic job are never resized. A resize is the live path's ``resize`` action (requeue with a
new GPU count; ``num_nodes`` when the node count changes).
"""

from __future__ import annotations

from ...model import Action, Cluster, Job, JobRequest, Placement
from ..base import Context, plain_placement
from .observe import epoch_fraction, remaining_s, run_updates, usable_rate
from .predict import JobModel, prior, prior_at, shape, sizes
from .settings import ElasticSettings, parse_settings

NAME = "elastic"
ADMIT_LOOKAHEAD = 64     # pending jobs looked at per pass


def _gpn(cluster: Cluster) -> int:
    return max((len(n.gpus) for n in cluster.nodes), default=8)


_NODE_CACHE: dict[str, tuple] = {}    # name -> (node view, free GPUs, job ids on it)


def _node_facts(node) -> tuple:
    """(free GPUs, ids of exclusive jobs) of a node view, cached on the view object (the
    simulator hands in the same object while a node is unchanged)."""
    c = _NODE_CACHE.get(node.name)
    if c is not None and c[0] is node:
        return c[1], c[2]
    free = 0
    ids = []
    for g in node.gpus:
        if g.is_free:
            free += 1
        elif g.exclusive_job is not None and g.exclusive_job not in ids:
            ids.append(g.exclusive_job)
    if len(_NODE_CACHE) > 100_000:
        _NODE_CACHE.clear()
    _NODE_CACHE[node.name] = (node, free, ids)
    return free, ids


def _free_map(cluster: Cluster) -> dict[str, int]:
    return {n.name: _node_facts(n)[0] for n in cluster.nodes if n.available}


def _fits(free: dict[str, int], per_node: int, nodes: int) -> list[str] | None:
    """First-fit nodes (name order, as Slurm's) for ``nodes`` x ``per_node`` GPUs, or None."""
    out = []
    for name, f in free.items():
        if f >= per_node:
            out.append(name)
            if len(out) == nodes:
                return out
    return None


def _take(free: dict[str, int], names: list[str], per_node: int) -> None:
    for name in names:
        free[name] -= per_node


def _elastic_range(lo: int | None, hi: int | None) -> tuple[int, int] | None:
    if lo is None or hi is None:
        return None
    lo, hi = max(1, lo), max(1, hi)
    return (lo, hi) if hi > lo else None


def elastic_placement(name: str, req: JobRequest, ctx: Context,
                      queue_at_min: bool = True) -> Placement:
    """Start now on the largest allowed count up to the request that fits, at least the
    minimum; behind a queue, the minimum."""
    rng = _elastic_range(req.min_gpus, req.max_gpus)
    if rng is None or req.total_gpus < 1:
        return plain_placement(name, req, "not elastic: unchanged")
    lo, hi = rng
    cluster = ctx.cluster
    gpn = _gpn(cluster)
    cap = cluster.gpu_count
    want = max(lo, min(req.total_gpus, hi))
    options = sizes(lo, min(want, hi), gpn, cap)
    if not options:
        return plain_placement(name, req, "elastic: no allowed count fits the cluster")
    choice = options[0] if queue_at_min else options[-1]
    why = "queued: at its minimum" if queue_at_min else "queued: as asked"
    if cluster.pending_at_least(1) == 0:
        free = _free_map(cluster)
        for m in reversed(options):
            p, k = shape(m, gpn)
            if _fits(free, p, k) is not None:
                choice, why = m, "starts now on the GPUs free"
                break
    p, k = shape(choice, gpn)
    if choice == req.total_gpus and k == req.num_nodes:
        return Placement(policy=name, gpus=p, why=(f"elastic: {why} ({choice} GPUs)",))
    return Placement(policy=name, gpus=p, num_nodes=k, why=(f"elastic: {why} ({choice} GPUs)",),
                     predicted={"gpus": float(choice)})


def _resize(name: str, job: Job, m: int, gpn: int, why: str, pred: dict[str, float]) -> Action:
    p, k = shape(m, gpn)
    return Action(kind="resize", job_id=job.job_id, policy=name, gpus=p,
                  num_nodes=k if k != job.num_nodes else None, why=why, predicted=pred,
                  run=job.restart_count)


class Elastic:
    name = NAME

    def __init__(self) -> None:
        # the last pass that decided nothing: (nodes_version, pending count, when the next
        # job's hysteresis ends); a pass with all three unchanged decides nothing either
        self._quiet: tuple | None = None

    def advise(self, request: JobRequest, ctx: Context) -> Placement:
        return elastic_placement(self.name, request, ctx, queue_at_min=False)

    # ------------------------------------------------------------------ reconcile
    def reconcile(self, ctx: Context) -> tuple[Action, ...]:
        s = parse_settings(ctx.settings)
        cluster, now = ctx.cluster, ctx.now_s
        q = self._quiet
        if q is not None and cluster.nodes_version is not None and q[0] == cluster.nodes_version \
                and q[1] == cluster.pending_count and now < q[2]:
            return ()
        gpn = _gpn(cluster)
        cap = cluster.gpu_count
        hist = ctx.history
        progress = ctx.readings.progress
        updates: dict[str, float] = {}
        models: list[JobModel] = []
        running: list[tuple[Job, int]] = []
        jobs = cluster.jobs
        pending = self._pending(cluster)
        # running jobs from the GPUs that hold them: a pass costs the cluster's size, not the
        # queue's length
        seen: set[str] = set()
        for node in cluster.nodes:
            for jid in _node_facts(node)[1]:
                if jid in seen:
                    continue
                seen.add(jid)
                job = jobs.get(jid)
                if job is None or not job.running or job.shards:
                    continue
                n = len(job.uses) or job.gpus * job.num_nodes
                running.append((job, n))
                rng = _elastic_range(job.min_gpus, job.max_gpus)
                if rng is None:
                    continue            # not elastic: never resized
                p = progress.get(job.job_id)
                x = usable_rate(p, job, n, now, s, hist)
                if x is None:
                    continue            # no usable progress: keeps its count
                upd = run_updates(p, job, n, x, hist)
                updates.update(upd)
                view = {**hist, **upd} if upd else hist
                rem = remaining_s(p, job, now, view)
                if rem is None:
                    continue
                uses: dict[str, int] = {}
                for u in job.uses:
                    uses[u.node] = uses.get(u.node, 0) + 1
                models.append(JobModel(job.job_id, n, rng[0], min(rng[1], cap), prior(job.app),
                                       x, rem, uses, int(view.get(f"elastic:pn:{job.job_id}", 0)),
                                       view.get(f"elastic:px:{job.job_id}", 0.0),
                                       epoch_fraction(p), job.submit_s, job.time_limit_s))
        actions: list[Action] = []
        if updates:
            actions.append(Action(kind="observe", job_id="", policy=self.name, predicted=updates,
                                  why="elastic: progress per GPU count"))
        if not models and not pending:
            return tuple(actions)
        restart = s.restart_cost_s
        free = _free_map(cluster)
        movable = {m.job_id: m for m in models
                   if (jb := cluster.jobs[m.job_id]).start_s is None
                   or now - jb.start_s >= s.min_interval_s}
        budget = s.max_resizes_per_pass
        ends = sorted((m.remaining_s, m.n) for m in models)
        n_actions = len(actions)
        blocked = self._admit(pending, free, movable, ends, running, gpn, cap, restart, s,
                              actions, budget, cluster)
        budget -= sum(1 for a in actions if a.kind == "resize")
        if not blocked and budget > 0:
            self._grow(free, movable, gpn, cap, restart, s, actions, budget, cluster)
        if len(actions) == n_actions and cluster.nodes_version is not None:
            expiry = min((jb.start_s + s.min_interval_s for jb, _ in running
                          if jb.start_s is not None and jb.start_s + s.min_interval_s > now),
                         default=float("inf"))
            self._quiet = (cluster.nodes_version, cluster.pending_count, expiry)
        else:
            self._quiet = None
        return tuple(actions)

    @staticmethod
    def _pending(cluster: Cluster) -> list[Job]:
        """The first ``ADMIT_LOOKAHEAD`` pending jobs in priority order (submission, then id).
        With a pending count (the simulator keeps one, its mapping in submission order), the
        scan stops once it has them and has passed every running job."""
        jobs = cluster.jobs
        if cluster.pending_count == 0:
            return []
        out: list[Job] = []
        if cluster.pending_count is not None:
            busy = sum(len(n.gpus) - _node_facts(n)[0] for n in cluster.nodes)
            passed = 0
            for job in jobs.values():
                if job.pending:
                    out.append(job)
                    if len(out) >= ADMIT_LOOKAHEAD and passed >= busy:
                        break
                else:
                    passed += len(job.uses) or 1
        else:
            out = [j for j in jobs.values() if j.pending]
        out.sort(key=lambda j: (j.submit_s, j.job_id))
        return out[:ADMIT_LOOKAHEAD]

    def _admit(self, pending, free, movable, ends, running, gpn, cap, restart, s, actions,
               budget, cluster) -> bool:
        """Pending jobs in priority order; True when one could not be admitted."""
        # when GPUs free by themselves: jobs with a known remaining time
        for job in pending[:ADMIT_LOOKAHEAD]:
            if job.begin_s is not None and job.begin_s > cluster.taken_s:
                continue
            per, k = (job.gpus, job.num_nodes) if not job.shards else (1, 1)
            names = _fits(free, per, k)
            if names is not None:
                _take(free, names, per)
                continue
            rng = _elastic_range(job.min_gpus, job.max_gpus) if not job.shards else None
            if rng is not None and budget > 0:
                # a queued elastic job: the largest allowed count that starts now, else its
                # minimum (a pending job's new count costs no restart)
                queued = per * k
                options = sizes(rng[0], max(rng[0], min(queued, rng[1])), gpn, cap)
                started = False
                for m in reversed(options):
                    p2, k2 = shape(m, gpn)
                    names = _fits(free, p2, k2)
                    if names is not None:
                        _take(free, names, p2)
                        if m != queued:
                            actions.append(_resize(self.name, job, m, gpn,
                                                   f"elastic: start {queued}->{m} GPUs now", {}))
                            budget -= 1
                        started = True
                        break
                if started:
                    continue
                if options and options[0] != queued:
                    actions.append(_resize(self.name, job, options[0], gpn,
                                           f"elastic: queue {queued}->{options[0]} GPUs", {}))
                    budget -= 1
                    per, k = shape(options[0], gpn)
            need = per * k
            # the wait it would have: until enough GPUs free as running jobs end
            acc, wait = sum(free.values()), None
            for rem, n in ends:
                acc += n
                if acc >= need:
                    wait = rem
                    break
            if wait is None or budget <= 0:
                return True
            plan = self._victims(free, movable, per, k, gpn, restart, s)
            if plan is None:
                return True
            loss, cuts = plan
            if wait <= loss * max(1.0, s.gain_factor):
                return True
            for m, new in cuts:
                job_v = cluster.jobs[m.job_id]
                actions.append(_resize(self.name, job_v, new, gpn,
                                       f"elastic: shrink {m.n}->{new} GPUs to admit {job.job_id}",
                                       {"wait_saved_s": wait, "loss_s": loss}))
                del movable[m.job_id]
                budget -= 1
            names = _fits(free, per, k)
            if names is None:      # not reached: _victims checked the fit
                return True
            _take(free, names, per)
        return False

    def _victims(self, free, movable, per, k, gpn, restart, s):
        """The cheapest shrinks that make room for ``k`` x ``per`` GPUs: (loss_s, [(model, new
        count)]), applied to ``free``; None when they cannot (``free`` then unchanged)."""
        cands = []
        for m in movable.values():
            if m.n <= m.lo:
                continue
            smaller = [c for c in sizes(m.lo, m.n - 1, gpn, m.n) if m.within_limit(c, restart)]
            if not smaller:
                continue
            new = smaller[-1]
            per_gpu_loss = (m.tput(m.n) - m.tput(new)) / max(m.tput(m.n), 1e-12) / (m.n - new)
            cands.append((per_gpu_loss, m.ckpt_age_s, m.submit_s, m.job_id, m, smaller))
        cands.sort(key=lambda c: c[:4])
        trial = dict(free)
        cuts, loss = [], 0.0
        for _, _, _, _, m, smaller in cands:
            if _fits(trial, per, k) is not None:
                break
            # the largest smaller count whose release makes the job fit, else the minimum
            chosen = None
            for new in reversed(smaller):
                t2 = dict(trial)
                self._release(t2, m, new, gpn)
                if _fits(t2, per, k) is not None:
                    chosen = (new, t2)
                    break
            if chosen is None:
                new = smaller[0]
                t2 = dict(trial)
                self._release(t2, m, new, gpn)
                chosen = (new, t2)
            new, trial = chosen
            cuts.append((m, new))
            loss += m.remaining_at(new) - m.remaining_s + restart
        if _fits(trial, per, k) is None:
            return None
        free.clear()
        free.update(trial)
        return loss, cuts

    @staticmethod
    def _release(free: dict[str, int], m: JobModel, new: int, gpn: int) -> None:
        """``free`` after job ``m`` shrinks to ``new`` GPUs, kept on its first nodes."""
        p, k = shape(new, gpn)
        kept = 0
        for node, c in sorted(m.uses.items()):
            keep = min(c, p) if kept < k else 0
            kept += keep > 0
            free[node] = free.get(node, 0) + c - keep

    def _grow(self, free, movable, gpn, cap, restart, s, actions, budget, cluster) -> None:
        total_free = sum(free.values())
        while budget > 0 and total_free > 0 and movable:
            best = None
            for m in movable.values():
                if m.n >= m.hi:
                    continue
                own = dict(free)
                for node, c in m.uses.items():
                    own[node] = own.get(node, 0) + c
                base = m.tput(m.n)
                per_gpu1 = base / max(prior_at(m.prior, m.n), 1e-12)   # one GPU's throughput
                for new in sizes(m.n + 1, m.hi, gpn, cap):
                    if new - m.n > total_free:
                        break
                    p, k = shape(new, gpn)
                    if _fits(own, p, k) is None or not m.within_limit(new, restart):
                        continue
                    gain = m.tput(new) - base
                    if gain < s.min_efficiency * per_gpu1 * (new - m.n):
                        continue
                    saved = m.saved_s(new, restart)
                    if saved <= s.gain_factor * restart:
                        continue
                    score = saved / (new - m.n)
                    if best is None or score > best[0]:
                        best = (score, m, new, saved)
            if best is None:
                return
            _, m, new, saved = best
            for node, c in m.uses.items():
                free[node] = free.get(node, 0) + c
            p, k = shape(new, gpn)
            names = _fits(free, p, k)
            _take(free, names, p)
            total_free = sum(free.values())
            actions.append(_resize(self.name, cluster.jobs[m.job_id], new, gpn,
                                   f"elastic: grow {m.n}->{new} GPUs",
                                   {"saved_s": saved, "remaining_s": m.remaining_s}))
            del movable[m.job_id]
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
