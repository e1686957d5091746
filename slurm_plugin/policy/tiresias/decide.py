"""``tiresias``: discretized 2D-LAS. Each job's attained service (GPUs x seconds run) puts it
in a priority queue (``thresholds_gpu_s``: queue 0 below the first, ...); within a queue, the
earlier submission goes first. Each pass walks running and queued jobs in that order and keeps
the GPUs for those that fit (GPU counts as requested, never resized). A running job that does
not make the cut is preempted where that lets a queued job of the cut ranked above it start
(on the nodes: a job of 8 GPUs needs them on one node, and stopping jobs scattered over many
nodes would only idle their GPUs): a requeue at the same count into its queue's tier (Slurm
``Nice=``, ``Action.nice``), so it restarts from its checkpoint, paying the restart cost, behind
every job of a higher queue. Queued jobs ranked below every running job are not read (they
can stop none). Queued jobs are never held: Slurm's own order (tier, then submission) is
Tiresias's order among them, and its backfill fills what the head leaves.
A queued job's queue cannot change (service grows only while it runs), so its tier is set once,
when it is preempted. advise: unchanged (the job's request, queue 0).

A pass that decides nothing is remembered with when the next one could decide something (a
running job crossing into another queue); until then, with the cluster's nodes and the pending
count unchanged (the simulator counts node changes), a pass decides nothing again without
reading the jobs."""

from __future__ import annotations

import heapq

from ...model import Action, Cluster, Job, JobRequest, Placement
from ..base import Context, plain_placement
from ..free_gpus import gpus_by_node, node_facts
from ..queue import head_by, id_order
from .observe import attained, record
from .settings import parse_settings

NAME = "tiresias"


def _queue(service: float, thresholds: tuple[float, ...]) -> int:
    for i, t in enumerate(thresholds):
        if service < t:
            return i
    return len(thresholds)


def _queued(cluster: Cluster, lookahead: int, hist, thresholds: tuple[float, ...],
            stop: tuple | None = None) -> list[Job]:
    """The first ``lookahead`` pending jobs holding whole GPUs by (queue, submission, id), with
    ``stop`` only those whose (queue, submission) is at most ``stop``: the head of Slurm's
    order (tier, then submission), where the caller keeps it and it agrees; else every
    pending job sorted."""
    if cluster.pending_count == 0:
        return []

    def key(job: Job) -> tuple:
        return _queue(hist.get(f"tiresias:a:{job.job_id}", 0.0), thresholds), job.submit_s
    if cluster.pending_jobs is not None:
        out = head_by(cluster.pending_jobs, lookahead, key, stop)
        if out is not None:
            return out
    ranked = []                 # each job's key made once (100,000 queued jobs at a large site)
    for j in cluster.jobs.values():
        if j.pending and not j.shards:
            k = key(j)
            if stop is None or k <= stop:
                ranked.append((*k, id_order(j.job_id), j))    # the id is unique: no Job compared
    return [r[-1] for r in heapq.nsmallest(lookahead, ranked)]


def _running(cluster: Cluster) -> tuple[list[Job], dict[str, int], int]:
    """(running jobs holding whole GPUs in node order, free GPUs of each available node,
    GPUs on available nodes); each node view read once (``node_facts``)."""
    running: dict[str, Job] = {}
    jobs = cluster.jobs
    free: dict[str, int] = {}
    gpus = 0
    for node in cluster.nodes:
        n_free, ids, avail = node_facts(node)
        if avail:
            gpus += len(node.gpus)
            free[node.name] = n_free
        for jid in ids:
            if jid not in running:
                job = jobs.get(jid)
                if job is not None and job.running:
                    running[jid] = job
    return list(running.values()), free, gpus


def _victims(winners: list[tuple[tuple, Job]], losers: list[tuple[tuple, Job]],
             free: dict[str, int], cap: int) -> set[str]:
    """The running jobs to stop so that queued ``winners`` (rank, job), ranked best first,
    can start: each winner takes free GPUs where it fits (best fit), else the GPUs of
    ``losers`` (running jobs that fell out of the cut) ranked below it, lowest first, on the
    nodes where that stops the fewest GPUs (then the fewest jobs). A rank is (queue,
    submission, position); a loser of the winner's queue and submission is not stopped for
    it: only the job id sets them apart, and Slurm may order such ties otherwise (a trace's
    job names, or its lines, in the simulator), so stopping one could restart it ahead of the
    winner, pass after pass. A winner that no such stop lets start stops nothing: the GPUs
    stopped would stay idle while it waits for a node. At most ``cap`` jobs."""
    free = dict(free)
    held = {job.job_id: (rank, gpus_by_node(job)) for rank, job in losers}
    on_node: dict[str, list[tuple[int, str]]] = {}
    for jid, (rank, nodes) in held.items():
        for name in nodes:
            on_node.setdefault(name, []).append((rank, jid))
    for vs in on_node.values():
        vs.sort(reverse=True)                     # lowest-ranked first
    chosen: set[str] = set()
    for rank_q, q in winners:
        per_node, count = q.gpus, q.num_nodes
        fits = sorted((f, name) for name, f in free.items() if f >= per_node)
        if len(fits) >= count:
            for _, name in fits[:count]:
                free[name] -= per_node
            continue
        options = []
        for name, f in free.items():
            take: list[str] = []
            got = f
            for rank_v, jid in on_node.get(name, ()):
                if got >= per_node or rank_v[:2] <= rank_q[:2]:
                    break       # the rest rank above the winner, or tie with it
                if jid not in chosen:
                    take.append(jid)
                    got += held[jid][1][name]
            if got >= per_node:
                options.append((sum(sum(held[j][1].values()) for j in take), len(take),
                                name, take))
        if len(options) < count:
            continue
        options.sort()
        stop = {jid for *_, take in options[:count] for jid in take}
        if len(chosen) + len(stop) > cap:
            continue
        chosen |= stop
        for jid in stop:
            for name, n in held[jid][1].items():
                if name in free:
                    free[name] += n
        for _, _, name, _ in options[:count]:
            free[name] -= per_node
    return chosen


class Tiresias:
    name = NAME

    def __init__(self) -> None:
        # the last pass that decided nothing: (nodes_version, pending count, until when)
        self._quiet: tuple | None = None
        # job id -> (job view, queue, GPU-seconds at ``since``, since, GPUs (0: queued), when
        # it crosses into the next queue): a job's row while its view is the same object and
        # it has not crossed (its total grows linearly meanwhile; only this policy writes it)
        self._rows: dict[str, tuple] = {}

    def advise(self, request: JobRequest, ctx: Context) -> Placement:
        return plain_placement(self.name, request, "tiresias: as requested")

    def reconcile(self, ctx: Context) -> tuple[Action, ...]:
        s = parse_settings(ctx.settings)
        cluster, now = ctx.cluster, ctx.now_s
        q = self._quiet
        if q is not None and cluster.nodes_version is not None and \
                q[0] == cluster.nodes_version and q[1] == cluster.pending_count and now < q[2]:
            return ()
        self._quiet = None
        thresholds = s.thresholds_gpu_s
        hist = ctx.history
        updates: dict[str, float] = {}
        running, free, budget = _running(cluster)
        ranked = []
        until = float("inf")        # the next crossing into another queue
        rows, seen = self._rows, {}
        for job in running:
            jid = job.job_id
            row = rows.get(jid)
            if row is None or row[0] is not job or now >= row[5]:
                row = self._row(job, now, hist, thresholds, updates)
            seen[jid] = row
            if row[5] < until:
                until = row[5]
            ranked.append((row[1], job.submit_s, id_order(jid), job,
                           row[2] + row[4] * (now - row[3]) if row[4] else row[2]))
        # a queued job ranked below every running one can stop none: it is not read
        worst = max(ranked)[:2] if ranked else None
        pending = _queued(cluster, s.lookahead, hist, thresholds, worst) if ranked else []
        for job in pending:
            jid = job.job_id
            row = rows.get(jid)
            if row is None or row[0] is not job:
                row = self._row(job, now, hist, thresholds, updates)
            seen[jid] = row
            ranked.append((row[1], job.submit_s, id_order(jid), job, row[2]))
        self._rows = seen
        ranked.sort()       # queue, submission, job id (unique: the rest is never compared)
        winners: list[tuple[tuple, Job]] = []     # queued jobs within the cut
        losers: list[tuple[tuple, Job]] = []      # running jobs out of it
        for pos, (qi, sub, _, job, _) in enumerate(ranked):
            is_running = job.running
            need = len(job.uses) if is_running else job.gpus * job.num_nodes
            if need <= budget:          # it keeps (or gets) its GPUs
                budget -= need
                if not is_running:
                    winners.append(((qi, sub, pos), job))
            elif is_running:
                losers.append(((qi, sub, pos), job))
        stop = _victims(winners, losers, free, s.max_preemptions_per_pass) \
            if winners and losers else ()
        actions: list[Action] = []
        for qi, _, _, job, a in ranked:
            jid = job.job_id
            if jid in stop:
                record(jid, a, now, updates)       # its service up to the stop
                actions.append(Action(kind="resize", job_id=jid, policy=NAME, gpus=job.gpus,
                                      num_nodes=job.num_nodes, nice=qi,
                                      why=f"tiresias: preempted into queue {qi}"))
        if updates:
            actions.insert(0, Action(kind="observe", job_id="", policy=NAME, predicted=updates,
                                     why="tiresias: attained service"))
        elif not actions and cluster.nodes_version is not None:
            self._quiet = (cluster.nodes_version, cluster.pending_count, until)
        return tuple(actions)

    @staticmethod
    def _row(job: Job, now: float, hist, thresholds: tuple[float, ...],
             updates: dict[str, float]) -> tuple:
        """The job's row read afresh: a running job that crossed into another queue since its
        total was written has it written as of now (``updates``)."""
        a, n = attained(job, now, hist)
        qi = _queue(a, thresholds)
        cross = float("inf")
        if n:
            if qi != _queue(hist.get(f"tiresias:a:{job.job_id}", 0.0), thresholds):
                record(job.job_id, a, now, updates)     # crossed: its total as of now
            if qi < len(thresholds):
                cross = now + (thresholds[qi] - a) / n
        return (job, qi, a, now, n, cross)
