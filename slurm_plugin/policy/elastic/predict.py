"""What a job does on n GPUs: throughput from its own measurements scaled by its class's
profile (the prior), and its remaining time. Pure arithmetic, no I/O."""

from __future__ import annotations

from functools import lru_cache

from ...errors import InputError


def shape(total: int, gpn: int) -> tuple[int, int]:
    """(GPUs per node, nodes) of ``total`` GPUs: one node up to a node's GPUs, else whole nodes."""
    if total <= gpn:
        return total, 1
    return gpn, -(-total // gpn)


@lru_cache(maxsize=4096)
def sizes(lo: int, hi: int, gpn: int, cap: int) -> tuple[int, ...]:
    """The GPU counts a job may run on: ``lo..hi`` within the cluster (``cap`` GPUs), one node
    (any count up to ``gpn``) or whole nodes (multiples of ``gpn``): the shapes Slurm can give
    as ``-N k --gres=gpu:p``."""
    hi = min(hi, cap)
    return tuple(n for n in range(max(1, lo), hi + 1) if n <= gpn or n % gpn == 0)


@lru_cache(maxsize=256)
def prior(app: str) -> tuple[float, ...]:
    """Speedup on n GPUs over one (index n-1, n = 1..64) of a job of class ``app``: the
    measured Pollux profile of the application where there is one, else the class's fitted
    scaling, else near-linear (n ** 0.9)."""
    from ...physics.pollux import class_prior
    p = class_prior(app) if app else None
    if p is not None:
        return p
    try:
        from ...physics import job_class
        cls = job_class(app)
        return tuple(cls.speedup(n) for n in range(1, 65))
    except (InputError, KeyError):
        return tuple(n ** 0.9 for n in range(1, 65))


def prior_at(p: tuple[float, ...], n: int) -> float:
    if n <= len(p):
        return p[max(1, n) - 1]
    return p[-1] * n / len(p)      # past the profile: linear from its end (never reached in practice)


class JobModel:
    """One running elastic job as the policy sees it at this pass."""

    __slots__ = ("job_id", "n", "lo", "hi", "prior", "x_cur", "n_prev", "x_prev", "remaining_s",
                 "uses", "ckpt_age_s", "submit_s", "limit_s", "restart_s", "memo")

    def __init__(self, job_id: str, n: int, lo: int, hi: int, prior: tuple[float, ...],
                 x_cur: float, remaining_s: float, uses: dict[str, int],
                 n_prev: int = 0, x_prev: float = 0.0, ckpt_age_s: float = 0.0,
                 submit_s: float = 0.0, limit_s: float | None = None,
                 restart_s: float = 90.0) -> None:
        self.job_id, self.n, self.lo, self.hi, self.prior = job_id, n, lo, hi, prior
        self.x_cur, self.remaining_s, self.uses = x_cur, remaining_s, uses
        self.n_prev, self.x_prev, self.ckpt_age_s = n_prev, x_prev, ckpt_age_s
        self.submit_s = submit_s
        self.limit_s = limit_s          # Slurm's time limit of a run (a requeue restarts it)
        self.restart_s = restart_s      # what a resize costs it: measured, else the site's
        self.memo: dict = {}            # what depends only on its count and GPUs (plan.freed)

    def aged(self, dt_s: float) -> "JobModel":
        """The same model ``dt_s`` later on the same count: its remaining time counted down."""
        return JobModel(self.job_id, self.n, self.lo, self.hi, self.prior, self.x_cur,
                        max(0.0, self.remaining_s - dt_s), self.uses, self.n_prev, self.x_prev,
                        self.ckpt_age_s, self.submit_s, self.limit_s, self.restart_s)

    def within_limit(self, m: int) -> bool:
        """A run on ``m`` GPUs from now would end within the job's time limit (10% margin)."""
        return self.limit_s is None or self.remaining_at(m) + self.restart_s <= 0.9 * self.limit_s

    def tput(self, m: int) -> float:
        """Predicted samples/s on ``m`` GPUs: measured there if it was, else the measurement on
        the current count scaled by the prior."""
        if m == self.n:
            return self.x_cur
        if m == self.n_prev and self.x_prev > 0:
            return self.x_prev
        return self.x_cur * prior_at(self.prior, m) / prior_at(self.prior, self.n)

    def remaining_at(self, m: int) -> float:
        t = self.tput(m)
        return self.remaining_s * self.x_cur / t if t > 0 else float("inf")
