"""What a job does at n GPUs and global batch G: a step-time predictor (the throughput
predictor) and the measured statistical efficiency give its goodput, the fraction of the job
done per second. Pure arithmetic on the shipped profiles, no I/O after the first fit.

Two step-time predictors, both from Pollux's measured step times; each application uses the
one with the smaller mean error on held-out rows (every 5th measured (n, b) row, predicted from
the others; ``fit_errors``). ONES used a 5-input, 64-unit network.

- ``model``: fitted per application (weighted least squares, relative error): with
  k = ceil(n / 4) nodes,
      step_s(n, b) = c0 + c1 b + [n > 1] (c2 + c3 b + c7 log2 n) + [k > 1] (c4 + c5 log2 k + c6 b)
  (compute grows with the local batch b; gradient exchange costs more with more GPUs and more
  across nodes).
- ``interp``: at the job's GPU count, piecewise linear in log(step) over log(b) between the
  measured local batches (the nearest segment's line beyond them).

Past the largest measured local batch both predict gradient accumulation, as the simulator
and Pollux run it: k micro-steps of b / k.
"""

from __future__ import annotations

import math
from functools import lru_cache

from ...physics.pollux import MAX_PROFILE_GPUS, accumulated_step_s
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


def _model_step_s(app: str, n: int, b: float, held_out: bool) -> float:
    c = coefficients(app, held_out)
    return max(1e-6, sum(ci * xi for ci, xi in zip(c, _features(n, b))))


@lru_cache(maxsize=1024)
def _curve(app: str, n: int, held_out: bool) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(log b, log step_s) of the measured rows at ``n`` GPUs (the rows fitted)."""
    rows = _rows(app)
    pts = sorted((b, s) for i, (m, b, s) in enumerate(rows)
                 if m == n and s > 0 and not (held_out and i % HOLD_OUT == 0))
    return tuple(math.log(b) for b, _ in pts), tuple(math.log(s) for _, s in pts)


def _interp_step_s(app: str, n: int, b: float, held_out: bool) -> float | None:
    xs, ys = _curve(app, min(max(1, n), MAX_PROFILE_GPUS), held_out)
    if len(xs) < 2:
        return None
    x = math.log(b)
    i = 0
    while i < len(xs) - 2 and x > xs[i + 1]:
        i += 1
    t = (x - xs[i]) / (xs[i + 1] - xs[i])
    return math.exp(ys[i] + t * (ys[i + 1] - ys[i]))


def _raw_step_s(app: str, n: int, b: float, held_out: bool, how: str) -> float:
    if how == "interp":
        got = _interp_step_s(app, n, b, held_out)
        if got is not None:
            return got
    return _model_step_s(app, n, b, held_out)


def _step_s(app: str, n: int, local_batch: float, held_out: bool, how: str) -> float:
    return accumulated_step_s(local_batch, _tables(app)[0][-1],
                              lambda b: _raw_step_s(app, n, b, held_out, how))


@lru_cache(maxsize=64)
def fit_errors(app: str) -> dict[str, tuple[float, float]]:
    """Per predictor (``model``, ``interp``): (mean, max) relative error on the held-out rows
    of the predictor made without them."""
    out = {}
    for how in ("model", "interp"):
        errs = [abs(_raw_step_s(app, n, b, True, how) - s) / s
                for i, (n, b, s) in enumerate(_rows(app)) if i % HOLD_OUT == 0 and s > 0]
        out[how] = (sum(errs) / len(errs), max(errs))
    return out


@lru_cache(maxsize=64)
def predictor(app: str) -> str:
    """The predictor ``app`` uses: the one of the smaller mean held-out error."""
    errors = fit_errors(app)
    return min(errors, key=lambda how: errors[how][0])


def predicted_step_s(app: str, n: int, local_batch: float, held_out: bool = False) -> float:
    return _step_s(app, n, local_batch, held_out, predictor(app))


def fit_error(app: str) -> tuple[float, float]:
    """(mean, max) relative error on the held-out rows of the predictor ``app`` uses."""
    return fit_errors(app)[predictor(app)]


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
