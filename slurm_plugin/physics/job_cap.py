"""A job's per-GPU power and slowdown under a power cap, from its configuration model.

The simulator (and the emulated GPUs) apply a cap through this; GreenFlow's predictor uses the
same mapping (``policy/greenflow/predict.py``): the class's measured power level
(``JobClass.power_at``) is the uncapped draw, the cap is moved onto the configuration model's
power scale by the ratio of the two, and the model's time and power ratios under that cap are
applied to the class. A class without a configuration model, or a GPU model whose chip has no
cap sweep (H100, H200, L40S: ``config_model.fitted_cap_gpu``), falls back to the generic fit of
``power.py`` (``cap_slowdown``, ``capped_power_w``) with the GPU model's own constants.
"""

from __future__ import annotations

from functools import lru_cache

from ..errors import ConfigError
from .classes import job_class
from .config_model import class_config_model
from .gpu_models import DERIVED_CACHES
from .power import cap_slowdown, capped_power_w, clamp_cap_w


@lru_cache(maxsize=4096)
def capped_job(job_class_name: str, gpus: int, power_cap_w: float | None,
               gpu_model: str = "V100", gpus_per_node: int = 8) -> tuple[float, float]:
    """(per-GPU power_w, time multiplier >= 1) of a ``job_class_name`` job on ``gpus`` GPUs with
    every GPU capped at ``power_cap_w`` (None: uncapped; clamped to the board's range)."""
    level_w = job_class(job_class_name).power_at(gpus, gpu_model)
    cap_w = clamp_cap_w(power_cap_w, gpu_model)
    if cap_w is None:
        return level_w, 1.0
    try:
        model = class_config_model(job_class_name).model
        model.cap_fit(gpu_model)
    except ConfigError:
        return capped_power_w(level_w, cap_w, gpu_model), cap_slowdown(level_w, cap_w, gpu_model)
    batch = max(1, gpus) * model.reference_local_batch
    model_w0 = model.power_per_gpu_w(gpus, batch, None, gpu_model, gpus_per_node)
    model_cap_w = cap_w * model_w0 / level_w
    slow = (model.samples_per_s(gpus, batch, None, gpu_model, gpus_per_node)
            / model.samples_per_s(gpus, batch, model_cap_w, gpu_model, gpus_per_node))
    power_w = min(cap_w, level_w * model.power_per_gpu_w(gpus, batch, model_cap_w, gpu_model,
                                                         gpus_per_node) / model_w0)
    return power_w, max(1.0, slow)


DERIVED_CACHES.append(capped_job)
