"""Pollux (OSDI'21) application profiles: how fast an elastic data-parallel training runs on
n GPUs and how many samples it needs to reach its target.

Data: ``data/pollux_profiles.json``, built by ``scripts/pollux_profiles.py`` from the Pollux
artifact's measured step times (``placements.csv``, ``scalability.csv``) and validation runs
(``validation-<B>.csv``); see ``docs/elastic.md``.

Model of a job (application, trace batch size B, trace GPU count r):
- its local batch stays ``b = B / r`` per GPU; on n GPUs the global batch is ``n * b``;
- throughput on n GPUs: ``n * b / step_s(n, b)`` samples/s (packed on nodes of 4 GPUs);
- samples to target at global batch ``n * b``: log-interpolated between the measured batch
  sizes, clamped to their range;
- so the fraction of the job done per second on n GPUs is ``tput(n) / samples(n * b)``.
- ``max_gpus``: the most GPUs whose global batch stays within the measured batch sizes
  (statistical efficiency is known there), at least r, at most 64 (the profiles' range).
"""

from __future__ import annotations

import bisect
import json
import math
from dataclasses import dataclass
from functools import lru_cache

from ..errors import InputError
from ..resources import data_dir

MAX_PROFILE_GPUS = 64

# Power and memory class of each application: the measured class closest in model type
# (physics.json has V100 measurements of these; see docs/elastic.md).
POWER_CLASS = {"bert": "transformer", "cifar10": "resnet18", "deepspeech2": "lstm",
               "imagenet": "vgg16", "ncf": "alexnet", "yolov3": "vgg16"}


@lru_cache(maxsize=1)
def _profiles() -> dict:
    return json.loads((data_dir() / "pollux_profiles.json").read_text())["apps"]


def pollux_apps() -> tuple[str, ...]:
    return tuple(sorted(_profiles()))


def _interp(xs: list[float], ys: list[float], x: float, log: bool = True) -> float:
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    i = bisect.bisect_left(xs, x)
    x0, x1 = xs[i - 1], xs[i]
    f = (math.log(x / x0) / math.log(x1 / x0)) if log else (x - x0) / (x1 - x0)
    return ys[i - 1] + f * (ys[i] - ys[i - 1])


def step_s(grid: list[float], steps: list[float], local_batch: float) -> float:
    """Seconds per optimiser step at ``local_batch`` samples per GPU, from the measured step
    times ``steps`` at the local batches ``grid``: interpolated within the grid; beyond its
    largest batch (what fits on a GPU), gradient accumulation as Pollux runs it: k micro-steps
    of ``local_batch / k`` each, k the fewest that fit (a larger batch is never faster per
    sample than the largest measured one); below its smallest, the smallest's step time."""
    return accumulated_step_s(local_batch, grid[-1], lambda b: _interp(grid, steps, b))


def accumulated_step_s(local_batch: float, top: float, step_at) -> float:
    """``step_at(local_batch)`` up to ``top`` samples per GPU; past it, gradient accumulation:
    k micro-steps of ``local_batch / k``, k the fewest within ``top``."""
    if local_batch <= top:
        return step_at(local_batch)
    k = math.ceil(local_batch / top - 1e-9)
    return k * step_at(local_batch / k)


@dataclass(frozen=True, slots=True)
class ElasticProfile:
    """One job's profile: ``rate[n-1]`` is the fraction of the job done per second on n GPUs
    (n = 1..64); ``tput[n-1]`` its samples/s there."""

    app: str
    local_bsz: float
    samples: float             # samples to target at the trace's batch size
    tput: tuple[float, ...]
    rate: tuple[float, ...]
    max_gpus: int

    def duration_s(self, gpus: int) -> float:
        return 1.0 / self.rate[max(1, min(gpus, MAX_PROFILE_GPUS)) - 1]

    def speedup(self) -> tuple[float, ...]:
        """Rate on n GPUs relative to one GPU."""
        return tuple(r / self.rate[0] for r in self.rate)


def _check_app(app: str) -> dict:
    prof = _profiles().get(app.lower())
    if prof is None:
        raise InputError(f"physics: application {app!r} has no elastic profile; "
                         f"choose one of: {', '.join(pollux_apps())}")
    return prof


@lru_cache(maxsize=4096)
def elastic_profile(app: str, batch_size: int, gpus: int) -> ElasticProfile:
    """The profile of ``app`` trained at global ``batch_size`` on ``gpus`` GPUs (the trace's
    row); InputError for an unknown application."""
    prof = _check_app(app)
    gpus = max(1, gpus)
    b = batch_size / gpus
    grid = prof["local_bsz"]
    sb = sorted((int(k), float(v)) for k, v in prof["samples"].items())
    bs, ss = [x for x, _ in sb], [y for _, y in sb]
    tput, rate = [], []
    for n in range(1, MAX_PROFILE_GPUS + 1):
        step = step_s(grid, prof["step_s"][n - 1], b)
        t = n * b / step
        tput.append(t)
        rate.append(t / _interp(bs, ss, n * b))
    max_gpus = max(1, min(gpus, MAX_PROFILE_GPUS),
                   min(MAX_PROFILE_GPUS, int(bs[-1] // b) if b > 0 else MAX_PROFILE_GPUS))
    # past the maximum the batch's statistical efficiency is unmeasured: no faster there
    for n in range(max_gpus, MAX_PROFILE_GPUS):
        tput[n], rate[n] = tput[max_gpus - 1], rate[max_gpus - 1]
    return ElasticProfile(app.lower(), b, _interp(bs, ss, batch_size), tuple(tput), tuple(rate),
                          max_gpus)


@lru_cache(maxsize=64)
def class_prior(app: str) -> tuple[float, ...] | None:
    """An application's typical speedup on n GPUs over one (its profile at the median measured
    batch size, on the GPU count that puts the middle of the measured local batch sizes on each): the prior a policy uses for a job of the
    class until the job's own progress is measured. None for a class without a profile."""
    prof = _profiles().get(app.lower())
    if prof is None:
        return None
    bs = sorted(int(k) for k in prof["samples"])
    grid = prof["local_bsz"]
    batch = bs[len(bs) // 2]
    mid = grid[len(grid) // 2]
    return elastic_profile(app, batch, max(1, round(batch / mid))).speedup()
