"""GPU power as a function of utilisation and power cap; slowdown under a cap.

Fitted on the Haghshenas V100 nvidia-smi logs (power versus utilisation, idle power) and the
Zeus V100 power-limit sweep (time per epoch versus power limit). See docs/physics.md.
"""

from __future__ import annotations

from .constants import gpu_constants, node_constants

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable


def idle_power_w(model: str = "V100") -> float:
    """Power of a powered GPU that runs nothing."""
    return gpu_constants(model)["idle_power_w"]


def max_power_w(model: str = "V100") -> float:
    """The highest power limit (the board's default cap)."""
    return gpu_constants(model)["max_power_w"]


def gpu_power_w(util_pct: float, power_cap_w: float | None = None, model: str = "V100") -> float:
    """Power of a GPU busy ``util_pct`` percent of the time, never above the cap."""
    c = gpu_constants(model)
    u = min(100.0, max(0.0, util_pct)) / 100.0
    p = c["idle_power_w"] + c["dynamic_power_w"] * u ** c["util_gamma"]
    return min(p, power_cap_w) if power_cap_w else p


def clamp_cap_w(power_cap_w: float | None, model: str = "V100") -> float | None:
    """A requested cap moved into the board's settable range (None: no cap)."""
    if power_cap_w is None:
        return None
    c = gpu_constants(model)
    return min(c["max_power_w"], max(c["min_power_cap_w"], power_cap_w))


def gpu_cap_w(caps_w: Iterable[float | None], gpu_model: str = "V100") -> float | None:
    """The limit of a GPU whose running jobs ask for ``caps_w`` (None: that job asks none): no
    cap unless every one asks for one, then the highest, moved into ``gpu_model``'s settable
    range ("": as asked). The node applies it (``node/power_cap.py``), the simulator prices it."""
    caps = list(caps_w)
    if not caps or any(c is None for c in caps):
        return None
    if not gpu_model:
        return max(caps)                               # type: ignore[type-var]
    return clamp_cap_w(max(caps), gpu_model)          # type: ignore[type-var]


def cap_slowdown(solo_power_w: float, power_cap_w: float | None, model: str = "V100") -> float:
    """Time multiplier of a job drawing ``solo_power_w`` uncapped when capped at ``power_cap_w``:
    ``((P0 - idle) / (cap - idle)) ** beta`` below P0, else 1."""
    cap = clamp_cap_w(power_cap_w, model)
    if cap is None or cap >= solo_power_w:
        return 1.0
    c = gpu_constants(model)
    idle = c["idle_power_w"]
    return ((solo_power_w - idle) / max(1.0, cap - idle)) ** c["cap_beta"]


def capped_power_w(solo_power_w: float, power_cap_w: float | None, model: str = "V100") -> float:
    """Average power of that job under the cap."""
    cap = clamp_cap_w(power_cap_w, model)
    return solo_power_w if cap is None else min(solo_power_w, cap)


def cap_settings_w(model: str = "V100", step_w: float = 25.0) -> tuple[float, ...]:
    """The power caps worth trying, from the minimum settable to the maximum."""
    c = gpu_constants(model)
    lo, hi = c["min_power_cap_w"], c["max_power_w"]
    n = int((hi - lo) // step_w)
    return tuple(lo + i * step_w for i in range(n + 1)) + ((hi,) if lo + n * step_w < hi else ())


def node_base_power_w() -> float:
    """Power of a powered node outside its GPUs (CPUs, memory, fans): an assumption."""
    return node_constants()["base_power_w"]


def node_suspended_power_w() -> float:
    """Power of a node Slurm suspended (powered down, BMC on)."""
    return node_constants()["suspended_power_w"]


def node_resume_delay_s() -> float:
    """Boot time of a suspended node before its job starts."""
    return node_constants()["resume_delay_s"]
