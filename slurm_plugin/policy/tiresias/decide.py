"""``tiresias``: discretized 2D-LAS. Each job's attained service (GPUs x seconds run) puts it
in a priority queue (``thresholds_gpu_s``: queue 0 below the first, ...); within a queue, the
earlier submission goes first. Each pass walks running and queued jobs in that order and keeps
the GPUs for those that fit (GPU counts as requested, never resized); a running job that does
not make the cut is preempted (a requeue at the same count: it restarts from its checkpoint,
paying the restart cost) and held; a queued job that does not is held (its start deferred by
``hold_s``) so Slurm's own queue order does not start it; a held job that makes the cut is
released (deferred to now). advise: unchanged (the job's request).

A pass that decides nothing is remembered with when the next one could decide something (a
running job crossing into another queue, a hold to renew); until then, with the cluster's
nodes and the pending count unchanged (the simulator counts node changes), a pass decides
nothing again without reading the jobs."""

from __future__ import annotations

from ...model import Action, Cluster, Job, JobRequest, Placement
from ..base import Context, plain_placement
from ..elastic.track import node_facts
from ..queue import first_queued
from .observe import attained, record
from .settings import parse_settings

NAME = "tiresias"


def _queue(service: float, thresholds: tuple[float, ...]) -> int:
    for i, t in enumerate(thresholds):
        if service < t:
            return i
    return len(thresholds)


def _jobs(cluster: Cluster, lookahead: int) -> tuple[list[Job], list[Job], int]:
    """(running jobs holding whole GPUs in node order, the first ``lookahead`` pending jobs in
    submission order, GPUs on available nodes); each node view read once (``node_facts``)."""
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
    return list(running.values()), first_queued(cluster, lookahead), gpus


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
        running, pending, budget = _jobs(cluster, s.lookahead)
        ranked = []
        until = float("inf")        # the next crossing into another queue, or hold renewal
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
        hold_s = s.hold_s
        waiting: list[Job] = []     # held queued jobs left out
        renew = False
        for _, _, jid, job, a in ranked:
            is_running = job.running
            need = len(job.uses) if is_running else job.gpus * job.num_nodes
            begin = job.begin_s
            if need <= budget:          # it keeps (or gets) its GPUs
                budget -= need
                if not is_running and begin is not None and begin > now:
                    actions.append(Action(kind="defer", job_id=jid, policy=NAME, begin_s=now,
                                          why="tiresias: starts"))
            elif is_running:
                if preempt <= 0:
                    continue
                preempt -= 1
                record(jid, a, now, updates)       # its service up to the stop
                actions.append(Action(kind="resize", job_id=jid, policy=NAME, gpus=job.gpus,
                                      num_nodes=job.num_nodes, why="tiresias: preempted"))
                actions.append(Action(kind="defer", job_id=jid, policy=NAME,
                                      begin_s=now + hold_s, why="tiresias: held"))
            elif begin is None or begin <= now:
                actions.append(Action(kind="defer", job_id=jid, policy=NAME,
                                      begin_s=now + hold_s, why="tiresias: held"))
            else:
                waiting.append(job)
                renew = renew or begin < now + hold_s / 2
        # the holds are renewed together once one is half run out (so they stay in step, and
        # the passes between renewals decide nothing)
        for job in waiting:
            if renew:
                actions.append(Action(kind="defer", job_id=job.job_id, policy=NAME,
                                      begin_s=now + hold_s, why="tiresias: held"))
            else:
                until = min(until, job.begin_s - hold_s / 2)    # renewed then
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
