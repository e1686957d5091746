"""GreenFlow's predictor: what happens to a job under a choice of start time, GPU count and
power cap. Pure: the configuration models (``physics.config_model``), the job class table
(``physics.classes``) and a carbon curve handed in as points.

The job is known at a reference configuration (``JobProfile``: its run time on ``ref_gpus``
uncapped, e.g. the trace's duration, or a repeated job's history). A choice changes it by the
ratios of its configuration model: run time by the inverse speedup, per-GPU power by the ratio
of the model's per-GPU power at the choice to that at the reference. The level of the power is
the class table's measured power (``JobClass.power_at(ref_gpus)``), never above the cap; a cap
is mapped onto the model's power scale by the same ratio (a cap above the class's own draw
does not slow it, whatever the stand-in model draws).
Carbon is the integral of the job's power times the intensity curve over its run.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from functools import lru_cache

from ...errors import ConfigError, InputError
from ...physics.classes import job_class
from ...physics.config_model import ClassConfig, class_config_model

J_PER_KWH = 3.6e6


@dataclass(frozen=True, slots=True)
class CarbonCurve:
    """Intensity as a step function: ``now_gco2_per_kwh`` until the first point, then each
    ``(time_s, gco2_per_kwh)`` point holds until the next (the last one holds on)."""

    now_gco2_per_kwh: float
    points: tuple[tuple[float, float], ...] = ()
    times: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if any(b[0] <= a[0] for a, b in zip(self.points, self.points[1:])):
            bad = next(b for a, b in zip(self.points, self.points[1:]) if b[0] <= a[0])
            raise InputError(f"greenflow predict: carbon curve point at time_s={bad[0]!r} is not "
                             "after the one before; give points ascending in time, one per time")
        object.__setattr__(self, "times", tuple(t for t, _ in self.points))

    def gco2_per_kwh_at(self, t_s: float) -> float:
        i = bisect.bisect_right(self.times, t_s)
        return self.points[i - 1][1] if i else self.now_gco2_per_kwh

    def mean_gco2_per_kwh(self, start_s: float, end_s: float) -> float:
        """Time-weighted mean intensity over ``[start_s, end_s]``."""
        if end_s <= start_s:
            return self.gco2_per_kwh_at(start_s)
        times = self.times
        i = bisect.bisect_right(times, start_s)
        value = self.points[i - 1][1] if i else self.now_gco2_per_kwh
        t, total = start_s, 0.0
        while i < len(times) and times[i] < end_s:
            total += value * (times[i] - t)
            t, value = times[i], self.points[i][1]
            i += 1
        total += value * (end_s - t)
        return total / (end_s - start_s)


@dataclass(frozen=True, slots=True)
class JobProfile:
    job_class: str               # a class of physics/classes.py (or a measured workload)
    ref_run_s: float             # run time at the reference configuration
    ref_gpus: int = 1
    batch_size: int | None = None   # global batch; None: ref_gpus x the model's reference batch


@dataclass(frozen=True, slots=True)
class Choice:
    start_s: float
    gpus: int
    power_cap_w: float | None = None


@dataclass(frozen=True, slots=True)
class Prediction:
    choice: Choice
    run_s: float
    finish_s: float
    jct_s: float                 # finish - submit
    power_w: float               # the job's GPUs together
    energy_j: float
    carbon_g: float
    mean_gco2_per_kwh: float
    model_note: str              # which configuration model served, measured or nearest


@lru_cache(maxsize=256)
def _class_config(name: str) -> ClassConfig:
    return class_config_model(name)


@lru_cache(maxsize=256)
def _class_power_w(name: str, gpus: int, gpu_model: str) -> float | None:
    try:
        return job_class(name).power_at(gpus, gpu_model)
    except (InputError, ConfigError):   # a workload without a class row; no physics for the GPU
        return None


@lru_cache(maxsize=65536)
def _config(job_class_name: str, ref_gpus: int, batch_size: int | None, gpus: int,
            power_cap_w: float | None, gpu_model: str,
            gpus_per_node: int) -> tuple[float, float, str]:
    """(speedup over the reference, per-GPU power, model note) of one configuration."""
    cc = _class_config(job_class_name)
    model = cc.model
    batch = batch_size or ref_gpus * model.reference_local_batch
    ref_model_w = model.power_per_gpu_w(ref_gpus, batch, None, gpu_model, gpus_per_node)
    level_w = _class_power_w(job_class_name, ref_gpus, gpu_model)
    # A cap acts on the class's own power level: mapped into the model's power scale, a 150 W
    # cap on a class drawing 120 W is the model under 150 * P_model / 120 W (no slowdown).
    model_cap_w = power_cap_w
    if power_cap_w is not None and level_w is not None:
        model_cap_w = power_cap_w * ref_model_w / level_w
    speedup = model.speedup(gpus, batch, model_cap_w, ref_gpus=ref_gpus, gpu_model=gpu_model,
                            gpus_per_node=gpus_per_node)
    model_w = model.power_per_gpu_w(gpus, batch, model_cap_w, gpu_model, gpus_per_node)
    per_gpu_w = model_w if level_w is None else level_w * model_w / ref_model_w
    if power_cap_w is not None:
        per_gpu_w = min(per_gpu_w, power_cap_w)
    return speedup, per_gpu_w, f"{cc.job_class}: {cc.note} ({model.name})"


def predict(job: JobProfile, choice: Choice, submit_s: float, carbon: CarbonCurve,
            gpu_model: str = "V100", gpus_per_node: int = 8,
            node_power_per_gpu_w: float = 0.0) -> Prediction:
    """JCT, energy and carbon of ``job`` under ``choice``. ``node_power_per_gpu_w``: the share
    of node power (CPUs, memory) charged per GPU the job holds."""
    speedup, per_gpu_w, note = _config(job.job_class, job.ref_gpus, job.batch_size, choice.gpus,
                                       choice.power_cap_w, gpu_model, gpus_per_node)
    run_s = job.ref_run_s / speedup
    power_w = choice.gpus * (per_gpu_w + node_power_per_gpu_w)
    finish_s = choice.start_s + run_s
    mean_ci = carbon.mean_gco2_per_kwh(choice.start_s, finish_s)
    energy_j = power_w * run_s
    return Prediction(choice, run_s, finish_s, finish_s - submit_s, power_w, energy_j,
                      energy_j / J_PER_KWH * mean_ci, mean_ci, note)
