"""EaCO's settings: the ``[eaco]`` section of the site config plus the sharing keys it needs.

The defaults mirror ``site/defaults.toml`` (a unit test keeps them equal); docs/eaco.md says
which data each value comes from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


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

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> EacoSettings:
        """Known keys from ``values`` (unknown ones are ignored), the rest from the defaults."""
        kw: dict[str, Any] = {}
        for f in fields(cls):
            if f.name in values and values[f.name] is not None:
                kw[f.name] = type(f.default)(values[f.name])
        return cls(**kw)

