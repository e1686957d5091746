"""The GPU model catalogue: per model and form factor, its memory, idle power, settable power
limits, power-versus-utilisation curve, slowdown under a power cap and co-location
interference, each constant with its source (``measured``, ``datasheet`` or
``carried-over``). Built by ``scripts/fit_gpu_models.py`` into
``slurm_plugin/data/gpu_models.json``; see docs/gpu-models.md.

Entries are named as NVML reports the GPU (``nvmlDeviceGetName``), normalised by
``normalise``: upper case, without the ``NVIDIA``/``Tesla`` prefix, spaces and underscores as
``-`` ("NVIDIA H100 80GB HBM3" is ``H100-80GB-HBM3``). Short aliases name one part each
("H100" is the SXM5 part, "A100" the SXM4 80 GB one; ``aliases()`` lists them).

Light to import (json, functools and the package's errors and resources only). The physics,
the simulator, the policies and the collector read a model's constants through
``constants.gpu_constants`` (the V100-SXM2-32GB entry is ``physics.json``'s ``V100``).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

from ..errors import ConfigError
from ..resources import data_dir

GPU_MODELS_FILE = "gpu_models.json"
SOURCES = ("measured", "datasheet", "carried-over")
CONSTANTS = ("tdp_w", "memory_mib", "idle_power_w", "max_power_w", "min_power_cap_w",
             "dynamic_power_w", "util_gamma", "cap_beta", "interference_k",
             "interference_util_threshold", "colocation_pairs")
CURVE_UTILS = tuple(range(0, 101, 10))

_PREFIX = re.compile(r"^(NVIDIA|TESLA)[\s_-]+")
_SEP = re.compile(r"[\s_]+|-{2,}")


def normalise(name: str) -> str:
    """The catalogue's spelling of a GPU name: "NVIDIA A100 80GB PCIe" -> "A100-80GB-PCIE",
    "Tesla V100-SXM2-32GB" -> "V100-SXM2-32GB"."""
    s = _PREFIX.sub("", str(name).strip().upper())
    return _SEP.sub("-", s).strip("-")


@lru_cache(maxsize=1)
def catalogue() -> dict:
    """The whole file (``models``, ``aliases``, ``shares``, ``checks``, ``forms``)."""
    path = data_dir() / GPU_MODELS_FILE
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(str(path), "(file)", GPU_MODELS_FILE,
                          f"cannot load the GPU model catalogue ({exc}); regenerate it with "
                          "scripts/fit_gpu_models.py") from None


@lru_cache(maxsize=1)
def _index() -> dict[str, str]:
    """Every accepted spelling, normalised -> entry name."""
    out = {}
    for key, m in catalogue()["models"].items():
        for n in (key, *m["nvml_names"], *m["aliases"]):
            out[normalise(n)] = key
    return out


def names() -> tuple[str, ...]:
    """The catalogued entries, in the catalogue's order (by chip generation)."""
    cat = catalogue()
    return tuple(cat.get("order") or cat["models"])


def aliases() -> dict[str, str]:
    """Short alias -> the entry it means."""
    return {a: key for key, m in catalogue()["models"].items() for a in m["aliases"]}


class GPUModel:
    """One catalogue entry: ``name``, ``nvml_names``, ``form_factor``, ``chip``, ``aliases``;
    each constant's value as an attribute (``idle_power_w``, ``cap_beta``, ...) and its
    ``{value, source, how, ...}`` record through ``constant(name)``."""

    __slots__ = ("name", "_body")

    def __init__(self, name: str, body: dict) -> None:
        self.name, self._body = name, body

    def __getattr__(self, attr: str):
        body = object.__getattribute__(self, "_body")
        if attr in CONSTANTS:
            return body[attr]["value"]
        if attr in ("nvml_names", "form_factor", "chip", "aliases", "memory_type"):
            return body[attr]
        raise AttributeError(attr)

    def __repr__(self) -> str:
        return f"GPUModel({self.name!r})"

    def constant(self, name: str) -> dict:
        return self._body[name]

    def sources(self) -> dict[str, str]:
        return {c: self._body[c]["source"] for c in CONSTANTS}

    def measured(self) -> tuple[str, ...]:
        return tuple(c for c in CONSTANTS if self._body[c]["source"] == "measured")

    def power_at_util_w(self, util_pct: float) -> float:
        u = min(100.0, max(0.0, float(util_pct))) / 100.0
        p = self.idle_power_w + self.dynamic_power_w * u ** self.util_gamma
        return min(p, self.max_power_w)

    def curve(self) -> list[tuple[int, float]]:
        """``power_at_util_w`` at 0, 10, ..., 100 %."""
        return [(u, round(self.power_at_util_w(u), 1)) for u in CURVE_UTILS]

    def cap_slowdown(self, solo_power_w: float, power_cap_w: float | None) -> float:
        """Time multiplier of a job drawing ``solo_power_w`` uncapped under ``power_cap_w``
        (moved into the settable range; None: uncapped), as ``physics.power.cap_slowdown``."""
        if power_cap_w is None:
            return 1.0
        cap = min(self.max_power_w, max(self.min_power_cap_w, power_cap_w))
        if cap >= solo_power_w:
            return 1.0
        idle = self.idle_power_w
        return ((solo_power_w - idle) / max(1.0, cap - idle)) ** self.cap_beta


@lru_cache(maxsize=64)
def lookup(name: str) -> GPUModel:
    """The entry a name means: an NVML name, an entry name or an alias, in any case and with
    or without the ``NVIDIA``/``Tesla`` prefix. A ConfigError names it and lists the close
    names."""
    key = _index().get(normalise(name))
    if key is None:
        import difflib
        spellings = sorted(set(_index()) | set(names()))
        close = difflib.get_close_matches(normalise(name), spellings, n=6, cutoff=0.6)
        listed = (f"close names: {', '.join(close)}" if close
                  else f"catalogued: {', '.join(names())}")
        raise ConfigError("gpu-models", "gpu_model", name,
                          f"not a catalogued GPU model; {listed} (wattctl gpu-models lists "
                          "them with their aliases)")
    return GPUModel(key, catalogue()["models"][key])


def power_at_util_w(model: str | GPUModel, util_pct: float) -> float:
    """Power of a GPU of ``model`` busy ``util_pct`` percent of the time (uncapped)."""
    m = model if isinstance(model, GPUModel) else lookup(model)
    return m.power_at_util_w(util_pct)
