"""A Pollux-profiled job at a chosen global batch size: what the simulator runs and what the
``ones`` policy's predictor is fitted to. Data: ``data/pollux_profiles.json`` (see
``physics/pollux.py``).

At global batch ``G`` on ``n`` GPUs (local batch ``G / n``, packed on nodes of 4):
- throughput ``G / step_s(n, G / n)`` samples/s, the measured step time interpolated over the
  measured local batch sizes (log scale);
- samples to target ``samples(G)``, Pollux's validation runs log-interpolated between the
  measured global batch sizes: a bigger batch needs more samples (statistical efficiency);
- progress rate ``throughput / samples(G)``: the fraction of the job done per second. With
  statistical efficiency off (``stat_eff=False``) the samples stay those of the job's own
  batch ``ref_batch``: a bigger batch looks free (the illusory gain the benchmark reports).
A batch is allowed on n GPUs when its local batch is within the measured local batch sizes and
it is within the measured global batch sizes (statistical efficiency known there).
"""

from __future__ import annotations

from functools import lru_cache

from .pollux import MAX_PROFILE_GPUS, _check_app, _interp, step_s


@lru_cache(maxsize=64)
def _tables(app: str) -> tuple[list[float], list[list[float]], list[float], list[float]]:
    prof = _check_app(app)
    sb = sorted((int(k), float(v)) for k, v in prof["samples"].items())
    return prof["local_bsz"], prof["step_s"], [x for x, _ in sb], [y for _, y in sb]


def batch_bounds(app: str, n: int, lo: float | None = None, hi: float | None = None
                 ) -> tuple[int, int] | None:
    """The global batch sizes ``app`` may run at on ``n`` GPUs, within ``lo..hi`` too (the
    job's declared range), or None when there is none."""
    grid, _, bs, _ = _tables(app)
    if not 1 <= n <= MAX_PROFILE_GPUS:
        return None
    low = max(bs[0], n * grid[0], lo or 0)
    high = min(bs[-1], n * grid[-1], hi if hi is not None else float("inf"))
    low_i, high_i = int(-(-low // 1)), int(high)
    return (low_i, high_i) if low_i <= high_i else None


def samples_to_target(app: str, batch: float) -> float:
    _, _, bs, ss = _tables(app)
    return _interp(bs, ss, batch)


def step_time_s(app: str, n: int, local_batch: float) -> float:
    """Measured seconds per step on ``n`` GPUs at ``local_batch`` (``pollux.step_s``:
    interpolated, with gradient accumulation past the largest measured local batch)."""
    grid, steps, _, _ = _tables(app)
    return step_s(grid, steps[max(1, min(n, MAX_PROFILE_GPUS)) - 1], local_batch)


def throughput(app: str, n: int, batch: float) -> float:
    """Samples per second on ``n`` GPUs at global ``batch``."""
    return batch / step_time_s(app, n, batch / n)


def progress_rate(app: str, n: int, batch: float, stat_eff: bool = True,
                  ref_batch: float | None = None) -> float:
    """Fraction of the job done per second on ``n`` GPUs at global ``batch``."""
    samples = samples_to_target(app, batch if stat_eff or ref_batch is None else ref_batch)
    return throughput(app, n, batch) / samples


def measured_batch_range(app: str) -> tuple[int, int]:
    """The smallest and largest global batch sizes Pollux measured ``app``'s validation at."""
    _, _, bs, _ = _tables(app)
    return int(bs[0]), int(bs[-1])


BATCH_GRID = 256    # batch sizes tried between a count's bounds (log-spaced), besides the knots


def fastest_run_s(app: str, counts, lo: float | None = None, hi: float | None = None,
                  stat_eff: bool = True, ref_batch: float | None = None) -> float | None:
    """The shortest run of a whole ``app`` job over ``counts`` (GPU counts) and every global
    batch allowed on each (within ``lo..hi``): the measured batch sizes and local batch sizes
    (the interpolation's knots) and ``BATCH_GRID`` log-spaced batches between them. None when
    no batch runs on any count."""
    grid, _, bs, _ = _tables(app)
    best = None
    for n in counts:
        b = batch_bounds(app, n, lo, hi)
        if b is None:
            continue
        b0, b1 = b
        tries = {float(b0), float(b1)}
        tries.update(x for x in bs if b0 <= x <= b1)
        tries.update(n * x for x in grid if b0 <= n * x <= b1)
        if b1 > b0:
            ratio = b1 / b0
            tries.update(b0 * ratio ** (k / BATCH_GRID) for k in range(1, BATCH_GRID))
        for batch in tries:
            r = progress_rate(app, n, batch, stat_eff, ref_batch)
            if r > 0 and (best is None or 1.0 / r < best):
                best = 1.0 / r
    return best
