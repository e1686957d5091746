"""Configuration models: a job's throughput and per-GPU power as functions of its GPU count,
batch size and power cap, per measured workload (fitted constants in
``slurm_plugin/data/config_models.json``, written by ``scripts/fit_config_models.py``; error on
left-out rows printed by ``benchmarks/bench_config_model.py``; docs/physics.md, "Configuration
models").

- ``ScalingFit`` (Pollux profiles; GPU count and batch size): the time of one step of
  ``local_batch`` samples per GPU on ``gpus`` GPUs over ``nodes`` nodes,
  ``step = (grad ** gamma + sync ** gamma) ** (1 / gamma)``, ``grad = a + b * local_batch``,
  ``sync = 0`` on one GPU, else ``a + b * (gpus - 2)`` (one line within a node, one across).
- ``CapFit`` (Zeus, Perseus; power cap and batch size, one GPU of a given model): uncapped
  ``P0(b) = pa + pb * b / (b + bh)`` and ``T0(b) = ta + tb / b``; under a cap
  ``P = (P0 ** -k + cap ** -k) ** (-1 / k)`` (a smooth ``min(P0, cap)``) and
  ``T / T0 = 1 + s * max(0, P0 / cap - 1) ** m``.
- ``ConfigModel`` combines them: samples/s = ``gpus * local_batch / step`` (Pollux testbed
  seconds, NVIDIA T4) divided by the cap's time multiplier on the chosen GPU model; per-GPU power
  is the capped power scaled by the compute share of a step (a GPU waiting on gradient sync
  draws idle power: an assumption, see the docs). Compare configurations with ``speedup``
  (a ratio, free of the testbed's absolute speed).

Job classes of ``classes.py`` have no sweeps of their own: ``class_config_model`` gives the
nearest measured workload and says so (``ClassConfig.note``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

from ..errors import ConfigError
from ..resources import data_dir

CONFIG_MODELS_FILE = "config_models.json"
IDLE_SHARE_OF_MAX_CAP = 0.18   # idle power / top power limit when the GPU model has no idle fit


@dataclass(frozen=True, slots=True)
class ScalingFit:
    grad_a_s: float
    grad_b_s: float
    sync_local_a_s: float
    sync_local_b_s: float
    sync_node_a_s: float
    sync_node_b_s: float
    gamma: float

    def grad_time_s(self, local_batch: float) -> float:
        return max(1e-9, self.grad_a_s + self.grad_b_s * local_batch)

    def sync_time_s(self, gpus: int, nodes: int) -> float:
        if gpus <= 1:
            return 0.0
        across = self.sync_node_a_s + self.sync_node_b_s * (gpus - 2)
        if nodes <= 1:   # within a node never slower than across nodes (Pollux measured <= 4)
            return max(0.0, min(across, self.sync_local_a_s + self.sync_local_b_s * (gpus - 2)))
        return max(0.0, across)

    def step_time_s(self, gpus: int, local_batch: float, nodes: int = 1) -> float:
        grad, sync = self.grad_time_s(local_batch), self.sync_time_s(gpus, nodes)
        if sync <= 0:
            return grad
        g = self.gamma
        return (grad ** g + sync ** g) ** (1 / g)


@dataclass(frozen=True, slots=True)
class CapFit:
    time_a_s: float
    time_b_s: float
    power_a_w: float
    power_b_w: float
    power_half_batch: float
    smooth_k: float
    slow_s: float
    slow_m: float
    max_cap_w: float
    min_cap_w: float

    def full_power_w(self, batch: float) -> float:
        """Uncapped average power at ``batch`` samples per GPU step."""
        b = max(1.0, batch)
        return max(1.0, self.power_a_w + self.power_b_w * b / (b + self.power_half_batch))

    def full_time_s(self, batch: float) -> float:
        """Uncapped time of the measured unit of work (an epoch in Zeus, an iteration in
        Perseus); only ratios of it are used."""
        return max(1e-9, self.time_a_s + self.time_b_s / max(1.0, batch))

    def clamp_w(self, power_cap_w: float | None) -> float | None:
        if power_cap_w is None or power_cap_w >= self.max_cap_w:
            return None
        return max(self.min_cap_w, power_cap_w)

    def power_w(self, batch: float, power_cap_w: float | None = None) -> float:
        p0, cap = self.full_power_w(batch), self.clamp_w(power_cap_w)
        if cap is None:
            return p0
        lo, hi = min(p0, cap), max(p0, cap)
        return lo * (1.0 + (lo / hi) ** self.smooth_k) ** (-1.0 / self.smooth_k)

    def slowdown(self, batch: float, power_cap_w: float | None = None) -> float:
        """Time multiplier under the cap (1 when uncapped)."""
        cap = self.clamp_w(power_cap_w)
        if cap is None:
            return 1.0
        return 1.0 + self.slow_s * max(0.0, self.full_power_w(batch) / cap - 1) ** self.slow_m

    def time_s(self, batch: float, power_cap_w: float | None = None) -> float:
        return self.full_time_s(batch) * self.slowdown(batch, power_cap_w)


@dataclass(frozen=True, slots=True)
class ConfigModel:
    name: str                          # the measured workload (Pollux name)
    scaling: ScalingFit
    caps: Mapping[str, CapFit]         # GPU model -> cap fit
    cap_source: str
    cap_note: str
    reference_local_batch: int

    def cap_fit(self, gpu_model: str) -> CapFit:
        """The cap curve on ``gpu_model``: this workload's own sweep on it, else the median
        Perseus curve of that model; a catalogued model without either takes those of the
        fitted model of its chip (``fitted_cap_gpu``: A100-SXM4-80GB -> A100)."""
        fit = self._cap_fit(gpu_model)
        if fit is None:
            chip_gpu = fitted_cap_gpu(gpu_model)
            fit = self._cap_fit(chip_gpu) if chip_gpu else None
        if fit is not None:
            return fit
        raise ConfigError("physics", "gpu_type", gpu_model,
                          f"no power-cap model for workload {self.name!r}; fitted GPU models: "
                          f"{', '.join(sorted(set(self.caps) | set(_gpu_cap_fits())))}"
                          " (and the catalogued models of their chips)")

    def _cap_fit(self, gpu_model: str) -> CapFit | None:
        for name, fit in self.caps.items():
            if name.lower() == gpu_model.lower():
                return fit
        return _gpu_cap_fits().get(gpu_model.upper())

    def _nodes(self, gpus: int, gpus_per_node: int) -> int:
        return max(1, math.ceil(gpus / max(1, gpus_per_node)))

    def samples_per_s(self, gpus: int, batch_size: int, power_cap_w: float | None = None,
                      gpu_model: str = "V100", gpus_per_node: int = 8) -> float:
        """Samples per second with a global ``batch_size`` split over ``gpus`` GPUs packed
        ``gpus_per_node`` to a node, every GPU capped at ``power_cap_w`` (None: uncapped)."""
        gpus = max(1, gpus)
        local = max(1.0, batch_size / gpus)
        step = self.scaling.step_time_s(gpus, local, self._nodes(gpus, gpus_per_node))
        grad = self.scaling.grad_time_s(local)
        # the cap stretches the compute part of a step only
        slow = self.cap_fit(gpu_model).slowdown(local, power_cap_w)
        return gpus * local / (step + grad * (slow - 1.0))

    def power_per_gpu_w(self, gpus: int, batch_size: int, power_cap_w: float | None = None,
                        gpu_model: str = "V100", gpus_per_node: int = 8,
                        idle_power_w: float | None = None) -> float:
        """Average power of each of the job's GPUs."""
        gpus = max(1, gpus)
        local = max(1.0, batch_size / gpus)
        fit = self.cap_fit(gpu_model)
        busy_w = fit.power_w(local, power_cap_w)
        idle = idle_power_w if idle_power_w is not None else IDLE_SHARE_OF_MAX_CAP * fit.max_cap_w
        idle = min(idle, busy_w)
        grad0 = self.scaling.grad_time_s(local)
        slow = fit.slowdown(local, power_cap_w)
        step = self.scaling.step_time_s(gpus, local, self._nodes(gpus, gpus_per_node))
        busy = min(1.0, grad0 * slow / (step + grad0 * (slow - 1.0)))
        return idle + (busy_w - idle) * busy

    def speedup(self, gpus: int, batch_size: int, power_cap_w: float | None = None,
                ref_gpus: int = 1, ref_batch_size: int | None = None,
                gpu_model: str = "V100", gpus_per_node: int = 8) -> float:
        """Throughput of this configuration relative to ``ref_gpus`` GPUs uncapped at
        ``ref_batch_size`` (default: this batch size); the ratio of job times is its inverse."""
        ref_b = ref_batch_size if ref_batch_size is not None else batch_size
        return (self.samples_per_s(gpus, batch_size, power_cap_w, gpu_model, gpus_per_node)
                / self.samples_per_s(ref_gpus, ref_b, None, gpu_model, gpus_per_node))


@dataclass(frozen=True, slots=True)
class ClassConfig:
    job_class: str
    model: ConfigModel
    note: str                          # "measured: ..." or "nearest: ..."

    @property
    def measured(self) -> bool:
        return self.note.startswith("measured")


@lru_cache(maxsize=1)
def _file() -> dict[str, Any]:
    path = data_dir() / CONFIG_MODELS_FILE
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(str(path), "(file)", CONFIG_MODELS_FILE,
                          f"cannot load the configuration models ({exc}); regenerate it with "
                          "scripts/fit_config_models.py") from None


_CAP_KEYS = CapFit.__slots__


def _cap(body: Mapping[str, Any]) -> CapFit:
    return CapFit(**{k: float(body[k]) for k in _CAP_KEYS})


@lru_cache(maxsize=1)
def _gpu_cap_fits() -> dict[str, CapFit]:
    """GPU models with a cap fit only from Perseus (A100, A40): the median fitted curve."""
    out = {}
    for gpu, body in _file().get("gpu_caps", {}).items():
        fits = sorted(body["models"].values(), key=lambda f: f["slow_s"])
        if fits:
            out[gpu.upper()] = _cap(fits[len(fits) // 2])
    return out


@lru_cache(maxsize=256)
def fitted_cap_gpu(gpu_model: str) -> str | None:
    """The GPU model with cap sweeps (Zeus per workload, Perseus) whose chip a catalogued
    ``gpu_model`` has (docs/gpu-models.md: a constant carries over from the same chip), e.g.
    ``"V100-PCIE-16GB"`` -> ``"V100"``, ``"A100-SXM4-80GB"`` -> ``"A100"``; None for a name
    not catalogued or a chip nothing was swept on (GH100, AD102)."""
    from .gpu_models import lookup
    try:
        chip = lookup(gpu_model).chip
    except ConfigError:
        return None
    fitted = {g for body in _file()["workloads"].values() for g in body["caps"]}
    fitted |= {g.upper() for g in _file().get("gpu_caps", {})}
    for name in sorted(fitted):
        try:
            if lookup(name).chip == chip:
                return name
        except ConfigError:
            continue          # a swept model outside the catalogue (RTX6000, P100)
    return None


@lru_cache(maxsize=None)
def config_model(name: str) -> ConfigModel:
    """The model of a measured workload (``workload_names()``); ConfigError lists them."""
    workloads = _file()["workloads"]
    body = workloads.get(name.lower())
    if body is None:
        raise ConfigError("physics", "workload", name,
                          f"no configuration model; measured: {', '.join(sorted(workloads))}")
    s = body["scaling"]
    return ConfigModel(name.lower(), ScalingFit(**{k: float(s[k]) for k in ScalingFit.__slots__}),
                       {g: _cap(c) for g, c in body["caps"].items()}, body["cap_source"],
                       body["cap_note"], int(body["reference_local_batch"]))


def workload_names() -> tuple[str, ...]:
    return tuple(sorted(_file()["workloads"]))


def class_config_model(job_class: str) -> ClassConfig:
    """The configuration model of a job class: its own when measured, else the nearest
    measured workload, with the reason in ``note``."""
    key = job_class.lower()
    if key in _file()["workloads"]:
        return ClassConfig(key, config_model(key), "measured: a Pollux workload")
    entry = _file()["classes"].get(key)
    if entry is None:
        raise ConfigError("physics", "app", job_class,
                          "no configuration model for this class; classes with one: "
                          f"{', '.join(sorted(_file()['classes']))}; workloads: "
                          f"{', '.join(workload_names())}")
    return ClassConfig(key, config_model(entry["workload"]), entry["note"])
