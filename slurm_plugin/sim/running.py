"""The simulator's running jobs: start, progress, power, caps, batch size, release, finish.

Jobs sharing a GPU time-sliced progress at their co-location slowdown, and all of them slower
when their GPU's one power limit binds (the board's, or the cap the node sets for them); jobs
in MIG instances at their instance's rate (``mig``); rates are recomputed on every start and
finish. Power is piecewise constant between events (the engine integrates it exactly). A job
computes with the model of the GPUs it got: alone on them, its power and speed under its cap
from its configuration model. A job
still running at its time limit is killed (``jobs_timed_out``); time limits come from the
trace (``time_limit_s``) or the seeded rule of ``time_limits``, in whole minutes. Nodes idle
for ``suspend_time_s`` power down; a job placed on one waits for its boot.

``RunningJobs`` is one of the parts ``engine.Simulator`` is made of (its methods run on the
simulator's state, made in ``Simulator.__init__``). The state it keeps: ``running``, each
GPU's jobs, power and utilisation, the capacity indexes (``free_total``, ``nodes_at_least``,
``gpus_by_room``), the totals the engine integrates (``gpu_power_total``,
``node_power_total``, ``busy_gpus``, ``job_gpus``, ``sm_util_total``, ``nodes_on``), the
nodes' power states, each job's progress fields (``SimJob``), and the limit use of the jobs
that ended lately (``limit_log``, ``limit_sums``).
"""

from __future__ import annotations

from typing import Any

from ..model import LIMIT_USE_WINDOW_S, GpuUse, Job
from ..physics import clamp_cap_w, group_slowdowns, shared_gpu_power_w, shared_gpu_throttle
from ..physics.power import gpu_cap_w
from ..physics.job_cap import capped_job
from ..record import replace
from .events import BOOTED, FINISH, SUSPEND, TIMEOUT
from .mig import mig_rate_of
from .state import BOOT, DONE, OFF, ON, PENDING, RUNNING, GpuKind, GpuState, NodeState, SimJob


class RunningJobs:
    """Running jobs, power and caps: a part of ``engine.Simulator``."""

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
                self._push(n.ready_s, BOOTED, n)
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
        self._push(j.end_by_s, TIMEOUT, j, j.end_by_s)

    def _settle(self, j: SimJob) -> None:
        if j.rate:
            j.work_left = max(0.0, j.work_left - j.rate * (self.now - j.last_s))
        j.last_s = self.now

    def _retune(self, gpus: list[GpuState]) -> None:
        """Recompute the rates of every job on ``gpus`` and the power of every GPU they touch.

        A job's speed is the least over its GPUs: on a GPU of its own, or in a MIG instance,
        its cap's slowdown (its configuration model); on a GPU shared time-sliced, its
        co-location slowdown times the GPU's throttle (``_shared_power``): one power limit
        holds for the whole GPU, so when it binds every job there slows, whichever asked for
        it. A throttle that changes re-rates the jobs on that GPU too."""
        affected: dict[str, SimJob] = {}
        for g in gpus:
            for jb in g.jobs:
                affected[jb.id] = jb
        touched: dict[int, GpuState] = {id(g): g for g in gpus}
        for jb in affected.values():
            self._settle(jb)
            irate = 1.0
            for g in jb.gpus:
                touched[id(g)] = g
                if jb.mig is not None:      # its MIG instance: no co-location slowdown
                    irate = min(irate, mig_rate_of(jb))
                elif len(g.jobs) > 1:
                    irate = min(irate, 1.0 / self._group_slow(g, jb))
            jb.irate = irate
        rerate = affected           # and the jobs of every GPU whose throttle changes
        for g in touched.values():
            self._gpu_power(g)
            if g.throttle_changed:
                g.throttle_changed = False
                for jb in g.jobs:
                    if jb.id not in rerate:
                        self._settle(jb)
                        rerate[jb.id] = jb
        for jb in rerate.values():
            if jb.mig is not None:
                speed = jb.irate / jb.cap_slow
            else:
                speed = min(1.0 / (self._group_slow(g, jb) * g.throttle) if len(g.jobs) > 1
                            else 1.0 / jb.cap_slow for g in jb.gpus)
            var = 1.0
            for g in jb.gpus:
                if g.var is not None:
                    var = max(var, g.var[jb.cls.variability_class])
                self._avail_changed(g.node)
            jb.rate = 0.0 if jb.blocked else jb.scale * speed / var
            jb.version += 1
            if jb.rate > 0:
                self._push(self.now + jb.work_left / jb.rate, FINISH, jb, jb.version)

    @staticmethod
    def _group_slow(g: GpuState, jb: SimJob) -> float:
        """``jb``'s co-location slowdown among the jobs of ``g`` (time-sliced)."""
        return group_slowdowns([x.cls.name for x in g.jobs],
                               model=g.node.kind.model)[g.jobs.index(jb)]

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
                    self._push(self.now + self.spec.suspend_time_s, SUSPEND, n, self.now)
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

    # ---------------------------------------------------------------- power and caps
    def _gpu_power(self, g: GpuState) -> None:
        util = 0.0
        kind = g.node.kind
        throttle = 1.0
        if g.node.power == OFF:
            new = 0.0
        elif not g.jobs:
            new = kind.idle_w
        elif len(g.jobs) > 1 and g.jobs[0].mig is None:
            new, throttle = self._shared_power(g)
            util = min(100.0, sum(jb.util_pct * jb.irate for jb in g.jobs if not jb.blocked))
        else:
            p = kind.idle_w + sum(jb.dyn_w * jb.irate for jb in g.jobs if not jb.blocked)
            caps = [jb.cap_w for jb in g.jobs if jb.cap_w]
            new = min(p, kind.max_w, min(caps)) if caps else min(p, kind.max_w)
            util = min(100.0, sum(jb.util_pct * jb.irate for jb in g.jobs if not jb.blocked))
        if throttle != g.throttle:
            g.throttle, g.throttle_changed = throttle, True
        self.gpu_power_total += new - g.power_w
        g.power_w = new
        self.sm_util_total += util - g.util_pct
        g.util_pct = util

    @staticmethod
    def _shared_power(g: GpuState) -> tuple[float, float]:
        """(power, throttle) of a GPU shared time-sliced: its running jobs draw their uncapped
        dynamic power at their co-location rates, under the GPU's one limit (the board's, or
        the cap the node sets from their caps, ``gpu_cap_w``: only when every one asks for
        one, the highest): ``physics.shared_gpu_power_w`` and ``shared_gpu_throttle``."""
        model = g.node.kind.model
        running = [jb for jb in g.jobs if not jb.blocked]
        dyn_w = [jb.dyn0_w for jb in running]
        rates = [jb.irate for jb in running]
        cap_w = gpu_cap_w([jb.cap_w for jb in running], model) if running else None
        return (shared_gpu_power_w(dyn_w, rates, cap_w, model),
                shared_gpu_throttle(dyn_w, rates, cap_w, model))

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

    def _cap_effect(self, j: SimJob) -> None:
        """Power and speed of ``j`` under its cap, from its configuration model on the model
        of its GPUs."""
        kind = j.gpus[0].node.kind
        power, j.cap_slow = capped_job(j.cls.name, j.total_gpus, j.cap_w, kind.model,
                                       self.spec.gpus_per_node)
        j.dyn_w = max(0.0, power - kind.idle_w)
        power, _ = capped_job(j.cls.name, j.total_gpus, None, kind.model, self.spec.gpus_per_node)
        j.dyn0_w = max(0.0, power - kind.idle_w)

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
            self._push(j.end_by_s, TIMEOUT, j, j.end_by_s)
            for n in {g.node for g in j.gpus}:
                self._avail_changed(n)
        j.limit_s = limit_s
        self.job_views[j.id] = replace(self.job_views[j.id], time_limit_s=limit_s)

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
