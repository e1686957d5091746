"""The built-in local test cluster: real Slurm (4 nodes x 4 fake GPUs) + InfluxDB 1.x."""

from .cluster import Report, cancel_all_jobs, down, status, up
from .spec import Spec, resolve

__all__ = ["Report", "Spec", "cancel_all_jobs", "down", "resolve", "status", "up"]
