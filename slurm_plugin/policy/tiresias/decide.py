"""``tiresias``: discretized 2D-LAS. Each job's attained service (GPUs x seconds run) puts it
in a priority queue (``thresholds_gpu_s``: queue 0 below the first, ...); within a queue, the
earlier submission goes first. Each pass walks running and queued jobs in that order and keeps
the GPUs for those that fit (GPU counts as requested, never resized); a running job that does
not make the cut is preempted (a requeue at the same count: it restarts from its checkpoint,
paying the restart cost) and held; a queued job that does not is held (its start deferred by
``hold_s``) so Slurm's own queue order does not start it; a held job that makes the cut is
released (deferred to now). advise: unchanged (the job's request)."""

from __future__ import annotations

from ...model import Action, Cluster, Job, JobRequest, Placement
from ..base import Context, plain_placement
from .observe import attained
from .settings import parse_settings

NAME = "tiresias"


def _queue(service: float, thresholds: tuple[float, ...]) -> int:
    for i, t in enumerate(thresholds):
        if service < t:
            return i
    return len(thresholds)


def _jobs(cluster: Cluster, lookahead: int) -> tuple[list[Job], list[Job]]:
    running: dict[str, Job] = {}
    for node in cluster.nodes:
        for g in node.gpus:
            jid = g.exclusive_job
            if jid is not None and jid not in running:
                job = cluster.jobs.get(jid)
                if job is not None and job.running:
                    running[jid] = job
    pending: list[Job] = []
    if cluster.pending_count != 0:
        pending = sorted((j for j in cluster.jobs.values() if j.pending and not j.shards),
                         key=lambda j: (j.submit_s, j.job_id))[:lookahead]
    return list(running.values()), pending


class Tiresias:
    name = NAME

    def advise(self, request: JobRequest, ctx: Context) -> Placement:
        return plain_placement(self.name, request, "tiresias: as requested")

    def reconcile(self, ctx: Context) -> tuple[Action, ...]:
        s = parse_settings(ctx.settings)
        cluster, now = ctx.cluster, ctx.now_s
        updates: dict[str, float] = {}
        running, pending = _jobs(cluster, s.lookahead)
        ranked = []
        for job in running + pending:
            a = attained(job, now, ctx.history, updates)
            ranked.append((_queue(a, s.thresholds_gpu_s), job.submit_s, job.job_id, job))
        ranked.sort(key=lambda r: r[:3])
        budget = sum(len(n.gpus) for n in cluster.nodes if n.available)
        keep: set[str] = set()
        for _, _, jid, job in ranked:
            need = len(job.uses) if job.running else job.gpus * job.num_nodes
            if need <= budget:
                keep.add(jid)
                budget -= need
        actions: list[Action] = []
        if updates:
            actions.append(Action(kind="observe", job_id="", policy=NAME, predicted=updates,
                                  why="tiresias: attained service"))
        preempt = s.max_preemptions_per_pass
        for _, _, jid, job in ranked:
            held = job.begin_s is not None and job.begin_s > now
            if jid in keep:
                if job.pending and held:
                    actions.append(Action(kind="defer", job_id=jid, policy=NAME, begin_s=now,
                                          why="tiresias: starts"))
            elif job.running:
                if preempt <= 0:
                    continue
                preempt -= 1
                actions.append(Action(kind="resize", job_id=jid, policy=NAME, gpus=job.gpus,
                                      num_nodes=job.num_nodes, why="tiresias: preempted"))
                actions.append(Action(kind="defer", job_id=jid, policy=NAME,
                                      begin_s=now + s.hold_s, why="tiresias: held"))
            elif not held or job.begin_s < now + s.hold_s / 2:
                actions.append(Action(kind="defer", job_id=jid, policy=NAME,
                                      begin_s=now + s.hold_s, why="tiresias: held"))
        return tuple(actions)
