"""The event loop: Slurm's own scheduling plus the policy's advice, driven by the physics.

Slurm is emulated as configured (``ClusterSpec``): jobs in priority (submit) order. The main
scheduler runs when a job is submitted, ends or is requeued (and when a ``--begin`` time passes),
and starts jobs in order until the first that cannot start, which blocks every later one. The
backfill pass runs every ``bf_interval_s`` (on ticks at whole multiples from the first
submission, skipped when nothing changed since the last pass, which would decide the same):
EASY backfill, the first blocked job gets a reservation and later jobs start now only if their
*time limit* ends before it or they leave its GPUs alone; running jobs are expected to end at
start + time limit, as Slurm expects; at most ``backfill_depth`` jobs are looked at per pass.
A job still running at its time limit is killed (``jobs_timed_out``). Time limits come from the
trace (``time_limit_s``) or the seeded rule of ``time_limits``, in whole minutes. Whole GPUs,
nodes first-fit in name order. On a cluster of several GPU models (``ClusterSpec.groups``) each
node computes with its own model and a job runs on one: a multi-node job's nodes, its
reservation and a policy's pinned nodes are all of one model (docs/gpu-models.md). A
policy's ``Placement`` is honoured as Slurm honours the sbatch options wattbatch renders from it:
pinned nodes and GPU indexes, shards on a shared GPU, ``--begin``, a power cap. Every
``reconcile_interval_s`` the policy's ``reconcile`` runs and its Actions are applied.

Jobs sharing a GPU time-sliced progress at their co-location slowdown, jobs in MIG instances at
their instance's rate (``mig``); rates are recomputed on every start and finish. Power is piecewise constant between events and integrated exactly.
"""

from __future__ import annotations

import bisect
import heapq
import time
from collections import deque
from dataclasses import replace as dc_replace
from operator import attrgetter
from types import MappingProxyType
from typing import Any, Callable, Mapping

from ..model import (LIMIT_USE_WINDOW_S, Action, Cluster, GpuUse, Job, JobRequest, Placement,
                     Readings)
from ..physics import (assign_class, clamp_cap_w, group_slowdowns, idle_power_w, job_class,
                       max_power_w)
from ..physics.job_cap import capped_job
from ..physics.classes import ClassMix, class_mix as named_mix
from ..physics.constants import catalogue_entry, gpu_constants
from ..policy.base import Context, Policy, plain_placement
from ..record import replace
from ..formats.carbon_series import CarbonProvider
from ..formats.carbon_forecast import ForecastingCarbon
from .carbon import WeekAlignedCarbon
from .cluster import ClusterSpec
from .metrics import Metrics
from .mig import mig_fits, mig_placement_valid, mig_rate_of, set_mig
from .state import (BOOT, CANCELLED, DONE, OFF, ON, PENDING, RUNNING, GpuKind, GpuState, NodeState,
                    SimJob, gres_type)
from .time_limits import draw_limit_s, whole_minutes_s
from .slack import draw_slack_s
from .trace import TraceJob
from .views import ForecastView, GpuReadings, PendingView, ProgressView

_FINISH, _BEGIN, _BOOT, _SUSPEND, _RECONCILE, _BACKFILL, _TIMEOUT = range(7)
_EPS = 1e-9
LOG_VERSIONS = 4096     # recent history and node versions whose changes a policy can ask for


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


class Simulator:
    """One run of one policy over one trace. ``run()`` returns the metrics dict."""

    def __init__(self, jobs: list[TraceJob], spec: ClusterSpec, policy: Policy, *,
                 carbon: WeekAlignedCarbon | None = None, seed: int = 0,
                 forecast: CarbonProvider | None = None,
                 class_mix: ClassMix | None = None,
                 variability: list[dict[str, float]] | None = None,
                 settings: Mapping[str, Any] | None = None,
                 timeline: Callable[[dict[str, float]], None] | None = None,
                 progress: Callable[[int, int], None] | None = None,
                 statistical_efficiency: bool = True) -> None:
        self.spec = spec.with_slurm_settings(getattr(policy, "slurm_settings", {})).resolved()
        self.policy, self.carbon, self.seed = policy, carbon, seed
        # what policies see of the future: a forecast from the series' past (as live)
        self.forecast = forecast or (ForecastingCarbon(carbon) if carbon is not None else None)
        self.class_mix = class_mix or named_mix("all")
        self.settings = MappingProxyType(dict(settings or {}))
        self.history: dict[str, float] = {}
        self.history_view = MappingProxyType(self.history)
        self.history_version = 0
        self.history_log: dict[int, tuple[str, ...]] = {}   # the keys of recent versions
        self.history_log_view = MappingProxyType(self.history_log)
        self.trace = jobs
        self.stat_eff = statistical_efficiency      # batch-size model: samples grow with batch
        self.timeline, self.progress = timeline, progress
        # one GpuKind per node group; nodes whose models are one catalogue entry are one model
        self.mixed = bool(self.spec.groups)
        self.max_job_nodes = self.spec.largest_model_nodes   # a job runs on one model
        entries: dict[str, int] = {}
        kinds = [GpuKind(gt, entries.setdefault(catalogue_entry(gt), len(entries)),
                         idle_power_w(gt), max_power_w(gt),
                         int(gpu_constants(gt).get("memory_mib", 32768)))
                 for gt, _ in self.spec.node_groups]
        self.nodes: list[NodeState] = []
        width = len(str(self.spec.nodes - 1))
        node_kinds = [kind for kind, (_, count) in zip(kinds, self.spec.node_groups)
                      for _ in range(count)]
        for i, kind in enumerate(node_kinds):
            n = NodeState(i, f"node{i:0{width}d}", kind)
            if self.spec.nodes_per_switch:   # topology.conf: leaf switches of N nodes
                n.features = (f"switch=s{i // self.spec.nodes_per_switch}",)
            for k in range(self.spec.gpus_per_node):
                var = variability[i * self.spec.gpus_per_node + k] if variability else None
                g = GpuState(n, k, var)
                g.power_w = kind.idle_w
                n.gpus.append(g)
            n.free = self.spec.gpus_per_node
            self.nodes.append(n)
        self.node_by_name = {n.name: n for n in self.nodes}
        if variability and "profile_factors" not in self.settings:
            # a variability-aware policy plans with the profile the engine applies, keyed by
            # (node, GPU index) as a site's profile file is
            self.settings = MappingProxyType({**self.settings, "profile_factors": MappingProxyType(
                {(g.node.name, g.index): tuple(g.var[c] for c in "ABCD")
                 for n in self.nodes for g in n.gpus})})
        # capacity indexes: nodes with at least k free GPUs, shareable GPUs by free shards
        self.nodes_at_least = [self.spec.nodes] * (self.spec.gpus_per_node + 1)
        self.gpus_by_room = [0] * (self.spec.shards_per_gpu + 1)
        self.gpus_by_room[self.spec.shards_per_gpu] = self.spec.gpu_count
        # (EASY) _avail by column: per k, when the k-th GPU of each node (by position) frees
        self.avail_cols = [[0.0] * self.spec.nodes for _ in range(self.spec.gpus_per_node)]
        self.avail_stale: set[int] = set()      # nodes whose column entries are out of date
        self.now = jobs[0].submit_s if jobs else 0.0
        for n in self.nodes:
            n.idle_since = self.now
        self.free_total = self.spec.gpu_count
        self.pending: list[SimJob] = []
        # the pending jobs whose --begin has passed, in priority order (what the scheduler
        # passes walk: a held job is never walked), and (begin, seq, job) of the others
        self.ready: list[SimJob] = []
        self.wake: list[tuple] = []
        self.pending_tiered = 0     # pending jobs in a later --nice tier than 0
        self.running: dict[str, SimJob] = {}
        self.job_views: dict[str, Job] = {}
        self.jobs_view = MappingProxyType(self.job_views)
        self.by_id: dict[str, SimJob] = {}
        self.heap: list[tuple] = []
        self.seq = 0
        self.metrics = Metrics(len(jobs))
        # the jobs ended in the last LIMIT_USE_WINDOW_S: (end, GPU-s used, GPU-s of limit), and
        # the two sums (Cluster.limit_use)
        self.limit_log: deque[tuple[float, float, float]] = deque()
        self.limit_sums = [0.0, 0.0]
        self.gpu_power_total = sum(kind.idle_w * (count * self.spec.gpus_per_node)
                                   for kind, (_, count) in zip(kinds, self.spec.node_groups))
        self.node_power_total = self.spec.node_base_power_w * self.spec.nodes
        self.busy_gpus = 0          # GPUs holding a running job (not one waiting for a boot)
        self.job_gpus = 0           # GPUs of running jobs, a shared GPU once per job
        self.sm_util_total = 0.0    # summed SM utilisation (%) of every GPU
        self.nodes_on = self.spec.nodes
        self.dirty = False
        self.bf_dirty = False
        self.bf_pending = False
        self.state_version = 0      # changes with any node, a --begin passing, a queue reorder
        self.soft_version = 0       # changes that start nothing at any time: see _soft_change
        self.bf_resume: tuple | None = None
        self.t0 = self.now
        self.changed_nodes: set[int] = set(range(len(self.nodes)))
        self.order: list[NodeState] | None = None
        self.node_list: list = [None] * len(self.nodes)
        self.node_views: tuple = ()
        self.forecast_cache: tuple = (-1, (), [], (-1, ()))     # views.ForecastView's
        self.nodes_version = 0
        self.nodes_log: dict[int, tuple[str, ...]] = {}     # the nodes of recent versions
        self.nodes_log_view = MappingProxyType(self.nodes_log)
        self.gpu_readings, self.progress_view = GpuReadings(self), ProgressView(self)  # live views
        self.pending_view = PendingView(self)
        self.pinned_pending: dict[str, SimJob] = {}   # pending jobs pinned to GPUs, by id

    # ---------------------------------------------------------------- event plumbing
    def _push(self, t: float, kind: int, obj: Any, token: Any = None) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, obj, token))

    def _advance(self, t: float) -> None:
        dt = t - self.now
        if dt > 0:
            p = self.gpu_power_total + self.node_power_total
            m = self.metrics
            m.energy_j += p * dt
            m.gpu_energy_j += self.gpu_power_total * dt
            m.busy_gpu_s += self.busy_gpus * dt
            m.job_gpu_s += self.job_gpus * dt
            m.sm_util_gpu_s += self.sm_util_total / 100.0 * dt
            m.node_on_s += self.nodes_on * dt
            if self.carbon is not None:
                m.carbon_g += p * self.carbon.integral_h(self.now, t) / 1000.0
            if self.timeline is not None:
                self.timeline({"time_s": self.now, "duration_s": dt, "power_w": p,
                               "gpu_power_w": self.gpu_power_total, "busy_gpus": self.busy_gpus,
                               "running_jobs": len(self.running), "pending_jobs": len(self.pending),
                               "nodes_on": self.nodes_on})
            self.now = t

    def _soft_change(self) -> None:
        """Record a change that makes no job startable or unstartable at any time (a hold
        renewal, a --begin event gone stale, an observation): a backfill pass may still resume
        after it when every node is powered and no job it skipped for its --begin is due."""
        self.soft_version += 1

    def _touch(self, n: NodeState) -> None:
        n.dirty = True
        self._avail_changed(n)
        n.room = None
        self.changed_nodes.add(n.pos)
        self.state_version += 1

    # ---------------------------------------------------------------- policy calls
    def context(self) -> Context:
        """What a policy sees now: the same frozen types as on the live cluster."""
        spec = self.spec
        if self.changed_nodes:     # only the nodes that changed get a new view
            views, nodes = self.node_list, self.nodes
            for pos in self.changed_nodes:
                views[pos] = nodes[pos].model(spec.shards_per_gpu)
            self.nodes_version += 1
            self.nodes_log[self.nodes_version] = tuple(nodes[p].name for p in self.changed_nodes)
            self.nodes_log.pop(self.nodes_version - LOG_VERSIONS, None)
            self.changed_nodes.clear()
            self.node_views = tuple(views)
        cluster = Cluster(nodes=self.node_views, jobs=self.jobs_view, taken_s=self.now, name="sim",
                          pending_count=len(self.pending), nodes_version=self.nodes_version,
                          nodes_log=self.nodes_log_view, pending_jobs=self.pending_view,
                          pending_tiered=self.pending_tiered, limit_use=self._limit_use(),
                          pending_pinned=tuple(self.job_views[i] for i in self.pinned_pending))
        ci, forecast = None, ()
        if self.carbon is not None:
            ci, forecast = self.carbon.at(self.now), ForecastView(self)
        readings = Readings(gpus=self.gpu_readings, progress=self.progress_view,
                            carbon_g_per_kwh=ci, carbon_forecast=forecast, taken_s=self.now,
                            cluster_power_w=self.gpu_power_total + self.node_power_total)
        return Context(cluster=cluster, readings=readings, now_s=self.now,
                       settings=self.settings, history=self.history_view,
                       history_version=self.history_version, history_log=self.history_log_view)

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
        try:
            pl = self.policy.advise(j.req, self.context())
        except Exception:   # fail-open, as wattbatch: the job goes in unchanged
            self.metrics.policy_fallbacks += 1
            return plain_placement(self.policy.name, j.req, "policy failed: fail-open")
        if not self._placement_valid(j, pl):
            self.metrics.policy_fallbacks += 1
            return plain_placement(self.policy.name, j.req, "invalid placement: fail-open")
        return pl

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
            self._push(pl.begin_s, _BEGIN, j, pl.begin_s)

    def _kind_of(self, j: SimJob) -> GpuKind | None:
        """The GPU model ``j`` runs on or will: its GPUs', its pinned nodes', the cluster's
        only one; None while Slurm has yet to choose among several."""
        if j.gpus:
            return j.gpus[0].node.kind
        if j.pin_nodes:
            return self.node_by_name[j.pin_nodes[0]].kind
        return None if self.mixed else self.nodes[0].kind

    def _clamped(self, j: SimJob, power_cap_w: float | None) -> float | None:
        """A cap asked for ``j`` moved into its model's settable range (as asked while its
        model is not known yet: the node clamps it when the job starts)."""
        kind = self._kind_of(j)
        return power_cap_w if kind is None else clamp_cap_w(power_cap_w, kind.model)

    # ---------------------------------------------------------------- submit / queue
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
        if j.begin_s <= self.now + _EPS:
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
        w, horizon = self.wake, self.now + _EPS
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

    # ---------------------------------------------------------------- EASY backfill
    def _avail(self, n: NodeState) -> list[float]:
        """Per node, when its k-th GPU becomes free (k = 1..gpus): a GPU frees when the last of
        its jobs reaches its time limit (Slurm's expected end); cached until the node changes."""
        if n.avail is None:
            times = [(g.jobs[0].end_by_s if len(g.jobs) == 1 else max(jb.end_by_s for jb in g.jobs))
                     if g.jobs else 0.0 for g in n.gpus]
            times.sort()
            n.avail = times
        return n.avail

    def _avail_changed(self, n: NodeState) -> None:
        """``n``'s GPUs may free at other times: its ``_avail`` and column entries are stale."""
        n.avail = None
        self.avail_stale.add(n.pos)

    def _avail_columns(self) -> list[list[float]]:
        """``avail_cols``, brought up to date for the nodes changed since the last call."""
        cols = self.avail_cols
        for pos in self.avail_stale:
            for col, t in zip(cols, self._avail(self.nodes[pos])):
                col[pos] = t
        self.avail_stale.clear()
        return cols

    def _soonest_nodes(self, g_need: int, count: int) -> list[NodeState] | None:
        """The ``count`` nodes where ``g_need`` GPUs free soonest (ties: in node order), read
        from the columns when the answer needs no clamping: every such time is later than now
        and than 0 (a time of 0 is a free GPU, which a booting node has only after its
        boot), so it is the node's time in ``_reserve``. None: ask ``_reserve``'s scan."""
        col = self._avail_columns()[g_need - 1]
        first_s = min(col)
        if first_s <= self.now or first_s <= 0.0:
            return None
        if count == 1:
            return [self.nodes[col.index(first_s)]]
        return [self.nodes[p] for p in heapq.nsmallest(count, range(len(col)), key=col.__getitem__)]

    def _reserve(self, head: SimJob) -> tuple[float, dict[str, int]]:
        """Shadow time of the blocked head job and, per reserved node, GPUs left spare then."""
        g_need = head.per_node
        pinned = set(head.pin_nodes)
        now = self.now
        if not pinned and self.nodes_on == self.spec.nodes and (head.num_nodes == 1
                                                                 or not self.mixed):
            soonest = self._soonest_nodes(g_need, head.num_nodes)
            if soonest is not None:
                return self._reservation(soonest, g_need)
            if head.num_nodes == 1:
                return self._reserve_one(g_need)
        cands: list[tuple[float, int, NodeState]] = []
        best: tuple[float, int, NodeState] | None = None     # one-node heads: the earliest
        one = head.num_nodes == 1
        for n in self.nodes:
            if pinned and n.name not in pinned:
                continue
            av = n.avail if n.avail is not None else self._avail(n)
            if len(av) < g_need:
                continue
            t = av[g_need - 1]
            if n.power == ON:
                base = now
            else:
                base = max(now, n.ready_s) if n.power == BOOT else now + self.spec.resume_delay_s
            if t < base:
                t = base
            if one:
                if best is None or t < best[0]:     # nodes in order: ties keep the first
                    best = (t, n.pos, n)
            else:
                cands.append((t, n.pos, n))          # pos is unique: n never compared
        if one:
            if best is None:
                return (float("inf"), {})
            chosen = [best]
        elif len(cands) < head.num_nodes:
            return (float("inf"), {})
        elif self.mixed:        # the nodes of one model that free soonest
            per_model: dict[int, list[tuple[float, int, NodeState]]] = {}
            for c in cands:
                per_model.setdefault(c[2].kind.entry_id, []).append(c)
            options = [sorted(cs)[:head.num_nodes] for cs in per_model.values()
                       if len(cs) >= head.num_nodes]
            if not options:
                return (float("inf"), {})
            chosen = min(options, key=lambda cs: cs[-1][0])
        else:
            chosen = sorted(cands)[:head.num_nodes]
        shadow = chosen[-1][0]
        spare = {}
        for _, _, n in chosen:
            spare[n.name] = bisect.bisect_right(self._avail(n), shadow) - g_need
        return (shadow, spare)

    def _reservation(self, chosen: list[NodeState], g_need: int) -> tuple[float, dict[str, int]]:
        """``_reserve``'s answer on ``chosen`` (soonest first), each node's time unclamped."""
        shadow = self._avail(chosen[-1])[g_need - 1]
        return (shadow, {n.name: bisect.bisect_right(self._avail(n), shadow) - g_need
                         for n in chosen})

    def _reserve_one(self, g_need: int) -> tuple[float, dict[str, int]]:
        """``_reserve`` of a one-node head with every node powered and none pinned: the first
        node (in order) where ``g_need`` GPUs are free soonest."""
        now = self.now
        k = g_need - 1
        best = None
        best_t = 0.0
        for n in self.nodes:
            av = n.avail if n.avail is not None else self._avail(n)
            if len(av) <= k:
                continue
            t = av[k]
            if n.power != ON:       # booting (every node counts as powered)
                base = n.ready_s if n.ready_s > now else now
            else:
                base = now
            if t < base:
                t = base
            if best is None or t < best_t:
                best, best_t = n, t
        if best is None:
            return (float("inf"), {})
        return (best_t, {best.name: bisect.bisect_right(best.avail, best_t) - g_need})

    def _backfill_ok(self, j: SimJob, gpus: list[GpuState], res: tuple[float, dict[str, int]]) -> bool:
        shadow, spare = res
        if self.now + j.limit_s <= shadow + _EPS:
            return True
        use: dict[str, int] = {}
        for g in gpus:
            if g.node.name in spare and not g.jobs:
                use[g.node.name] = use.get(g.node.name, 0) + 1
        if any(c > spare[name] for name, c in use.items()):
            return False
        for name, c in use.items():
            spare[name] -= c
        return True

    def _schedule(self) -> None:
        """The main scheduler: start jobs in priority order until the first that cannot start
        (it blocks the partition for the rest of the pass); a blocked queue asks for a backfill
        pass at the next ``bf_interval_s`` tick. A job that names its nodes (``--nodelist``)
        and cannot start blocks only those nodes for the rest of the pass, not the partition
        (slurmctld's ``_schedule``: "Do not schedule more jobs on nodes required by this job,
        but don't block the entire queue/partition")."""
        self._wake_due()
        r = self.ready
        considered = i = 0
        now = self.now
        skip: set[str] = set()
        while i < len(r) and considered < self.spec.backfill_depth:
            j = r[i]
            considered += 1
            gpus = self._fit(j, skip)
            if gpus is None:
                if j.pin_nodes and len(j.pin_nodes) >= j.num_nodes:
                    skip.update(j.pin_nodes)
                    i += 1
                    continue
                break
            self._unqueue(j)
            self._start(j, gpus)
        q = self.pending
        self.dirty = False
        self.bf_dirty = True
        if q and not self.bf_pending:
            bf = self.spec.bf_interval_s
            tick = self.t0 + bf * (int((now - self.t0) / bf) + 1)
            self._push(tick, _BACKFILL, None)
            self.bf_pending = True

    def _capacity(self) -> tuple[list[int], int]:
        """From the indexes: nodes with at least k free GPUs (k = 0..gpus per node; the index
        itself, valid until the next start or release), and the most free shards on one
        shareable GPU. A job asking for more cannot start, so a pass skips it without a fit."""
        at_least = self.nodes_at_least
        room = len(self.gpus_by_room) - 1
        while room > 0 and not self.gpus_by_room[room]:
            room -= 1
        return at_least, room

    def _gpu_room(self, g: GpuState) -> int:
        return 0 if g.exclusive else self.spec.shards_per_gpu - g.shards_used

    def _backfill(self) -> None:
        """One backfill pass: every job past its --begin (``ready``) in priority order, up to
        ``backfill_depth`` of them; the first that cannot start gets the reservation (EASY). A
        pass after one that started nothing, with no node changed since (``state_version``),
        goes on where that one stopped: the jobs it looked at would fail again, only jobs
        submitted since are new."""
        self._wake_due()
        q = self.ready
        depth = self.spec.backfill_depth
        inf = float("inf")
        self.bf_dirty = False
        version = self.state_version
        if self._can_resume():
            _, _, i, considered, skip, head, res = self.bf_resume
            if considered >= depth or i >= len(q):
                return
        else:
            res = None
            head: SimJob | None = None
            # shape -> the shortest limit that cannot start now: 0 when the shape got no GPUs,
            # else the limit that would delay the head (a longer one would too)
            skip: dict[tuple[int, int, int], float] = {}
            i = considered = 0
        at_least, room = self._capacity()
        if at_least[1] == 0 and not room:
            self.bf_resume = (self.state_version, self.soft_version, len(q), 0, {}, None, None)
            return
        while i < len(q) and considered < depth:
            j = q[i]
            i += 1
            considered += 1
            shape = j.shape
            if j.limit_s >= skip.get(shape, inf):
                continue
            if shape is not None and (j.shards > room if j.share
                                      else at_least[j.per_node] < j.num_nodes):
                gpus = None
            else:
                gpus = self._fit(j)
            if gpus is None:
                if shape is not None:
                    skip[shape] = 0.0
                if head is None and not j.share and not j.pin_indexes:
                    head = j
                continue
            i -= 1
            if head is not None and res is None:
                res = self._reserve(head)
            if res is not None and not self._backfill_ok(j, gpus, res):
                if shape is not None:
                    skip[shape] = j.limit_s
                i += 1
                continue
            self._unqueue(j)
            self._start(j, gpus)
            # the start moved first fit and the head's spare GPUs: a shape refused for its
            # limit may fit elsewhere now (a shape that got no GPUs still gets none)
            if any(skip.values()):
                skip = {k: v for k, v in skip.items() if not v}
            at_least, room = self._capacity()
            if at_least[1] == 0 and not room:
                break
        # a pass that started a job leaves nothing to resume: its reservation predates the start
        self.bf_resume = (self.state_version, self.soft_version, i, considered, skip, head,
                          res) if self.state_version == version else None

    def _can_resume(self) -> bool:
        """Whether the pass goes on where the last one stopped: no change since but soft ones
        (``_soft_change``), and after soft ones only when a fresh pass now would reach the same
        state there: every node powered (an off node's resume time, so a reservation, moves
        with now). A held job whose --begin passed is a change (``_wake_due``)."""
        r = self.bf_resume
        if r is None or r[0] != self.state_version:
            return False
        return r[1] == self.soft_version or self.nodes_on == self.spec.nodes

    # ---------------------------------------------------------------- start / finish
    def _start(self, j: SimJob, gpus: list[GpuState]) -> None:
        self._pin_pending(j, False)
        now = self.now
        j.state, j.gpus, j.start_s, j.last_s, j.rate = RUNNING, gpus, now, now, 0.0
        j.cap_w = self._clamped(j, j.cap_ask_w)     # the node moves it into its board's range
        self._cap_effect(j)
        j.util_pct = j.cls.util_at(j.total_gpus)
        nodes = {}
        by_room = self.gpus_by_room
        for g in gpus:
            by_room[self._gpu_room(g)] -= 1
            if not g.jobs:
                self.free_total -= 1
                self.nodes_at_least[g.node.free] -= 1
                g.node.free -= 1
            g.jobs.append(j)
            g.exclusive = not j.share
            g.shards_used += j.shards
            g.view = None
            by_room[self._gpu_room(g)] += 1
            nodes[g.node.name] = g.node
        j.blocked = False
        for n in nodes.values():
            n.jobs[j.id] = j
            n.idle_since = None
            self._touch(n)
            if n.power == OFF:
                self._power_node(n, BOOT)
                n.ready_s = now + self.spec.resume_delay_s
                self._push(n.ready_s, _BOOT, n)
            if n.power == BOOT:
                j.blocked = True
        if j.blocked:
            j.end_by_s = max(g.node.ready_s for g in gpus) + j.limit_s
        else:
            self._run_from(j)
        self.running[j.id] = j
        self.job_views[j.id] = Job(
            job_id=j.id, state="RUNNING", name=j.req.name, user=j.t.user,
            gpus=0 if j.share else j.per_node, shards=j.shards, num_nodes=j.num_nodes,
            nodes=tuple(nodes), uses=tuple(GpuUse(g.node.name, g.index, j.shards) for g in gpus),
            submit_s=j.t.submit_s, start_s=now, time_limit_s=j.limit_s,
            restart_count=j.restarts, app=j.cls.name, comment=j.pl.policy if j.pl else "",
            deadline_s=j.t.deadline_s, slack_s=j.req.slack_s, power_cap_w=j.cap_w,
            min_gpus=j.t.min_gpus, max_gpus=j.t.max_gpus, **self._batch_fields(j))
        self._retune(gpus)

    def _cap_effect(self, j: SimJob) -> None:
        """Power and speed of ``j`` under its cap, from its configuration model on the model
        of its GPUs."""
        kind = j.gpus[0].node.kind
        power, j.cap_slow = capped_job(j.cls.name, j.total_gpus, j.cap_w, kind.model,
                                       self.spec.gpus_per_node)
        j.dyn_w = max(0.0, power - kind.idle_w)

    def _set_cap(self, j: SimJob, power_cap_w: float | None) -> None:
        """A ``power_cap`` action: a running job changes power and speed from now."""
        j.cap_ask_w = power_cap_w
        j.cap_w = self._clamped(j, power_cap_w)
        self.job_views[j.id] = replace(self.job_views[j.id], power_cap_w=j.cap_w)
        if j.state == RUNNING:
            self._cap_effect(j)
            self._retune(j.gpus)

    def _raise_limit(self, j: SimJob, limit_s: float) -> None:
        """``scontrol update TimeLimit``: a running job's end by its limit moves out as much
        (its nodes' expected frees with it)."""
        if j.state == RUNNING:
            j.end_by_s += limit_s - j.limit_s
            self._push(j.end_by_s, _TIMEOUT, j, j.end_by_s)
            for n in {g.node for g in j.gpus}:
                self._avail_changed(n)
        j.limit_s = limit_s
        self.job_views[j.id] = replace(self.job_views[j.id], time_limit_s=limit_s)

    def _run_from(self, j: SimJob) -> None:
        """``j`` runs from now (its nodes are up): its time limit counts from here."""
        j.run_start_s = self.now
        self.job_gpus += len(j.gpus)
        for g in j.gpus:
            self.busy_gpus += not g.running
            g.running += 1
        if j.first_start_s is None:
            j.first_start_s = self.now
        j.end_by_s = self.now + j.limit_s
        self._push(j.end_by_s, _TIMEOUT, j, j.end_by_s)

    def _settle(self, j: SimJob) -> None:
        if j.rate:
            j.work_left = max(0.0, j.work_left - j.rate * (self.now - j.last_s))
        j.last_s = self.now

    def _retune(self, gpus: list[GpuState]) -> None:
        """Recompute the rates of every job on ``gpus`` and the power of every GPU they touch."""
        affected: dict[str, SimJob] = {}
        for g in gpus:
            for jb in g.jobs:
                affected[jb.id] = jb
        touched: dict[int, GpuState] = {id(g): g for g in gpus}
        for jb in affected.values():
            self._settle(jb)
            irate = 1.0
            var = 1.0
            for g in jb.gpus:
                touched[id(g)] = g
                if jb.mig is not None:      # its MIG instance: no co-location slowdown
                    irate = min(irate, mig_rate_of(jb))
                elif len(g.jobs) > 1:
                    slow = group_slowdowns([x.cls.name for x in g.jobs],
                                           model=g.node.kind.model)[g.jobs.index(jb)]
                    irate = min(irate, 1.0 / slow)
                if g.var is not None:
                    var = max(var, g.var[jb.cls.variability_class])
            jb.irate = irate
            for g in jb.gpus:
                self._avail_changed(g.node)
            jb.rate = 0.0 if jb.blocked else jb.scale * irate / (jb.cap_slow * var)
            jb.version += 1
            if jb.rate > 0:
                self._push(self.now + jb.work_left / jb.rate, _FINISH, jb, jb.version)
        for g in touched.values():
            self._gpu_power(g)

    def _gpu_power(self, g: GpuState) -> None:
        util = 0.0
        kind = g.node.kind
        if g.node.power == OFF:
            new = 0.0
        elif not g.jobs:
            new = kind.idle_w
        else:
            p = kind.idle_w + sum(jb.dyn_w * jb.irate for jb in g.jobs if not jb.blocked)
            caps = [jb.cap_w for jb in g.jobs if jb.cap_w]
            new = min(p, kind.max_w, min(caps)) if caps else min(p, kind.max_w)
            util = min(100.0, sum(jb.util_pct * jb.irate for jb in g.jobs if not jb.blocked))
        self.gpu_power_total += new - g.power_w
        g.power_w = new
        self.sm_util_total += util - g.util_pct
        g.util_pct = util

    def _spares_left(self, node: NodeState) -> bool:
        """Whether other idle nodes stay powered if ``node`` powers down: Slurm's
        ``SuspendExcNodes=<nodes>:N`` keeps N idle nodes from power saving."""
        keep = self.spec.keep_idle_nodes
        if not keep:
            return True
        return sum(1 for n in self.nodes
                   if n is not node and n.power == ON and not n.jobs) >= keep

    def _power_node(self, n: NodeState, state: str) -> None:
        base, susp = self.spec.node_base_power_w, self.spec.suspended_power_w
        was_on, is_on = n.power != OFF, state != OFF
        n.power = state
        self.order = None
        if was_on != is_on:
            self.node_power_total += (base - susp) if is_on else (susp - base)
            self.nodes_on += 1 if is_on else -1
            if not is_on:
                self.metrics.suspends += 1
            for g in n.gpus:
                self._gpu_power(g)
        self._touch(n)

    def _release(self, j: SimJob) -> list[GpuState]:
        """Take ``j`` off its GPUs; returns GPUs still holding other jobs."""
        left = []
        by_room = self.gpus_by_room
        for g in j.gpus:
            by_room[self._gpu_room(g)] -= 1
            g.jobs.remove(j)
            g.shards_used -= j.shards
            g.view = None
            n = g.node
            self._touch(n)
            n.jobs.pop(j.id, None)
            if not g.jobs:
                g.exclusive = False
                self.free_total += 1
                n.free += 1
                self.nodes_at_least[n.free] += 1
                self._gpu_power(g)
            else:
                left.append(g)
            by_room[self._gpu_room(g)] += 1
            if not n.jobs and n.idle_since is None:
                n.idle_since = self.now
                if self.spec.suspend_time_s is not None:
                    self._push(self.now + self.spec.suspend_time_s, _SUSPEND, n, self.now)
        del self.running[j.id]
        if not j.blocked:
            self.job_gpus -= len(j.gpus)
            for g in j.gpus:
                g.running -= 1
                self.busy_gpus -= not g.running
        j.gpus = []
        return left

    def _finish(self, j: SimJob, timed_out: bool = False) -> None:
        self._settle(j)
        self.metrics.timed_out += timed_out
        j.state, j.end_s, j.work_left = DONE, self.now, 0.0
        self.metrics.job_done(j)
        limit_s = j.end_by_s - j.run_start_s if j.run_start_s is not None else 0.0
        if 0.0 < limit_s < float("inf"):        # its last run against that run's limit
            gpus = j.total_gpus or 1
            used, asked = gpus * min(self.now - j.run_start_s, limit_s), gpus * limit_s
            self.limit_log.append((self.now, used, asked))
            self.limit_sums[0] += used
            self.limit_sums[1] += asked
        del self.job_views[j.id]
        del self.by_id[j.id]
        left = self._release(j)
        if left:
            self._retune(left)
        self.dirty = True

    def _limit_use(self) -> float | None:
        """Cluster.limit_use: the GPU-weighted share of their limits that the jobs ended in the
        last ``LIMIT_USE_WINDOW_S`` used (None: none ended)."""
        log, sums = self.limit_log, self.limit_sums
        since = self.now - LIMIT_USE_WINDOW_S
        while log and log[0][0] < since:
            _, used, asked = log.popleft()
            sums[0] -= used
            sums[1] -= asked
        if not log:
            sums[0] = sums[1] = 0.0     # no drift from the subtractions
            return None
        return sums[0] / sums[1] if sums[1] > 0 else None

    # ---------------------------------------------------------------- reconcile actions
    def _reconcile(self) -> None:
        try:
            actions = self.policy.reconcile(self.context())
        except Exception:
            self.metrics.policy_fallbacks += 1
            return
        for a in actions:
            self._apply(a)

    def _apply(self, a: Action) -> None:
        m = self.metrics
        m.actions[a.kind] = m.actions.get(a.kind, 0) + 1
        j = self.by_id.get(a.job_id)
        if self._soft_action(a, j):
            self._soft_change()
        else:
            self.state_version += 1
        if a.kind == "observe":
            self.history.update(a.predicted)
            self.history_version += 1
            self.history_log[self.history_version] = tuple(a.predicted)
            self.history_log.pop(self.history_version - LOG_VERSIONS, None)
            return
        if j is None or a.kind == "note":
            return
        if a.kind == "cancel":
            self._drop(j)
            j.state = CANCELLED
            del self.by_id[j.id]
            self.job_views.pop(j.id, None)
        elif a.kind == "defer":     # scontrol update StartTime=: earlier or later
            if j.state == PENDING and a.begin_s is not None:
                j.begin_s = max(self.now, a.begin_s)
                self.job_views[j.id] = replace(
                    self.job_views[j.id], begin_s=j.begin_s if j.begin_s > j.t.submit_s else None)
                self._push(j.begin_s, _BEGIN, j, j.begin_s)
                if j.ready and j.begin_s > self.now + _EPS:
                    self._unready(j)
                self._place_pending(j)
        elif a.kind == "power_cap":
            self._set_cap(j, a.power_cap_w)
            if a.time_limit_s is not None and a.time_limit_s > j.limit_s:
                self._raise_limit(j, whole_minutes_s(a.time_limit_s))
        elif a.kind == "batch":     # the job follows the advice at its next step: no restart
            if j.state == RUNNING and a.batch_size is not None:
                self._settle(j)
                self._rebatch(j, a.batch_size)
                self._retune(list(j.gpus))
                if j.id in self.job_views:
                    self.job_views[j.id] = replace(self.job_views[j.id], **self._batch_fields(j))
        elif a.kind == "unpin":     # a pending job's typed GRES and node -> whole GPUs anywhere
            if j.state == PENDING and j.pin_indexes:
                nice = j.nice
                self._drop(j)
                self._apply_placement(j, plain_placement(a.policy, j.req, a.why))
                j.nice = nice
                self._enqueue(j)
        elif a.kind in ("move_exclusive", "resize"):
            gpus = a.gpus or j.per_node
            nodes = j.num_nodes
            started = j.first_start_s is not None and j.state == RUNNING
            self._drop(j)
            j.restarts += 1 if j.first_start_s is not None else 0
            req = j.req
            pl = Placement(policy=a.policy, gpus=min(gpus, self.spec.gpus_per_node),
                           nodes=a.nodes, power_cap_w=j.cap_ask_w, why=(a.why,), nice=a.nice)
            new_nodes = a.num_nodes if a.kind == "resize" and a.num_nodes else None
            if not self._placement_valid(j, pl) or (
                    new_nodes is not None and not 1 <= new_nodes <= self.max_job_nodes):
                pl, new_nodes = plain_placement(a.policy, req, "invalid action: keeps its size"), None
            elif new_nodes is None and a.kind == "resize":
                new_nodes = nodes       # "num_nodes unchanged": the job's count now, not asked
            if not a.nodes and nodes > 1 and a.kind == "move_exclusive":
                pl = plain_placement(a.policy, req, a.why)
            nice = j.nice if a.nice is None else a.nice     # None: its tier is unchanged
            self._apply_placement(j, pl, new_nodes)
            j.nice = nice
            if a.kind == "resize" and (a.batch_size is not None or j.batch is not None):
                self._rebatch(j, a.batch_size)
            if started and a.kind == "resize":
                # checkpoint, requeue and start-up: restart_cost_s of wall time at the new size
                j.work_left += self.spec.restart_cost_s * j.scale
            self._enqueue(j)
        self.dirty = True

    def _soft_action(self, a: Action, j: SimJob | None) -> bool:
        """Whether ``a`` changes nothing a scheduler pass looks at (``_soft_change``): an
        observation, a note, an unknown job, or a defer of a pending job from a --begin still
        in the future to a later one (a hold renewal)."""
        if a.kind == "observe" or a.kind == "note" or j is None:
            return True
        return (a.kind == "defer" and j.state == PENDING and a.begin_s is not None
                and self.now + _EPS < j.begin_s <= a.begin_s)

    # ---------------------------------------------------------------- batch size (ones)
    def _batch_fields(self, j: SimJob) -> dict[str, Any]:
        """The batch fields of a job's view: none for a trace without batch sizes."""
        t = j.t
        if t.batch_size is None:
            return {}
        now = j.batch if j.batch is not None else \
            max(1, round(t.batch_size * (j.total_gpus or t.num_gpus) / t.num_gpus))
        return {"batch_size": now, "min_batch_size": t.min_batch_size,
                "max_batch_size": t.max_batch_size}

    def _rebatch(self, j: SimJob, batch: int | None) -> None:
        """A resize that sets a global batch size (or resizes a job that has one): its speed
        from the batch model (``physics/pollux_batch.py``); the fraction it has done is kept."""
        t = j.t
        if t.batch_size is None or not t.app:
            return
        from ..physics.pollux_batch import batch_bounds, progress_rate
        n = j.total_gpus
        new = batch if batch is not None else j.batch
        bounds = batch_bounds(t.app, n, t.min_batch_size, t.max_batch_size)
        if bounds is None:
            return      # no batch runs on n GPUs: the per-GPU batch's speed (already set)
        new = min(max(new, bounds[0]), bounds[1])
        j.batch = new
        j.scale = progress_rate(t.app, n, new, self.stat_eff, t.batch_size) * t.duration_s

    def _drop(self, j: SimJob) -> None:
        """Stop a job wherever it is (a requeue keeps the work done: checkpoint)."""
        if j.state == RUNNING:
            self._settle(j)
            j.version += 1
            left = self._release(j)
            if left:
                self._retune(left)
        elif j.state == PENDING:
            self._unqueue(j)
            self._pin_pending(j, False)
            self.state_version += 1

    # ---------------------------------------------------------------- main loop
    def run(self) -> dict[str, Any]:
        wall0 = time.perf_counter()
        jobs, n_jobs = self.trace, len(self.trace)
        nxt = 0
        interval = self.spec.reconcile_interval_s
        if n_jobs:
            self._push(self.now + interval, _RECONCILE, None)
            if self.spec.suspend_time_s is not None:
                for n in self.nodes:
                    self._push(self.now + self.spec.suspend_time_s, _SUSPEND, n, n.idle_since)
        heap = self.heap
        events = 0
        last_report = 0
        while True:
            while heap and heap[0][2] == _FINISH and (heap[0][3].state != RUNNING
                                                      or heap[0][4] != heap[0][3].version):
                heapq.heappop(heap)     # a finish superseded by a rate change
            if nxt >= n_jobs and not self.running and not self.pending:
                break
            t_sub = jobs[nxt].submit_s if nxt < n_jobs else float("inf")
            t_evt = heap[0][0] if heap else float("inf")
            t = min(t_sub, t_evt)
            if t == float("inf"):
                break
            self._advance(t)
            while nxt < n_jobs and jobs[nxt].submit_s <= t:
                self._submit(jobs[nxt])
                nxt += 1
                events += 1
                self._schedule()    # slurmctld tries to start a job when it is submitted
            while heap and heap[0][0] <= t:
                _, _, kind, obj, token = heapq.heappop(heap)
                if kind == _FINISH:
                    if obj.state != RUNNING or token != obj.version:
                        continue
                    self._finish(obj)
                elif kind == _BEGIN:
                    # a stale one still wakes the scheduler: its backfill pass may start jobs
                    # a pass before it left (see docs/simulator.md, "Engine, per job")
                    self.dirty = True
                    if obj.state == PENDING and obj.begin_s == token:
                        self.state_version += 1
                    else:
                        self._soft_change()
                elif kind == _TIMEOUT:
                    if obj.state == RUNNING and obj.end_by_s == token:
                        self._settle(obj)   # a job ending exactly at its limit is not killed
                        self._finish(obj, timed_out=obj.work_left > 1e-6 * obj.t.duration_s)
                elif kind == _BACKFILL:
                    self.bf_pending = False
                    if self.dirty:
                        self._schedule()
                    if self.bf_dirty:
                        self._backfill()
                elif kind == _BOOT:
                    if obj.power == BOOT:
                        self._power_node(obj, ON)
                        ready = [jb for jb in obj.jobs.values()
                                 if all(g.node.power == ON for g in jb.gpus)]
                        for jb in ready:
                            jb.blocked = False
                            self._run_from(jb)
                        self._retune([g for jb in ready for g in jb.gpus])
                elif kind == _SUSPEND:
                    if obj.power == ON and not obj.jobs and obj.idle_since == token:
                        if self._spares_left(obj):
                            self._power_node(obj, OFF)
                elif kind == _RECONCILE:
                    self._reconcile()
                    if self.running or nxt < n_jobs or (self.pending and heap):
                        self._push(t + interval, _RECONCILE, None)
                events += 1
            if self.dirty:
                self._schedule()
            if self.progress is not None and events - last_report >= 20000:
                last_report = events
                self.progress(self.metrics.jobs_finished, n_jobs)
        self.metrics.events = events
        self.metrics.unfinished = len(self.pending) + len(self.running)
        return self.metrics.result(self, time.perf_counter() - wall0)
