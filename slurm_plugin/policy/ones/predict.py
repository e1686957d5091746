"""What a job does at n GPUs and global batch G: a fitted step-time model (the throughput
predictor) and the measured statistical efficiency give its goodput, the fraction of the job
done per second. Pure arithmetic on the shipped profiles, no I/O after the first fit.

Step-time model, fitted per application to Pollux's measured step times (weighted least
squares, relative error; ONES used a 5-input, 64-unit network): with k = ceil(n / 4) nodes,
    step_s(n, b) = c0 + c1 b + [n > 1] (c2 + c3 b + c7 log2 n) + [k > 1] (c4 + c5 log2 k + c6 b)
(compute grows with the local batch b; gradient exchange costs more with more GPUs and more
across nodes). ``fit_error`` reports its error on held-out rows (every 5th measured row).
"""

from __future__ import annotations

import math
from functools import lru_cache

from ...physics.pollux import MAX_PROFILE_GPUS
from ...physics.pollux_batch import _tables, batch_bounds, samples_to_target

GPUS_PER_NODE = 4       # the profiles' packing
HOLD_OUT = 5            # every 5th (n, b) row is held out of the fit


def _features(n: int, b: float) -> tuple[float, ...]:
    k = -(-n // GPUS_PER_NODE)
    multi = 1.0 if n > 1 else 0.0
    nodes = 1.0 if k > 1 else 0.0
    return (1.0, b, multi, multi * b, nodes, nodes * math.log2(k), nodes * b, multi * math.log2(n))


def _rows(app: str) -> list[tuple[int, float, float]]:
    grid, steps, _, _ = _tables(app)
    return [(n, b, steps[n - 1][i]) for n in range(1, MAX_PROFILE_GPUS + 1)
            for i, b in enumerate(grid)]


def _solve(a: list[list[float]], y: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting and a tiny ridge (pure Python)."""
    m = len(y)
    a = [row[:] + [y[i]] for i, row in enumerate(a)]
    for i in range(m):
        a[i][i] += 1e-9
    for c in range(m):
        p = max(range(c, m), key=lambda r: abs(a[r][c]))
        a[c], a[p] = a[p], a[c]
        for r in range(m):
            if r != c and a[c][c]:
                f = a[r][c] / a[c][c]
                a[r] = [x - f * z for x, z in zip(a[r], a[c])]
    return [a[i][m] / a[i][i] if a[i][i] else 0.0 for i in range(m)]


def _fit(rows: list[tuple[int, float, float]]) -> tuple[float, ...]:
    k = len(_features(1, 1.0))
    ata = [[0.0] * k for _ in range(k)]
    aty = [0.0] * k
    for n, b, s in rows:
        x = _features(n, b)
        w = 1.0 / (s * s)               # relative error
        for i in range(k):
            aty[i] += w * x[i] * s
            for j in range(k):
                ata[i][j] += w * x[i] * x[j]
    return tuple(_solve(ata, aty))


@lru_cache(maxsize=64)
def coefficients(app: str, held_out: bool = False) -> tuple[float, ...]:
    """The step-time model's coefficients (``held_out``: fitted without the held-out rows)."""
    rows = _rows(app)
    if held_out:
        rows = [r for i, r in enumerate(rows) if i % HOLD_OUT]
    return _fit(rows)


def predicted_step_s(app: str, n: int, local_batch: float, held_out: bool = False) -> float:
    c = coefficients(app, held_out)
    return max(1e-6, sum(ci * xi for ci, xi in zip(c, _features(n, local_batch))))


def fit_error(app: str) -> tuple[float, float]:
    """(mean, max) relative error of the model fitted without the held-out rows, on them."""
    errs = [abs(predicted_step_s(app, n, b, True) - s) / s
            for i, (n, b, s) in enumerate(_rows(app)) if i % HOLD_OUT == 0]
    return sum(errs) / len(errs), max(errs)


@lru_cache(maxsize=200_000)
def goodput(app: str, n: int, batch: float, stat_eff: bool = True,
            ref_batch: float | None = None) -> float:
    """Predicted fraction of the job done per second on ``n`` GPUs at global ``batch``: fitted
    throughput over the samples to target at that batch (at ``ref_batch`` with statistical
    efficiency off: a bigger batch looks free)."""
    tput = batch / predicted_step_s(app, n, batch / n)
    samples = samples_to_target(app, batch if stat_eff or ref_batch is None else ref_batch)
    return tput / samples


BATCH_POINTS = 9     # candidate global batch sizes per GPU count (geometric between bounds)


@lru_cache(maxsize=100_000)
def best_batch(app: str, n: int, lo: int | None, hi: int | None, stat_eff: bool = True,
               ref_batch: float | None = None) -> tuple[int, float] | None:
    """The global batch of the highest predicted goodput on ``n`` GPUs within the job's range
    and the measured one, and that goodput; None when no batch runs on ``n`` GPUs."""
    bounds = batch_bounds(app, n, lo, hi)
    if bounds is None:
        return None
    b0, b1 = bounds
    best = None
    for i in range(BATCH_POINTS):
        g = b0 if b1 == b0 else round(b0 * (b1 / b0) ** (i / (BATCH_POINTS - 1)))
        g = min(max(g, b0), b1)
        r = goodput(app, n, g, stat_eff, ref_batch)
        if best is None or r > best[1]:
            best = (g, r)
    return best


def lr_scale(rule: str, old_batch: int, new_batch: int) -> float:
    """The factor a job multiplies its learning rate by when its batch goes from ``old_batch``
    to ``new_batch``: linear scaling (Goyal et al.) unless the job declared ``sqrt``."""
    ratio = new_batch / old_batch if old_batch > 0 else 1.0
    return math.sqrt(ratio) if rule == "sqrt" else ratio
