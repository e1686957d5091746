"""Read-only views of the simulator's state in the model types policies see.

They are computed on access, so a policy that does not look at readings costs nothing.
"""

from __future__ import annotations

import bisect
import math
from functools import lru_cache
from typing import TYPE_CHECKING, Iterator, Mapping, Sequence

from ..model import GpuReading, Progress

if TYPE_CHECKING:
    from .engine import Simulator

STEPS_PER_EPOCH = 100
EPOCH_SOLO_S = 1800.0  # a job's epoch lasts this long alone (at least one epoch per job)


def epochs_of(duration_s: float) -> int:
    return max(1, min(1000, round(duration_s / EPOCH_SOLO_S)))


@lru_cache(maxsize=65536)
def _total_steps(duration_s: float) -> int:
    return epochs_of(duration_s) * STEPS_PER_EPOCH


class GpuReadings(Mapping):
    """``(node, index) -> GpuReading`` of every powered GPU."""

    def __init__(self, sim: "Simulator") -> None:
        self._sim = sim

    def __getitem__(self, key: tuple[str, int]) -> GpuReading:
        node = self._sim.node_by_name[key[0]]
        return self._reading(node, node.gpus[key[1]])

    def get(self, key, default=None):
        # Mapping.get goes through __getitem__ and a KeyError; policies call this per GPU
        node = self._sim.node_by_name.get(key[0])
        if node is None or not 0 <= key[1] < len(node.gpus):
            return default
        return self._reading(node, node.gpus[key[1]])

    def _reading(self, node, g) -> GpuReading:
        jobs = g.jobs
        top_w = node.kind.max_w     # the limit of the node's own model
        if not jobs:
            mem, cap = 0, top_w
        elif len(jobs) == 1:
            (j,) = jobs
            mem, cap = j.cls.memory_mib, j.cap_w or top_w
        else:
            mem = sum(j.cls.memory_mib for j in jobs)
            cap = min((j.cap_w for j in jobs if j.cap_w), default=top_w)
        return GpuReading(node.name, g.index, g.power_w, 0.0, g.util_pct, mem, cap,
                          self._sim.now)

    def __iter__(self) -> Iterator[tuple[str, int]]:
        for n in self._sim.nodes:
            for g in n.gpus:
                yield (n.name, g.index)

    def __len__(self) -> int:
        return self._sim.spec.gpu_count


class PendingView(Sequence):
    """The pending jobs' views in the engine's priority order (``Cluster.pending_jobs``)."""

    def __init__(self, sim: "Simulator") -> None:
        self._sim = sim

    def __getitem__(self, i: int):
        return self._sim.job_views[self._sim.pending[i].id]

    def __iter__(self):
        views = self._sim.job_views
        for j in self._sim.pending:
            yield views[j.id]

    def __len__(self) -> int:
        return len(self._sim.pending)


class ProgressView(Mapping):
    """``job_id -> Progress`` of running jobs: epochs of ``EPOCH_SOLO_S`` solo seconds,
    ``STEPS_PER_EPOCH`` steps each; ``samples_per_s`` is steps per second times 32."""

    def __init__(self, sim: "Simulator") -> None:
        self._sim = sim

    def __getitem__(self, job_id: str) -> Progress:
        sim = self._sim
        j = sim.running[job_id]
        t = j.t
        now, rate = sim.now, j.rate
        total_work = t.duration_s
        left = j.work_left - rate * (now - j.last_s)
        total_steps = _total_steps(total_work)
        step = min(total_steps, math.floor((1 - left / total_work) * total_steps + 1e-9))
        samples_s = (rate * t.samples / total_work) if t.samples \
            else 32 * (rate * total_steps / total_work)
        return Progress(job_id, step, samples_s, step // STEPS_PER_EPOCH, STEPS_PER_EPOCH,
                        total_steps, now, j.run_start_s if j.run_start_s is not None else now)

    def get(self, job_id: str, default=None):
        """As ``Mapping.get``, without its exception round trip for a job not running."""
        if job_id not in self._sim.running:
            return default
        return self[job_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._sim.running)

    def __len__(self) -> int:
        return len(self._sim.running)


FORECAST_H = 48
ISSUE_EVERY_H = 12


class ForecastView(Sequence):
    """``Readings.carbon_forecast``: the hours up to ``FORECAST_H`` ahead as the simulator's
    forecast provider predicted them at its last issue. A forecast is issued every
    ``ISSUE_EVERY_H`` hours (as day-ahead services publish a few times a day; the blend's
    refit costs ~10 ms, hourly issues would dominate a run), made on first access."""

    def __init__(self, sim: "Simulator") -> None:
        self._sim = sim
        self._seen: tuple | None = None

    def _points(self) -> tuple[tuple[float, float], ...]:
        if self._seen is not None:
            return self._seen
        sim = self._sim
        issue = int(sim.now // (3600 * ISSUE_EVERY_H))
        if sim.forecast_cache[0] != issue:
            t0 = issue * 3600.0 * ISSUE_EVERY_H
            points = tuple(sim.forecast.forecast(t0, t0 + FORECAST_H * 3600))
            times = [p[0] for p in points]
            # (issue, its points, their times when ascending (else None), the last cut: (first
            # point index, the points from it))
            sim.forecast_cache = (issue, points, times if times == sorted(times) else None,
                                  (-1, ()))
        _, points, times, cut = sim.forecast_cache
        if times is not None:
            i = bisect.bisect_right(times, sim.now)     # the points after now
            if cut[0] != i:
                cut = (i, points[i:])
                sim.forecast_cache = sim.forecast_cache[:3] + (cut,)
            self._seen = cut[1]
        else:
            now = sim.now
            self._seen = tuple(p for p in points if p[0] > now)
        return self._seen

    def __getitem__(self, i):
        return self._points()[i]

    def __len__(self) -> int:
        return len(self._points())

    def __iter__(self):
        return iter(self._points())
