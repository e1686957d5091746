"""ONES's population of whole-cluster schedules (pure; a seeded ``random.Random`` decides).

A schedule gives each job (a ``Plan``) one of its options (GPU count, batch, predicted goodput)
or none (-1: queued, or a running job stopped). Its fitness is the predicted cluster goodput in
jobs per second: the sum over jobs of 1 / (remaining fraction / goodput + restart cost when a
running job changes its GPU count: a new batch on its GPUs costs none); a job without GPUs adds
nothing. Every generation: crossover (each gene taken from the other parent with
``crossover_p``), mutation (each allocation dropped with ``mutation_p``), consolidation (jobs
placed in Slurm's priority order, best-fit, shrunk or dropped where they do not fit), refill
(queued jobs, shortest predicted remaining time first, at their smallest option; free GPUs then
to the job gaining most goodput per added GPU), selection of the fittest ``population``.
"""

from __future__ import annotations

import heapq
import random


class Plan:
    """One job as the population sees it."""

    __slots__ = ("job_id", "running", "fixed", "options", "cur", "remaining", "restart_s",
                 "order", "uses", "scores", "growth")

    def __init__(self, job_id: str, running: bool, fixed: bool,
                 options: list[tuple[int, int | None, float]], cur: int, remaining: float,
                 restart_s: float, order: tuple, uses: dict[str, int]) -> None:
        self.job_id, self.running, self.fixed, self.options = job_id, running, fixed, options
        self.cur, self.remaining, self.restart_s = cur, remaining, restart_s
        self.order, self.uses = order, uses
        self.scores = [self._score(i) for i in range(len(options))]
        # from option g to g + 1: minus the fitness gained per added GPU (None: no gain)
        self.growth: list[float | None] = [
            -(self.scores[g + 1] - self.scores[g]) / max(options[g + 1][0] - options[g][0], 1)
            if not fixed and self.scores[g + 1] - self.scores[g] > 0 else None
            for g in range(len(options) - 1)] + [None]

    def _score(self, i: int) -> float:
        r = self.options[i][2]
        if r <= 0:
            return 0.0
        # a running job pays a restart for another GPU count; another batch on its GPUs is
        # advice it follows without one
        moved = self.running and i != self.cur and \
            self.options[i][0] != self.options[self.cur][0]
        t = self.remaining / r + (self.restart_s if moved else 0.0)
        return 1.0 / max(t, 1e-9)

    def score(self, i: int) -> float:
        """This job's share of the fitness with option ``i`` (-1: none)."""
        return self.scores[i] if i >= 0 else 0.0


class Room:
    """Free GPUs per node with buckets by free count (ordered: deterministic best-fit)."""

    __slots__ = ("free", "buckets", "gpn", "total")

    def __init__(self, free: dict[str, int], gpn: int) -> None:
        self.free, self.gpn = free, gpn
        self.total = sum(free.values())
        self.buckets: list[dict[str, None]] = [{} for _ in range(gpn + 1)]
        for name, c in free.items():
            self.buckets[min(c, gpn)][name] = None

    def copy(self) -> "Room":
        r = Room.__new__(Room)
        r.free, r.gpn, r.total = dict(self.free), self.gpn, self.total
        r.buckets = [dict(b) for b in self.buckets]
        return r

    def _set(self, name: str, c: int) -> None:
        old = self.free.get(name)
        if old is not None:
            del self.buckets[min(old, self.gpn)][name]
            self.total -= old
        self.free[name] = c
        self.total += c
        self.buckets[min(c, self.gpn)][name] = None

    def release(self, uses: dict[str, int]) -> None:
        for name, c in uses.items():
            self._set(name, self.free.get(name, 0) + c)

    def take(self, uses: dict[str, int]) -> bool:
        if any(self.free.get(name, 0) < c for name, c in uses.items()):
            return False
        for name, c in uses.items():
            self._set(name, self.free[name] - c)
        return True

    def fits(self, uses: dict[str, int], n: int) -> bool:
        """Whether ``place(n)`` would find GPUs once ``uses`` were released (changes nothing)."""
        gpn, free, buckets = self.gpn, self.free, self.buckets
        if n <= gpn:
            for c in range(n, gpn + 1):
                if buckets[c]:
                    return True
            return any(free.get(name, 0) + c >= n for name, c in uses.items())
        whole = len(buckets[gpn]) + sum(1 for name, c in uses.items()
                                        if free.get(name, 0) < gpn <= free.get(name, 0) + c)
        return whole >= -(-n // gpn)

    def place(self, n: int) -> dict[str, int] | None:
        """Best-fit ``n`` GPUs: one node up to a node's GPUs, else whole nodes."""
        gpn = self.gpn
        if n <= gpn:
            for c in range(n, gpn + 1):
                if self.buckets[c]:
                    name = next(iter(self.buckets[c]))
                    self._set(name, c - n)
                    return {name: n}
            return None
        k = -(-n // gpn)
        if len(self.buckets[gpn]) < k:
            return None
        names = list(self.buckets[gpn])[:k]
        for name in names:
            self._set(name, 0)
        return {name: gpn for name in names}


def _where(plans: list[Plan], genes: list[int], room0: Room) -> tuple[list[int], Room, list]:
    """Consolidate: stopped or changed running jobs give their GPUs back, then changed and
    queued jobs are placed in priority order, each at its gene or the largest smaller option
    that fits, else dropped. Returns the genes, the room left and each job's GPUs."""
    room = room0.copy()
    genes = list(genes)
    where: list = [None] * len(plans)
    for i, p in enumerate(plans):
        if p.running:
            if genes[i] == p.cur:
                where[i] = p.uses
            else:
                room.release(p.uses)
    for i in sorted((i for i, p in enumerate(plans) if genes[i] >= 0 and where[i] is None),
                    key=lambda i: plans[i].order):
        p = plans[i]
        g = genes[i]
        while g >= 0:
            got = room.place(p.options[g][0])
            if got is not None:
                where[i] = got
                break
            g -= 1
        genes[i] = g
    return genes, room, where


def _refill(plans: list[Plan], genes: list[int], room: Room, where: list) -> None:
    """Queued and stopped jobs into free GPUs (shortest remaining first), then growth."""
    idle = [i for i, p in enumerate(plans) if genes[i] < 0 and not p.fixed and p.options]
    idle.sort(key=lambda i: (-plans[i].score(0), plans[i].order))
    for i in idle:
        got = room.place(plans[i].options[0][0])
        if got is not None:
            genes[i], where[i] = 0, got
    heap: list[tuple[float, int, int]] = []     # (-gain per added GPU, job, its gene then)

    for i, p in enumerate(plans):
        g = genes[i]
        if g >= 0 and (x := p.growth[g]) is not None:
            heap.append((x, i, g))
    heapq.heapify(heap)
    while heap and room.total > 0:
        _, i, g = heapq.heappop(heap)
        if genes[i] != g:
            continue
        p = plans[i]
        n = p.options[g + 1][0]
        if not room.fits(where[i], n):
            continue
        room.release(where[i])
        genes[i], where[i] = g + 1, room.place(n)
        if (x := p.growth[g + 1]) is not None:
            heapq.heappush(heap, (x, i, g + 1))


def fitness(plans: list[Plan], genes: list[int]) -> float:
    return sum(p.score(g) for p, g in zip(plans, genes))


def repair(plans: list[Plan], genes: list[int], room0: Room) -> tuple[float, tuple[int, ...]]:
    genes, room, where = _where(plans, genes, room0)
    _refill(plans, genes, room, where)
    return fitness(plans, genes), tuple(genes)


def evolve(plans: list[Plan], room0: Room, size: int, generations: int, p_cross: float,
           p_mut: float, rng: random.Random) -> tuple[tuple[float, tuple[int, ...]],
                                                      tuple[float, tuple[int, ...]]]:
    """(the running schedule refilled, the fittest schedule found), each (fitness, genes)."""
    free = [i for i, p in enumerate(plans) if not p.fixed]

    def mutate(genes: list[int]) -> list[int]:
        for i in free:
            if genes[i] >= 0 and rng.random() < p_mut:
                genes[i] = -1
        return genes

    memo: dict[tuple[int, ...], tuple[float, tuple[int, ...]]] = {}

    def fix(genes: list[int]) -> tuple[float, tuple[int, ...]]:
        """``repair``, once per distinct schedule (a repair draws nothing)."""
        key = tuple(genes)
        out = memo.get(key)
        if out is None:
            out = memo[key] = repair(plans, genes, room0)
        return out

    seed = fix([p.cur for p in plans])
    if all(p.running for p in plans):
        return seed, seed       # no queued job: the running schedule refilled
    ranked = [seed]
    for _ in range(size - 1):
        ranked.append(fix(mutate(list(seed[1]))))
    ranked = sorted({c[1]: c for c in ranked}.values(), key=lambda c: -c[0])[:size]
    for _ in range(generations):
        best = ranked[0][0]
        children = []
        for _ in range(size):
            a, b = (rng.sample(ranked, 2) if len(ranked) > 1 else (ranked[0], ranked[0]))
            genes = list(a[1])
            for i in free:
                if rng.random() < p_cross:
                    genes[i] = b[1][i]
            children.append(fix(mutate(genes)))
        ranked = sorted({c[1]: c for c in ranked + children}.values(), key=lambda c: -c[0])[:size]
        if ranked[0][0] <= best:
            break               # converged: a generation found nothing fitter
    return seed, ranked[0]
