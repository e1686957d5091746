"""``tiresias``: discretized 2D-LAS. Each job's attained service (GPUs x seconds run) puts it
in a priority queue (``thresholds_gpu_s``: queue 0 below the first, ...); within a queue, the
earlier submission goes first. Each pass walks running and queued jobs in that order and keeps
the GPUs for those that fit (GPU counts as requested, never resized); a running job that does
not make the cut is preempted: a requeue at the same count into its queue's tier (Slurm
``Nice=``, ``Action.nice``), so it restarts from its checkpoint, paying the restart cost, behind
every job of a higher queue. Queued jobs are never held: Slurm's own order (tier, then
submission) is Tiresias's order among them, and its backfill fills what the head leaves.
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
from ..elastic.track import node_facts
from ..queue import head_by
from .observe import attained, record
from .settings import parse_settings

NAME = "tiresias"


def _queue(service: float, thresholds: tuple[float, ...]) -> int:
    for i, t in enumerate(thresholds):
        if service < t:
            return i
    return len(thresholds)


def _queued(cluster: Cluster, lookahead: int, hist, thresholds: tuple[float, ...]) -> list[Job]:
    """The first ``lookahead`` pending jobs holding whole GPUs by (queue, submission, id): the
    head of Slurm's order (tier, then submission), where the caller keeps it and it agrees;
    else every pending job sorted."""
    if cluster.pending_count == 0:
        return []

    def key(job: Job) -> tuple:
        return _queue(hist.get(f"tiresias:a:{job.job_id}", 0.0), thresholds), job.submit_s
    if cluster.pending_jobs is not None:
        out = head_by(cluster.pending_jobs, lookahead, key)
        if out is not None:
            return out
    return heapq.nsmallest(lookahead, (j for j in cluster.jobs.values()
                                       if j.pending and not j.shards),
                           key=lambda j: (*key(j), j.job_id))


def _jobs(cluster: Cluster, lookahead: int, hist,
          thresholds: tuple[float, ...]) -> tuple[list[Job], list[Job], int]:
    """(running jobs holding whole GPUs in node order, the first ``lookahead`` queued jobs
    (``_queued``), GPUs on available nodes); each node view read once (``node_facts``)."""
    running: dict[str, Job] = {}
    jobs = cluster.jobs
    gpus = 0
    for node in cluster.nodes:
        _, ids, avail = node_facts(node)
        if avail:
            gpus += len(node.gpus)
        for jid in ids:
            if jid not in running:
                job = jobs.get(jid)
                if job is not None and job.running:
                    running[jid] = job
    return list(running.values()), _queued(cluster, lookahead, hist, thresholds), gpus


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
        running, pending, budget = _jobs(cluster, s.lookahead, hist, thresholds)
        ranked = []
        until = float("inf")        # the next crossing into another queue
        rows, seen = self._rows, {}
        for job in running + pending:
            jid = job.job_id
            row = rows.get(jid)
            if row is None or row[0] is not job or now >= row[5]:
                row = self._row(job, now, hist, thresholds, updates)
            seen[jid] = row
            a = row[2] + row[4] * (now - row[3]) if row[4] else row[2]
            if row[5] < until:
                until = row[5]
            ranked.append((row[1], job.submit_s, jid, job, a))
        self._rows = seen
        ranked.sort()       # queue, submission, job id (unique: the rest is never compared)
        actions: list[Action] = []
        preempt = s.max_preemptions_per_pass
        for qi, _, jid, job, a in ranked:
            is_running = job.running
            need = len(job.uses) if is_running else job.gpus * job.num_nodes
            if need <= budget:          # it keeps (or gets) its GPUs
                budget -= need
            elif is_running and preempt > 0:
                preempt -= 1
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
