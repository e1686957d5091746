"""The built-in local test cluster: real Slurm (4 nodes x 4 fake GPUs) + InfluxDB 1.x."""

from .cluster import Report, cancel_all_jobs, down, status, up
from .default_conf import DEFAULT_SLURM_CONF
from .spec import Spec, resolve

__all__ = ["DEFAULT_SLURM_CONF", "Report", "Spec", "cancel_all_jobs", "down", "resolve", "status",
           "up"]
