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
No generation runs when a bound of every schedule's fitness (``priced``) shows none could beat
the seed by the share asked (``beat``); the only state kept between calls is the price that
bound tries first, which decides nothing.
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
        # a running job pays a restart for another GPU count; another batch on its GPUs is
        # advice it follows without one
        n_cur = options[cur][0] if running else -1
        scores = self.scores = []
        for o in options:
            r = o[2]
            if r <= 0:
                scores.append(0.0)
                continue
            t = remaining / r
            if o[0] != n_cur and running:
                t += restart_s
            scores.append(1.0 / (t if t > 1e-9 else 1e-9))
        # from option g to g + 1: minus the fitness gained per added GPU (None: no gain)
        growth: list[float | None] = [None] * (len(options) or 1)
        if not fixed:
            for g in range(len(options) - 1):
                d = scores[g + 1] - scores[g]
                if d > 0:
                    k = options[g + 1][0] - options[g][0]
                    growth[g] = -d / (k if k > 1 else 1)
        self.growth = growth

    def score(self, i: int) -> float:
        """This job's share of the fitness with option ``i`` (-1: none)."""
        return self.scores[i] if i >= 0 else 0.0


_PRICE = [0.0]      # the price of a GPU the last bound settled on: the next bound's first try


def priced(plans: list["Plan"], gpus: int, price: float) -> float:
    """An upper bound of any schedule's fitness with ``gpus`` GPUs in all, for any ``price``
    of a GPU: the GPUs at that price plus each job's best option less its GPUs' price (the
    Lagrangian dual of the GPU limit)."""
    total = price * gpus
    for p in plans:
        best = 0.0
        for o, sc in zip(p.options, p.scores):
            v = sc - price * o[0]
            if v > best:
                best = v
        total += best
    return total


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
        free, buckets, gpn = self.free, self.buckets, self.gpn
        old = free.get(name)
        if old is not None:
            del buckets[old if old < gpn else gpn][name]
            self.total -= old
        free[name] = c
        self.total += c
        buckets[c if c < gpn else gpn][name] = None

    def release(self, uses: dict[str, int]) -> None:
        free, buckets, gpn = self.free, self.buckets, self.gpn
        total = self.total
        for name, c in uses.items():        # _set(name, free + c), inlined
            old = free.get(name)
            if old is not None:
                del buckets[old if old < gpn else gpn][name]
                total -= old
                c += old
            free[name] = c
            total += c
            buckets[c if c < gpn else gpn][name] = None
        self.total = total

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
            for name, c in uses.items():
                if free.get(name, 0) + c >= n:
                    return True
            return False
        whole = len(buckets[gpn])
        for name, c in uses.items():
            f = free.get(name, 0)
            if f < gpn <= f + c:
                whole += 1
        return whole >= -(-n // gpn)

    def taken(self, n: int) -> int:
        """The GPUs ``place(n)`` takes: ``n`` on one node, else whole nodes."""
        return n if n <= self.gpn else -(-n // self.gpn) * self.gpn

    def free_fits(self, n: int) -> bool:
        """Whether ``place(n)`` would find GPUs (changes nothing)."""
        gpn, buckets = self.gpn, self.buckets
        if n <= gpn:
            for c in range(n, gpn + 1):
                if buckets[c]:
                    return True
            return False
        return len(buckets[gpn]) >= -(-n // gpn)

    def pass_over(self, n: int) -> None:
        """What ``release(place(n))`` does, ``n`` GPUs known to fit: the nodes ``place`` would
        take go last among the nodes with as many GPUs free (their counts are unchanged)."""
        gpn, buckets = self.gpn, self.buckets
        if n <= gpn:
            for c in range(n, gpn + 1):
                b = buckets[c]
                if b:
                    name = next(iter(b))
                    del b[name]
                    b[name] = None
                    return
            return
        b = buckets[gpn]
        for name in list(b)[:-(-n // gpn)]:
            del b[name]
            b[name] = None

    def place(self, n: int) -> dict[str, int] | None:
        """Best-fit ``n`` GPUs: one node up to a node's GPUs, else whole nodes."""
        gpn, buckets = self.gpn, self.buckets
        if n <= gpn:
            for c in range(n, gpn + 1):
                b = buckets[c]
                if b:
                    name = next(iter(b))
                    # _set(name, c - n), inlined
                    old = self.free[name]
                    del b[name]
                    left = c - n
                    self.free[name] = left
                    self.total += left - old
                    buckets[left if left < gpn else gpn][name] = None
                    return {name: n}
            return None
        k = -(-n // gpn)
        if len(buckets[gpn]) < k:
            return None
        names = list(buckets[gpn])[:k]
        for name in names:
            self._set(name, 0)
        return {name: gpn for name in names}


def orders(plans: list[Plan]) -> tuple[list[int], list[int], list[int], list[list[float]],
                                       list[list[float | None]]]:
    """What every repair of a pass reads: the plans' indexes in priority order, those the
    refill may place in its order (shortest predicted remaining time first), the running
    jobs' indexes, each plan's scores with 0.0 last (a gene of -1 reads it) and each plan's
    growth list."""
    by_order = sorted(range(len(plans)), key=lambda i: plans[i].order)
    by_fill = sorted((i for i, p in enumerate(plans) if not p.fixed and p.options),
                     key=lambda i: (-plans[i].score(0), plans[i].order))
    running = [i for i, p in enumerate(plans) if p.running]
    return (by_order, by_fill, running, [p.scores + [0.0] for p in plans],
            [p.growth for p in plans])


def _where(plans: list[Plan], genes: list[int], room0: Room, by_order: list[int],
           running: list[int]) -> tuple[list[int], Room, list]:
    """Consolidate: stopped or changed running jobs give their GPUs back, then changed and
    queued jobs are placed in priority order, each at its gene or the largest smaller option
    that fits, else dropped. Returns the genes, the room left and each job's GPUs."""
    room = room0.copy()
    genes = list(genes)
    where: list = [None] * len(plans)
    for i in running:
        p = plans[i]
        if genes[i] == p.cur:
            where[i] = p.uses
        else:
            room.release(p.uses)
    for i in by_order:
        if genes[i] < 0 or where[i] is not None:
            continue
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


def _refill(plans: list[Plan], genes: list[int], room: Room, where: list,
            by_fill: list[int], growths: list[list[float | None]]) -> None:
    """Queued and stopped jobs into free GPUs (shortest remaining first), then growth."""
    fail = room.total + 1   # the fewest GPUs a placement found no room for (more find none)
    for i in by_fill:
        if genes[i] >= 0:
            continue
        n = plans[i].options[0][0]
        if n >= fail:
            if fail <= 1:
                return      # nothing left to place or grow into
            continue
        got = room.place(n)
        if got is None:
            fail = n
        else:
            genes[i], where[i] = 0, got
            if room.total < fail:
                fail = room.total + 1
    if room.total <= 0:
        return
    # (-gain per added GPU, job, its gene then); a gene of -1 reads a growth list's last
    # entry, which is None
    heap = [(x, i, g) for i, g in enumerate(genes) if (x := growths[i][g]) is not None]
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush
    fits, release, place = room.fits, room.release, room.place
    free_fits, pass_over = room.free_fits, room.pass_over
    while heap and room.total > 0:
        _, i, g = pop(heap)
        p = plans[i]
        options, growth = p.options, p.growth
        n = options[g + 1][0]
        if not fits(where[i], n):
            continue
        release(where[i])
        g += 1
        # the steps this job would take next, one after the other (its next entry would be
        # the heap's first), are walked through here: each placed and released again
        while True:
            x = growth[g]
            if x is None:
                break
            if room.total <= room.taken(n) or (heap and (x, i, g) > heap[0]):
                push(heap, (x, i, g))
                break
            n2 = options[g + 1][0]
            if not free_fits(n2):
                break
            pass_over(n)
            g, n = g + 1, n2
        genes[i], where[i] = g, place(n)


def repair(plans: list[Plan], genes: list[int], room0: Room,
           order: tuple | None = None) -> tuple[float, tuple[int, ...]]:
    """The schedule ``genes`` made feasible (consolidated, refilled) and its fitness;
    ``order``: ``orders(plans)``, made once per pass."""
    by_order, by_fill, running, tables, growths = order if order is not None else orders(plans)
    genes, room, where = _where(plans, genes, room0, by_order, running)
    _refill(plans, genes, room, where, by_fill, growths)
    return sum([t[g] for t, g in zip(tables, genes)]), tuple(genes)


def evolve(plans: list[Plan], room0: Room, size: int, generations: int, p_cross: float,
           p_mut: float, rng: random.Random,
           beat: float | None = None) -> tuple[tuple[float, tuple[int, ...]],
                                               tuple[float, tuple[int, ...]]]:
    """(the running schedule refilled, the fittest schedule found), each (fitness, genes).
    With ``beat``, a schedule found matters only when its fitness is above the seed's times
    ``beat``: when ``priced`` shows none can be, the seed is both (nothing is drawn). The
    price it tries is the last pass's, then 0.7 and 1.4 times it; the lowest bound's price
    is the next pass's first try (any price gives a bound: the price decides nothing)."""
    free = [i for i, p in enumerate(plans) if not p.fixed]

    def mutate(genes: list[int]) -> list[int]:
        for i in free:
            if genes[i] >= 0 and rng.random() < p_mut:
                genes[i] = -1
        return genes

    memo: dict[tuple[int, ...], tuple[float, tuple[int, ...]]] = {}
    order = orders(plans)

    def fix(genes: list[int]) -> tuple[float, tuple[int, ...]]:
        """``repair``, once per distinct schedule (a repair draws nothing)."""
        key = tuple(genes)
        out = memo.get(key)
        if out is None:
            out = memo[key] = repair(plans, genes, room0, order)
        return out

    seed = fix([p.cur for p in plans])
    if all(p.running for p in plans):
        return seed, seed       # no queued job: the running schedule refilled
    if beat is not None:
        gpus = room0.total + sum(sum(p.uses.values()) for p in plans if p.running)
        enough = seed[0] * beat / (1.0 + 1e-9)
        price = _PRICE[0] or seed[0] / max(gpus, 1)
        top = priced(plans, gpus, price)
        if top > enough:        # a step towards the least bound, for this pass and the next
            for q in (price * 0.7, price * 1.4):
                b = priced(plans, gpus, q)
                if b < top:
                    top, price = b, q
        _PRICE[0] = price if 1e-300 < price < 1e300 else 0.0    # 0: from the seed next time
        if top <= enough:
            return seed, seed   # no schedule could beat the seed by ``beat``
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
