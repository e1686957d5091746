"""Load the fitted constants shipped in ``slurm_plugin/data/physics.json`` (stdlib only)."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from ..errors import ConfigError
from ..resources import data_dir

PHYSICS_FILE = "physics.json"


@lru_cache(maxsize=1)
def constants() -> dict[str, Any]:
    """The fitted constants (refit with ``scripts/refit_physics.py``)."""
    path = data_dir() / PHYSICS_FILE
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(str(path), "(file)", PHYSICS_FILE,
                          f"cannot load the fitted physics ({exc}); "
                          "regenerate it with scripts/refit_physics.py") from None


@lru_cache(maxsize=64)
def gpu_constants(model: str) -> dict[str, Any]:
    """Constants of one GPU model, e.g. ``"V100"`` (case-insensitive; remembered per spelling:
    the simulator asks about a million times a run)."""
    models = constants()["gpu_models"]
    for name, body in models.items():
        if name.lower() == model.lower():
            return body
    raise ConfigError("physics", "gpu_type", model,
                      f"no fitted power model; fitted models: {', '.join(sorted(models))}")


def node_constants() -> dict[str, Any]:
    return constants()["node"]
