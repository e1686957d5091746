"""Pure policies: frozen inputs in, decisions out. Nothing here touches Slurm, InfluxDB or NVML.

Import rule: ``policy/`` and ``physics/`` import nothing from ``slurm/``, ``telemetry/``,
``node/`` or ``sim/`` (checked by ``tests/unit/test_layering.py``).
"""

from .base import Context, Policy
from .registry import get_policy, policy_names

__all__ = ["Context", "Policy", "get_policy", "policy_names"]
