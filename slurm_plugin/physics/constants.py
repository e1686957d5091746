"""Load the fitted constants shipped in ``slurm_plugin/data/physics.json`` (stdlib only), and
the per-GPU-model constants of any catalogued model (``data/gpu_models.json``, docs/gpu-models.md)
under the same keys."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from ..errors import ConfigError
from ..resources import data_dir
from .gpu_models import DERIVED_CACHES, lookup, site_values

PHYSICS_FILE = "physics.json"
# The catalogue entry that is physics.json's "V100" (the measured board: every constant of it
# there is physics.json's; a unit test holds them equal).
REFERENCE_ENTRY = "V100-SXM2-32GB"
# The catalogue constants a model's dict carries, under physics.json's keys.
MODEL_KEYS = ("idle_power_w", "dynamic_power_w", "util_gamma", "cap_beta", "max_power_w",
              "min_power_cap_w", "memory_mib")
# The catalogue constants a model's co-location dict carries (``colocation_constants``).
COLOCATION_KEYS = ("colocation_pairs", "interference_k", "interference_util_threshold",
                   "interference_k_mps")


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


@lru_cache(maxsize=256)
def gpu_constants(model: str) -> dict[str, Any]:
    """Constants of one GPU model: ``idle_power_w``, ``dynamic_power_w``, ``util_gamma``,
    ``cap_beta``, ``max_power_w``, ``min_power_cap_w``, ``memory_mib``.

    ``model`` is a name of physics.json (``"V100"``, any case) or any catalogued name: an entry,
    an NVML name or an alias, in any case (``"H100"``, ``"NVIDIA A100-SXM4-80GB"``). The
    V100 (and every spelling of its entry, V100-SXM2-32GB) gives physics.json's own dict; any
    other model its catalogue values; a site's calibration (``physics.site_gpu_models``) wins
    over either. An unknown name is a ConfigError naming it and listing
    the close names. Remembered per spelling: the simulator asks about a million times a run."""
    models = constants()["gpu_models"]
    name = next((n for n in models if n.lower() == model.lower()), None)
    if name is not None and name != "V100":
        return models[name]
    entry = _lookup(model)
    if entry.name == REFERENCE_ENTRY:        # a site's calibration of it wins, key by key
        site = {k: v for k, v in site_values(REFERENCE_ENTRY).items() if k in MODEL_KEYS}
        return {**models["V100"], **site} if site else reference_constants()
    return {k: getattr(entry, k) for k in MODEL_KEYS}


def reference_constants() -> dict[str, Any]:
    """physics.json's V100: the board the workload classes were measured on, whatever a site
    calibrated its own V100s to."""
    return constants()["gpu_models"]["V100"]


@lru_cache(maxsize=256)
def colocation_constants(model: str) -> dict[str, Any]:
    """The co-location constants of one GPU model (``physics/colocation.py``), under the
    catalogue's keys: ``colocation_pairs`` (``"a|b"`` -> normalised speeds ``[a, b]`` of
    pairs measured time-sliced), ``interference_k``, ``interference_util_threshold`` and
    ``interference_k_mps`` (the MPS pair's k).

    ``model`` as ``gpu_constants`` takes it. The catalogue's values, a site's calibration
    winning constant by constant; the V100 entry's are physics.json's ``pairs`` and
    ``interference`` (a unit test holds them equal)."""
    entry = _lookup(model)
    return {k: getattr(entry, k) for k in COLOCATION_KEYS}


DERIVED_CACHES.extend((gpu_constants, colocation_constants))


def _lookup(model: str):
    """The catalogue entry of ``model``; a ConfigError naming the ``gpu_type`` and the close
    names for an unknown one."""
    try:
        return lookup(model)
    except ConfigError as exc:
        raise ConfigError("physics", "gpu_type", model, exc.fix) from None


def catalogue_entry(model: str) -> str:
    """The catalogue entry a model name means (``"V100"`` -> ``"V100-SXM2-32GB"``); a
    ConfigError as ``gpu_constants``'s for an unknown one."""
    return _lookup(model).name


def node_constants() -> dict[str, Any]:
    return constants()["node"]
