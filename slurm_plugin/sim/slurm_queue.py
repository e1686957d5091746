"""Slurm's queue as the simulator emulates it: submission, priority order, a job's placement
and first fit.

A submitted job gets the policy's advice (``Policy.advise``; fail-open as wattbatch: advice
that fails or that Slurm would refuse leaves the job as it asked), honoured as Slurm honours
the sbatch options wattbatch renders from it: pinned nodes and GPU indexes, shards on a shared
GPU, ``--begin``, a power cap, a queue tier. Jobs wait in priority order: the ``--nice`` tier,
then submit order; a requeued job keeps its place. Whole GPUs, nodes first-fit in name order,
powered ones first. On a cluster of several GPU models (``ClusterSpec.groups``) each node
computes with its own model and a job runs on one: a multi-node job's nodes, its reservation
and a policy's pinned nodes are all of one model (docs/gpu-models.md).

``SlurmQueue`` is one of the parts ``engine.Simulator`` is made of (its methods run on the
simulator's state, made in ``Simulator.__init__``). The state it keeps: ``pending`` (every
queued job, in priority order), ``ready`` (those whose --begin has passed: what the scheduler
passes walk), ``wake`` (the --begin times of the others), ``pending_tiered``,
``pinned_pending``, ``by_id``, and each job's request and placement fields (``SimJob``).
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import replace as dc_replace
from operator import attrgetter

from ..model import Job, JobRequest, Placement
from ..physics import assign_class, job_class
from ..policy.base import plain_placement
from .events import BEGIN, EPS
from .mig import mig_fits, mig_placement_valid, set_mig
from .slack import draw_slack_s
from .state import OFF, PENDING, GpuState, NodeState, SimJob, gres_type
from .time_limits import draw_limit_s, whole_minutes_s
from .trace import TraceJob


# Queue order: the --nice tier, then submit order (Slurm's priority here); SimJob.prio is
# (nice, submit, trace line), set each time the job is queued
_priority = attrgetter("prio")


def _remove_queued(q: list[SimJob], j: SimJob) -> None:
    """Take ``j`` out of a list in queue order (found by bisection)."""
    k = bisect.bisect_left(q, j.prio, key=_priority)
    if k < len(q) and q[k] is j:
        del q[k]
    else:
        q.remove(j)


class SlurmQueue:
    """Submission, the queue and first fit: a part of ``engine.Simulator``."""

    # ---------------------------------------------------------------- submission
    def _submit(self, t: TraceJob) -> None:
        app = t.app or assign_class(t.job_id, self.seed, self.class_mix)
        spec = self.spec
        limit = whole_minutes_s(t.time_limit_s if t.time_limit_s is not None else draw_limit_s(
            t.job_id, t.duration_s, self.seed, spec.time_limit_rule, spec.time_limit_factor_max))
        cls = job_class(app)
        if t.speedup:       # the trace measured this job's scaling (Pollux profiles)
            cls = dc_replace(cls, speedup_table=t.speedup)
        j = SimJob(t, cls, self._request(t, app, limit))
        j.limit_s = limit
        self.by_id[j.id] = j
        j.per_node, j.num_nodes = j.req.gpus, j.req.num_nodes
        self._apply_placement(j, self._advise(j))
        self._enqueue(j)

    def _request(self, t: TraceJob, app: str, limit_s: float) -> JobRequest:
        gpn = self.spec.gpus_per_node
        nodes = -(-t.num_gpus // gpn)
        # on a cluster of several models a trace job asks for none: Slurm picks one
        model = "" if self.mixed else self.spec.gpu_type.lower()
        return JobRequest(name=f"job{t.job_id}", user=t.user, gpus=-(-t.num_gpus // nodes),
                          num_nodes=nodes, gpu_model=model,
                          time_limit_s=limit_s, deadline_s=t.deadline_s, slack_s=self._slack_s(t),
                          app=app,
                          min_gpus=t.min_gpus, max_gpus=t.max_gpus, submit_s=t.submit_s,
                          job_id=t.job_id, repeat_key=f"{t.user}:{app}")

    def _slack_s(self, t: TraceJob) -> float | None:
        if t.has_slack:
            return t.slack_s
        return draw_slack_s(t.job_id, self.seed, self.spec.deferrable_share, self.spec.slack_s)

    def _advise(self, j: SimJob) -> Placement:
        failed = getattr(self.policy, "stage_failures", 0)     # a stack's stage that raised
        try:
            pl = self.policy.advise(j.req, self.context())
        except Exception:   # fail-open, as wattbatch: the job goes in unchanged
            self.metrics.policy_fallbacks += 1
            return plain_placement(self.policy.name, j.req, "policy failed: fail-open")
        if getattr(self.policy, "stage_failures", 0) != failed:
            self.metrics.policy_fallbacks += 1      # the stages before it decided
        if not self._placement_valid(j, pl):
            self.metrics.policy_fallbacks += 1
            return plain_placement(self.policy.name, j.req, "invalid placement: fail-open")
        return pl

    # ---------------------------------------------------------------- placement
    def _placement_valid(self, j: SimJob, pl: Placement) -> bool:
        gpn = self.spec.gpus_per_node
        if pl.gpus < 1 or pl.gpus > gpn or any(n not in self.node_by_name for n in pl.nodes):
            return False
        if pl.num_nodes is not None and not 1 <= pl.num_nodes <= self.max_job_nodes:
            return False
        if self.mixed and len({self.node_by_name[n].kind.entry_id for n in pl.nodes}) > 1:
            return False        # nodes of two models: in no one partition
        if pl.gpu_indexes and (len(pl.nodes) != 1 or len(pl.gpu_indexes) != pl.gpus
                               or any(not 0 <= i < gpn for i in pl.gpu_indexes)):
            return False
        if pl.share_mode == "mig":
            return mig_placement_valid(pl, self.node_by_name)
        if pl.share_mode != "exclusive" and not (
                self.spec.shards_per_gpu and 1 <= pl.shards <= self.spec.shards_per_gpu):
            return False
        return True

    def _pin_pending(self, j: SimJob, on: bool) -> None:
        """Show (or stop showing) a pending job pinned to GPUs as their holder in the views."""
        if not j.pin_indexes:
            return
        if on:
            self.pinned_pending[j.id] = j
        else:
            self.pinned_pending.pop(j.id, None)
        node = self.node_by_name[j.pin_nodes[0]]
        for i in j.pin_indexes:
            g = node.gpus[i]
            if on:
                g.pinned.append(j)
            elif j in g.pinned:
                g.pinned.remove(j)
            g.view = None
        node.dirty = True                   # a new view; nothing Slurm allocates changed
        self.changed_nodes.add(node.pos)

    def _apply_placement(self, j: SimJob, pl: Placement, num_nodes: int | None = None) -> None:
        self._pin_pending(j, False)
        j.pl = pl
        old_total = j.total_gpus or j.t.num_gpus
        j.per_node = pl.gpus
        j.num_nodes = len(pl.nodes) if pl.nodes else (num_nodes or pl.num_nodes or j.req.num_nodes)
        j.share = pl.share_mode != "exclusive"
        j.shards = pl.shards if j.share else 0
        set_mig(j, pl, self.node_by_name)
        j.pin_nodes, j.pin_indexes = pl.nodes, pl.gpu_indexes
        j.cap_ask_w = pl.power_cap_w
        j.cap_w = self._clamped(j, pl.power_cap_w)
        j.nice = pl.nice or 0
        j.shape = None if j.pin_nodes else (j.per_node, j.num_nodes, j.shards)
        self._pin_pending(j, True)
        if j.total_gpus != old_total:
            j.scale *= j.cls.speedup(j.total_gpus) / j.cls.speedup(old_total)
        if pl.begin_s is not None and pl.begin_s > j.begin_s:
            j.begin_s = pl.begin_s
            self._push(pl.begin_s, BEGIN, j, pl.begin_s)

    # ---------------------------------------------------------------- queue
    def _enqueue(self, j: SimJob) -> None:
        j.state = PENDING
        j.prio = (j.nice, j.t.submit_s, j.t.line)
        self.pending_tiered += j.nice > 0
        # requeued (keeps its priority) or a lower --nice tier: goes in by priority
        self._insert_queued(self.pending, j)
        self._place_pending(j)
        self.job_views[j.id] = Job(job_id=j.id, state="PENDING", name=j.req.name, user=j.t.user,
                                   gpus=0 if j.share else j.per_node, shards=j.shards,
                                   num_nodes=j.num_nodes, submit_s=j.t.submit_s,
                                   time_limit_s=j.limit_s, restart_count=j.restarts,
                                   app=j.cls.name, comment=j.pl.policy if j.pl else "",
                                   deadline_s=j.t.deadline_s, slack_s=j.req.slack_s,
                                   begin_s=j.begin_s if j.begin_s > j.t.submit_s else None,
                                   power_cap_w=j.cap_w, min_gpus=j.t.min_gpus,
                                   max_gpus=j.t.max_gpus, pinned=self._pins(j),
                                   **self._batch_fields(j))
        self.dirty = True

    @staticmethod
    def _pins(j: SimJob) -> tuple[tuple[str, str, int], ...]:
        """A pending job's pins as the live snapshot reads them from its typed GRES."""
        if not j.pin_indexes or not j.pin_nodes:
            return ()
        return tuple((j.pin_nodes[0], gres_type(i), j.shards) for i in j.pin_indexes)

    def _insert_queued(self, q: list[SimJob], j: SimJob) -> None:
        """``j`` into a list in queue order: at the end, else by bisection (a reorder)."""
        if q and q[-1].prio > j.prio:
            bisect.insort(q, j, key=_priority)
            self.state_version += 1
        else:
            q.append(j)

    def _place_pending(self, j: SimJob) -> None:
        """A pending job into ``ready`` if its --begin has passed, else a wake entry at its
        --begin (none if it has one at or before it: ``_wake_due`` moves it on)."""
        if j.begin_s <= self.now + EPS:
            if not j.ready:
                self._insert_queued(self.ready, j)
                j.ready = True
        elif j.wake_s is None or j.wake_s > j.begin_s:
            self.seq += 1
            heapq.heappush(self.wake, (j.begin_s, self.seq, j))
            j.wake_s = j.begin_s

    def _wake_due(self) -> None:
        """Held jobs whose --begin has now passed go into ``ready`` (a change: no backfill pass
        resumes over it); an entry for a job held longer since moves to its --begin."""
        w, horizon = self.wake, self.now + EPS
        while w and w[0][0] <= horizon:
            b, _, j = heapq.heappop(w)
            if j.wake_s != b:
                continue            # a duplicate of a later entry
            j.wake_s = None
            if j.state == PENDING and not j.ready:
                self._place_pending(j)
                self.state_version += 1

    def _unqueue(self, j: SimJob) -> None:
        """Take a pending job out of the queue (and out of ``ready``)."""
        _remove_queued(self.pending, j)
        self.pending_tiered -= j.nice > 0
        if j.ready:
            self._unready(j)

    def _unready(self, j: SimJob) -> None:
        _remove_queued(self.ready, j)
        j.ready = False

    # ---------------------------------------------------------------- fitting
    def _node_order(self) -> list[NodeState]:
        """Nodes in Slurm's order for a new job: powered ones first (cached until a node's
        power changes)."""
        if self.nodes_on == self.spec.nodes:
            return self.nodes
        if self.order is None:
            self.order = [n for n in self.nodes if n.power != OFF] + \
                [n for n in self.nodes if n.power == OFF]
        return self.order

    def _gpu_fits(self, g: GpuState, j: SimJob) -> bool:
        if j.mig is not None:
            return mig_fits(g, j)
        if j.share:
            return not g.exclusive and g.shards_used + j.shards <= self.spec.shards_per_gpu
        return not g.jobs

    def _fit(self, j: SimJob, skip: set[str] | None = None) -> list[GpuState] | None:
        """``j``'s GPUs by Slurm's first fit, or None; nodes named in ``skip`` are not used."""
        g_need = j.per_node
        if j.pin_indexes:
            if skip and j.pin_nodes[0] in skip:
                return None
            node = self.node_by_name[j.pin_nodes[0]]
            gpus = [node.gpus[i] for i in j.pin_indexes]
            return gpus if all(self._gpu_fits(g, j) for g in gpus) else None
        if not j.share and g_need * j.num_nodes > self.free_total:
            return None
        pinned = set(j.pin_nodes)
        out: list[GpuState] = []
        nodes_found = 0
        # several models: a multi-node job's nodes all of one, the first whose nodes suffice
        by_model: dict[int, list[GpuState]] | None = \
            {} if self.mixed and j.num_nodes > 1 else None
        for n in self._node_order():
            if pinned and n.name not in pinned:
                continue
            if skip and n.name in skip:
                continue
            if not j.share:
                if n.free < g_need:
                    continue
                chosen = [g for g in n.gpus if not g.jobs][:g_need]
            else:
                if self._room(n) < j.shards:
                    continue
                chosen = [g for g in n.gpus if self._gpu_fits(g, j)][:g_need]
                if len(chosen) < g_need:
                    continue
            if by_model is not None:
                got = by_model.setdefault(n.kind.entry_id, [])
                got += chosen
                if len(got) == g_need * j.num_nodes:
                    return got
                continue
            out += chosen
            nodes_found += 1
            if nodes_found == j.num_nodes:
                return out
        return None

    def _room(self, n: NodeState) -> int:
        """Most free shards on one GPU of ``n`` that holds no exclusive job (cached)."""
        if n.room is None:
            total = self.spec.shards_per_gpu
            n.room = max((total - g.shards_used for g in n.gpus if not g.exclusive), default=0)
        return n.room
