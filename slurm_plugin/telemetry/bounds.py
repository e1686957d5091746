"""Physical bounds of every telemetry value a policy may use, checked where it is read.

A value that is not a number, not finite, negative or beyond what any GPU, grid or training
job can produce (a forged or corrupt point) raises ``Rejected``, which names the source, the
field and the value; readers leave that point out with a warning, never use it.
"""

from __future__ import annotations

import math

from ..errors import InputError

# field -> (lowest, highest) accepted. Highest: no GPU draws 5 kW; an energy counter since
# boot of 1e13 J is 4,000 years at 80 W; no grid has emitted 5,000 gCO2/kWh (coal ~1,000).
LIMITS: dict[str, tuple[float, float]] = {
    "power_w": (0.0, 5000.0),
    "power_limit_w": (0.0, 5000.0),
    "energy_j": (0.0, 1e13),
    "util_pct": (0.0, 100.0),
    "mem_used_mib": (0.0, 1e7),
    "gco2_per_kwh": (0.0, 5000.0),
    "samples_per_s": (0.0, 1e7),
    "step": (0.0, 1e13),
    "epoch": (0.0, 1e9),
    "steps_per_epoch": (0.0, 1e13),
    "total_steps": (0.0, 1e13),
    "restart_count": (0.0, 1e6),
    "started_s": (0.0, 1e11),
    "batch_size": (0.0, 1e9),     # a global batch (0: not said)
    "lr_scale": (0.0, 1e6),
    "time": (0.0, 1e11),          # epoch seconds, before the year 5138
}


class Rejected(InputError):
    """A telemetry value outside its bounds."""


def checked(value: object, field: str, where: str, default: float | None = None) -> float:
    """``value`` as a float within ``LIMITS[field]``; None reads ``default`` when given."""
    if value is None and default is not None:
        return default
    lo, hi = LIMITS[field]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Rejected(f"telemetry: {where}: {field} = {value!r} is not a number")
    number = float(value)
    if not math.isfinite(number) or not lo <= number <= hi:
        raise Rejected(f"telemetry: {where}: {field} = {value!r} is outside {lo:g}..{hi:g}")
    return number
