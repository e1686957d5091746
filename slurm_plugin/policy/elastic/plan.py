"""The ``elastic`` policy's arithmetic on free GPUs: where a count fits, when enough GPUs free
by themselves, which running jobs to shrink to admit a queued one, and which to grow. Pure
functions of a free-GPU map (``node -> free GPUs``, first-fit in name order as Slurm's) and
the running jobs' ``JobModel``s; ``decide`` turns their answers into actions."""

from __future__ import annotations

from ..queue import id_order
from .predict import JobModel, prior_at, shape, sizes


def fits(free: dict[str, int], per_node: int, nodes: int) -> list[str] | None:
    """First-fit nodes (name order, as Slurm's) for ``nodes`` x ``per_node`` GPUs, or None."""
    out = []
    for name, f in free.items():
        if f >= per_node:
            out.append(name)
            if len(out) == nodes:
                return out
    return None


def take(free: dict[str, int], names: list[str], per_node: int) -> None:
    for name in names:
        free[name] -= per_node


def wait_s(ends_on, free: dict[str, int], per: int, k: int,
           now_s: float) -> tuple[float, list[str]] | None:
    """(seconds until ``k`` nodes have ``per`` GPUs free as running jobs end, those nodes), as
    Slurm's reservation sees it; None when they never do. ``ends_on(node)``: (expected end,
    GPUs there) of its running jobs with a known end, soonest first; ``free``: GPUs free now."""
    times = []
    append = times.append
    for name, f in free.items():
        if f >= per:
            append((0.0, name))
            continue
        for end, c in ends_on(name):
            f += c
            if f >= per:
                append((end - now_s if end > now_s else 0.0, name))
                break
    if len(times) < k:
        return None
    times.sort()
    chosen = times[:k]
    return chosen[-1][0], [name for _, name in chosen]


def release(free: dict[str, int], m: JobModel, new: int, gpn: int) -> None:
    """``free`` after job ``m`` shrinks to ``new`` GPUs, kept on its first nodes."""
    for node, c in freed(m, new, gpn).items():
        free[node] = free.get(node, 0) + c


def freed(m: JobModel, new: int, gpn: int) -> dict[str, int]:
    """GPUs job ``m`` frees per node when it shrinks to ``new``, kept on its first nodes
    (remembered on the model: its GPUs do not change while it is kept)."""
    key = (new, gpn)
    got = m.memo.get(key)
    if got is not None:
        return got
    m.memo[key] = out = _freed(m, new, gpn)
    return out


def _freed(m: JobModel, new: int, gpn: int) -> dict[str, int]:
    p, k = shape(new, gpn)
    kept = 0
    out = {}
    for node, c in sorted(m.uses.items()):
        keep = min(c, p) if kept < k else 0
        kept += keep > 0
        if c > keep:
            out[node] = c - keep
    return out


def shrink_loss_s(m: JobModel, new: int, horizon_s: float) -> float:
    """What job ``m`` loses by running on ``new`` GPUs for ``horizon_s`` (the admitted job's
    run: its GPUs come back then) instead of its count: the slower progress meanwhile, its
    restart, and a second restart to grow back when it would still be running."""
    r = max(m.tput(new) / max(m.tput(m.n), 1e-12), 1e-6)     # speed kept
    restart_s = m.restart_s
    if m.remaining_s / r <= horizon_s:          # it ends on the smaller count
        return m.remaining_s * (1.0 - r) / r + restart_s
    return horizon_s * (1.0 - r) + 2.0 * restart_s


_NOT_SHRINKABLE = ()


def _victim_facts(m: JobModel, gpn: int):
    """What ``victims`` needs of job ``m`` that depends only on its count, throughputs and GPUs
    (remembered on the model): its sort key and smaller counts, and what it frees per node on
    its minimum; ``_NOT_SHRINKABLE`` when it cannot shrink."""
    n = m.n
    if n <= m.lo:
        return _NOT_SHRINKABLE
    smaller = sizes(m.lo, n - 1, gpn, n)
    if not smaller:
        return _NOT_SHRINKABLE
    new = smaller[-1]
    base = m.x_cur      # m.tput(n)
    per_gpu_loss = (base - m.tput(new)) / max(base, 1e-12) / (n - new)
    return ((per_gpu_loss, m.ckpt_age_s, m.submit_s, id_order(m.job_id), m, smaller),
            tuple(freed(m, smaller[0], gpn).items()))


def victims(free: dict[str, int], movable: dict[str, JobModel], per: int, k: int, gpn: int,
            horizon_s: float):
    """The cheapest shrinks that make room for ``k`` x ``per`` GPUs: (loss_s, [(model, new
    count)]) with ``free`` updated, or None (``free`` then unchanged). Victims: the jobs
    losing the least throughput per GPU taken (ties: the most recent checkpoint), each to the
    largest smaller count that makes the job fit (else its smallest), never below its minimum
    or past its time limit."""
    room = dict(free)           # per node: free now plus what every job frees on its minimum
    cands = []
    for m in movable.values():
        got = m.memo.get(gpn)
        if got is None:
            got = m.memo[gpn] = _victim_facts(m, gpn)
        if got is _NOT_SHRINKABLE:
            continue
        cand, at_min = got
        for node, c in at_min:
            if node in room:
                room[node] += c
        cands.append(cand)
    if sum(1 for f in room.values() if f >= per) < k:
        return None             # not even every job on its minimum makes room
    cands.sort(key=lambda c: c[:4])
    trial = dict(free)
    ok = sum(1 for f in trial.values() if f >= per)      # nodes that hold ``per`` now
    cuts, loss = [], 0.0
    for _, _, _, _, m, smaller in cands:
        if ok >= k:
            break
        chosen = None
        for new in reversed(smaller):
            if not m.within_limit(new):
                break           # fewer GPUs are slower still
            extra = freed(m, new, gpn)
            gained = sum(1 for node, c in extra.items()
                         if node in trial and trial[node] < per <= trial[node] + c)
            chosen = (new, extra, gained)
            if ok + gained >= k:
                break
        if chosen is None:
            continue
        new, extra, gained = chosen
        for node, c in extra.items():
            if node in trial:
                trial[node] += c
        ok += gained
        cuts.append((m, new))
        loss += shrink_loss_s(m, new, horizon_s)
    if ok < k:
        return None
    free.clear()
    free.update(trial)
    return loss, cuts


def growths(total_free: int, movable: dict[str, JobModel], gpn: int, cap: int,
            gain_factor: float, min_efficiency: float) -> list[tuple]:
    """(score, model, new count, saved_s) of every growth worth its restart, the most time
    saved per added GPU first: each added GPU must add ``min_efficiency`` of one GPU's
    throughput, the time saved exceed ``gain_factor`` x the job's restart cost, the run on the new
    count end within the job's time limit, and the GPUs added be at most ``total_free``
    (whether they fit is the caller's check)."""
    out = []
    key = ("grow", gpn, cap, min_efficiency)
    for m in movable.values():
        n = m.n
        if n >= m.hi:
            continue
        restart_s = m.restart_s
        worth = gain_factor * restart_s
        options = m.memo.get(key)
        if options is None:
            options = m.memo[key] = _efficient(m, gpn, cap, min_efficiency)
        base = m.x_cur      # m.tput(n)
        rem, limit = m.remaining_s, m.limit_s
        for new, t in options:
            if new - n > total_free:
                break
            rem_at = rem * base / t if t > 0 else float("inf")     # m.remaining_at(new)
            saved = rem - rem_at - restart_s     # time saved by moving now, restart included
            if saved <= worth or not (limit is None or rem_at + restart_s <= 0.9 * limit):
                continue
            out.append((saved / (new - n), m, new, saved))
    out.sort(key=lambda g: -g[0])
    return out


def _efficient(m: JobModel, gpn: int, cap: int, min_efficiency: float) -> tuple:
    """(count, throughput) of job ``m``'s larger counts where each added GPU adds at least
    ``min_efficiency`` of one GPU's throughput, fewest GPUs first (remembered on the model)."""
    n = m.n
    base = m.x_cur      # m.tput(n)
    per_gpu1 = base / max(prior_at(m.prior, n), 1e-12)     # one GPU's throughput
    out = []
    for new in sizes(n + 1, m.hi, gpn, cap):
        t = m.tput(new)
        if t - base < min_efficiency * per_gpu1 * (new - n):
            continue
        out.append((new, t))
    return tuple(out)
