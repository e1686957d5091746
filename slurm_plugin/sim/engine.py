"""The simulator's event loop: Slurm's own scheduling plus the policy's advice, driven by the
physics.

``Simulator`` runs one policy over one trace: submissions, job ends, ``--begin`` times, node
boots and suspends, backfill ticks and reconcile passes, in time order. Slurm is emulated as
configured (``ClusterSpec``; docs/simulator.md). Its parts, the first three classes it is made
of (their methods run on the one simulator's state):

- ``slurm_queue.SlurmQueue``: submission with the policy's advice, the queue in priority
  order, a job's placement, first fit;
- ``scheduler.Scheduler``: the main scheduler and EASY backfill with its reservation;
- ``running.RunningJobs``: start, progress, power, caps, batch size, release, finish;
- this file: the state (``__init__``; which part keeps what is said in each part's module
  doc), the event queue and the integral of power, what a policy sees (``context``, the
  history its ``observe`` actions feed), the reconcile pass and ``run``.

Every ``reconcile_interval_s`` the policy's ``reconcile`` runs and its Actions are applied:
each through the interpreter the live reconciler runs (``actuate.interpret``: the same steps,
each only where the job still needs it), on the simulated cluster (``sim_port.SimPort``).
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from types import MappingProxyType
from typing import Any, Callable, Mapping

from ..actuate import interpret
from ..model import Action, Cluster, Job, Readings
from ..physics import idle_power_w, max_power_w
from ..physics.classes import ClassMix, class_mix as named_mix
from ..physics.constants import catalogue_entry, gpu_constants
from ..formats.carbon_forecast import ForecastingCarbon
from ..formats.carbon_series import CarbonProvider
from ..policy.base import Context, Policy
from .carbon import WeekAlignedCarbon
from .cluster import ClusterSpec
from .events import BACKFILL, BEGIN, BOOTED, EPS, FINISH, RECONCILE, SUSPEND, TIMEOUT
from .metrics import Metrics
from .running import RunningJobs
from .scheduler import Scheduler
from .sim_port import SimPort
from .slurm_queue import SlurmQueue
from .state import BOOT, OFF, ON, PENDING, RUNNING, GpuKind, GpuState, NodeState, SimJob
from .trace import TraceJob
from .views import ForecastView, GpuReadings, PendingView, ProgressView

LOG_VERSIONS = 4096     # recent history and node versions whose changes a policy can ask for
_EPS = EPS              # the time tolerance by its name here before the split (tests read it)


class Simulator(SlurmQueue, Scheduler, RunningJobs):
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

    def _reconcile(self) -> None:
        try:
            actions = self.policy.reconcile(self.context())
        except Exception:
            self.metrics.policy_fallbacks += 1
            return
        for a in actions:
            self._apply(a)

    def _apply(self, a: Action) -> None:
        """One reconcile action: an observation feeds the history; any other on a job the
        engine knows runs the live reconciler's steps on the simulated cluster."""
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
        interpret(SimPort(self, a), a)
        self.dirty = True

    def _soft_action(self, a: Action, j: SimJob | None) -> bool:
        """Whether ``a`` changes nothing a scheduler pass looks at (``_soft_change``): an
        observation, a note, an unknown job, or a defer of a pending job from a --begin still
        in the future to a later one (a hold renewal)."""
        if a.kind == "observe" or a.kind == "note" or j is None:
            return True
        return (a.kind == "defer" and j.state == PENDING and a.begin_s is not None
                and self.now + EPS < j.begin_s <= a.begin_s)

    # ---------------------------------------------------------------- main loop
    def run(self) -> dict[str, Any]:
        wall0 = time.perf_counter()
        jobs, n_jobs = self.trace, len(self.trace)
        nxt = 0
        interval = self.spec.reconcile_interval_s
        if n_jobs:
            self._push(self.now + interval, RECONCILE, None)
            if self.spec.suspend_time_s is not None:
                for n in self.nodes:
                    self._push(self.now + self.spec.suspend_time_s, SUSPEND, n, n.idle_since)
        heap = self.heap
        events = 0
        last_report = 0
        while True:
            while heap and heap[0][2] == FINISH and (heap[0][3].state != RUNNING
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
                if kind == FINISH:
                    if obj.state != RUNNING or token != obj.version:
                        continue
                    self._finish(obj)
                elif kind == BEGIN:
                    # a stale one still wakes the scheduler: its backfill pass may start jobs
                    # a pass before it left (see docs/simulator.md, "Engine, per job")
                    self.dirty = True
                    if obj.state == PENDING and obj.begin_s == token:
                        self.state_version += 1
                    else:
                        self._soft_change()
                elif kind == TIMEOUT:
                    if obj.state == RUNNING and obj.end_by_s == token:
                        self._settle(obj)   # a job ending exactly at its limit is not killed
                        self._finish(obj, timed_out=obj.work_left > 1e-6 * obj.t.duration_s)
                elif kind == BACKFILL:
                    self.bf_pending = False
                    if self.dirty:
                        self._schedule()
                    if self.bf_dirty:
                        self._backfill()
                elif kind == BOOTED:
                    if obj.power == BOOT:
                        self._power_node(obj, ON)
                        ready = [jb for jb in obj.jobs.values()
                                 if all(g.node.power == ON for g in jb.gpus)]
                        for jb in ready:
                            jb.blocked = False
                            self._run_from(jb)
                        self._retune([g for jb in ready for g in jb.gpus])
                elif kind == SUSPEND:
                    if obj.power == ON and not obj.jobs and obj.idle_since == token:
                        if self._spares_left(obj):
                            self._power_node(obj, OFF)
                elif kind == RECONCILE:
                    self._reconcile()
                    if self.running or nxt < n_jobs or (self.pending and heap):
                        self._push(t + interval, RECONCILE, None)
                events += 1
            if self.dirty:
                self._schedule()
            if self.progress is not None and events - last_report >= 20000:
                last_report = events
                self.progress(self.metrics.jobs_finished, n_jobs)
        self.metrics.events = events
        self.metrics.unfinished = len(self.pending) + len(self.running)
        return self.metrics.result(self, time.perf_counter() - wall0)
