"""EaCO's settings: the ``[eaco]`` section of the site config plus the sharing keys it needs.

The defaults mirror ``site/defaults.toml`` (a unit test keeps them equal); docs/eaco.md says
which data each value comes from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ...errors import ConfigError

SHARE_MODES = ("shard", "mig")     # the ways a GPU may be shared (``share_modes``)


@dataclass(frozen=True, slots=True)
class EacoSettings:
    alpha: float = 0.5                 # objective: alpha * energy + (1 - alpha) * time per epoch
    util_threshold_pct: float = 100.0  # summed solo utilisation allowed on one shared GPU
    mem_threshold_pct: float = 90.0    # share of GPU memory the jobs' peaks may fill
    max_jobs_per_gpu: int = 4
    max_slowdown: float = 1.1          # largest co-located time / solo time a job accepts
    observe_epochs: int = 1            # epochs co-located before reconcile judges a group
    deadline_factor: float = 2.0       # no deadline given: submit + factor * solo run time
    pin_wait_s: float = 600.0          # a pinned job waiting this long is unpinned (0: never)
    allow_share: bool = True           # the site default for jobs that say nothing
    share_gres: str = "shard"          # "shard" or "mps": the Placement's share_mode
    # how a GPU may be shared: "shard" time-sliced (through share_gres), "mig" in MIG instances
    share_modes: tuple[str, ...] = ("shard",)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> EacoSettings:
        """Known keys from ``values`` (unknown ones are ignored), the rest from the defaults.
        ``share_modes`` may be a list or comma-separated words; an unknown mode is a
        ConfigError naming the key and the value."""
        kw: dict[str, Any] = {}
        for f in fields(cls):
            if f.name in values and values[f.name] is not None:
                kw[f.name] = type(f.default)(values[f.name])
        if "share_modes" in kw:
            kw["share_modes"] = _modes(values["share_modes"])
        return cls(**kw)


def _modes(raw: Any) -> tuple[str, ...]:
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    modes = tuple(str(m).strip().lower() for m in items)
    if not modes or any(m not in SHARE_MODES for m in modes) or len(set(modes)) < len(modes):
        raise ConfigError("eaco", "share_modes", raw,
                          f"give one or more of: {', '.join(SHARE_MODES)}, each once")
    return modes

