"""Slurm's scheduling passes as the simulator emulates them: the main scheduler, and EASY
backfill with its reservation.

The main scheduler runs when a job is submitted, ends or is requeued (and when a ``--begin``
time passes), and starts jobs in order until the first that cannot start, which blocks every
later one. The backfill pass runs every ``bf_interval_s`` (on ticks at whole multiples from
the first submission, skipped when nothing changed since the last pass, which would decide the
same): EASY backfill, the first blocked job gets a reservation and later jobs start now only
if their *time limit* ends before it or they leave its GPUs alone; running jobs are expected
to end at start + time limit, as Slurm expects; at most ``backfill_depth`` jobs are looked at
per pass (docs/simulator.md).

``Scheduler`` is one of the parts ``engine.Simulator`` is made of (its methods run on the
simulator's state, made in ``Simulator.__init__``). The state it keeps: ``dirty`` (a main
pass is due), the backfill pass's ``bf_dirty``, ``bf_pending`` and ``bf_resume``, and when
each node's GPUs free (``NodeState.avail``, ``avail_cols``, ``avail_stale``).
"""

from __future__ import annotations

import bisect
import heapq

from .events import BACKFILL, EPS
from .state import BOOT, ON, GpuState, NodeState, SimJob


class Scheduler:
    """The main scheduler and EASY backfill: a part of ``engine.Simulator``."""

    # ---------------------------------------------------------------- scheduling passes
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
            self._push(tick, BACKFILL, None)
            self.bf_pending = True

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

    # ---------------------------------------------------------------- EASY reservation
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
        if self.now + j.limit_s <= shadow + EPS:
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
