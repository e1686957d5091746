"""Calibrated GPU physics shared by the simulator, the policies' predictors and the emulated
GPUs of the test cluster. Pure: imports nothing from slurm/, telemetry/, node/ or sim/.

Constants are fitted by ``scripts/refit_physics.py`` (``physics.json``) and
``scripts/fit_config_models.py`` (``config_models.json``) and documented in ``docs/physics.md``.
``carbon_forecast`` (forecasts of grid carbon intensity from history) is documented in
``docs/carbon-forecast.md``.
"""

from .classes import JobClass, assign_class, class_names, job_class
from .colocation import (colocated_slowdown, group_slowdowns, shared_gpu_power_w,
                         shared_gpu_throttle, shared_gpu_util)
from .config_model import (ClassConfig, ConfigModel, class_config_model, config_model,
                           workload_names)
from .power import (cap_settings_w, cap_slowdown, capped_power_w, clamp_cap_w, gpu_power_w,
                    idle_power_w, max_power_w, node_base_power_w, node_resume_delay_s,
                    node_suspended_power_w)

__all__ = [
    "JobClass", "assign_class", "class_names", "job_class",
    "ClassConfig", "ConfigModel", "class_config_model", "config_model", "workload_names",
    "colocated_slowdown", "group_slowdowns", "shared_gpu_power_w", "shared_gpu_throttle",
    "shared_gpu_util",
    "cap_settings_w", "cap_slowdown", "capped_power_w", "clamp_cap_w", "gpu_power_w",
    "idle_power_w", "max_power_w", "node_base_power_w", "node_resume_delay_s",
    "node_suspended_power_w",
]
