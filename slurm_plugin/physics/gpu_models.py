"""The GPU model catalogue: per model and form factor, its memory, idle power, settable power
limits, power-versus-utilisation curve, slowdown under a power cap and co-location
interference, each constant with its source (``measured``, ``datasheet`` or
``carried-over``). Built by ``scripts/fit_gpu_models.py`` into
``slurm_plugin/data/gpu_models.json``; see docs/gpu-models.md.

Entries are named as NVML reports the GPU (``nvmlDeviceGetName``), normalised by
``normalise``: upper case, without the ``NVIDIA``/``Tesla`` prefix, spaces and underscores as
``-`` ("NVIDIA H100 80GB HBM3" is ``H100-80GB-HBM3``). Short aliases name one part each
("H100" is the SXM5 part, "A100" the SXM4 80 GB one; ``aliases()`` lists them).

A site's own calibrated constants (``wattctl calibrate-gpus``; the file named by the site key
``physics.site_gpu_models``, ``site_models.py``) are laid over the shipped entries: the site's
constant wins (``catalogue()``; ``shipped()`` is the file as shipped).

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
             "interference_util_threshold", "interference_k_mps", "colocation_pairs")
CURVE_UTILS = tuple(range(0, 101, 10))

_PREFIX = re.compile(r"^(NVIDIA|TESLA)[\s_-]+")
_SEP = re.compile(r"[\s_]+|-{2,}")


def normalise(name: str) -> str:
    """The catalogue's spelling of a GPU name: "NVIDIA A100 80GB PCIe" -> "A100-80GB-PCIE",
    "Tesla V100-SXM2-32GB" -> "V100-SXM2-32GB"."""
    s = _PREFIX.sub("", str(name).strip().upper())
    return _SEP.sub("-", s).strip("-")


@lru_cache(maxsize=1)
def shipped() -> dict:
    """The shipped file (``models``, ``aliases``, ``shares``, ``checks``, ``forms``), without
    a site's own entries."""
    path = data_dir() / GPU_MODELS_FILE
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(str(path), "(file)", GPU_MODELS_FILE,
                          f"cannot load the GPU model catalogue ({exc}); regenerate it with "
                          "scripts/fit_gpu_models.py") from None


# The site's own entries (``physics/site_models.py``): [path, where it was set], or None until
# the first lookup reads the site key ``physics.site_gpu_models`` (``use_site_models``).
_site_file: list[str] | None = None
# caches of what is computed from the catalogue elsewhere (``constants.gpu_constants``,
# ``job_cap.capped_job``, the co-location slowdowns), emptied with this module's own when the
# site's entries change
DERIVED_CACHES: list = []


def use_site_models(path: str | None, origin: str = "use_site_models") -> None:
    """Compute from now on with the site entries of ``path`` laid over the shipped catalogue
    ("": the shipped catalogue alone; None: the file the site config names, read at the next
    lookup). The constants, the cap model and the catalogue are read anew; a policy's own
    predictions remember what they computed, so call it before anything computes."""
    global _site_file
    _site_file = None if path is None else [path, origin]
    for cache in (site_entries, catalogue, _index, lookup, *DERIVED_CACHES):
        cache.cache_clear()


def site_models_file() -> tuple[str, str]:
    """(path, where it was set) of the site's entries in use; ("", ...) for none. Read once
    per process from the site config (file, ``$WATTBATCH_PHYSICS_SITE_GPU_MODELS``) unless
    ``use_site_models`` said. A site config that does not load is its loader's error to
    report (every command loads it first): the physics then computes with the shipped
    catalogue rather than fail a lookup far from the cause."""
    global _site_file
    if _site_file is None:
        from ..config import load
        try:
            cfg = load()
        except ConfigError:
            return "", "(site config not loaded)"
        _site_file = [cfg["physics.site_gpu_models"], cfg.source("physics.site_gpu_models")]
    return _site_file[0], _site_file[1]


@lru_cache(maxsize=1)
def site_entries() -> dict[str, dict]:
    """Entry name -> {constant: record} of the site's file; {} without one."""
    path, origin = site_models_file()
    if not path:
        return {}
    from .site_models import read_site_models
    return read_site_models(path, origin, shipped())


def site_values(name: str) -> dict[str, float]:
    """The constants the site's file gives entry ``name``, by value; {} for none."""
    return {c: rec["value"] for c, rec in site_entries().get(name, {}).items()
            if c != "colocation_pairs"}


@lru_cache(maxsize=1)
def catalogue() -> dict:
    """The catalogue the physics computes with: the shipped file, each entry with the site's
    calibrated constants in place of its own where ``physics.site_gpu_models`` names a file
    (the site's entry wins; docs/gpu-models.md, "Calibrating a site's GPUs")."""
    site = site_entries()
    if not site:
        return shipped()
    from .site_models import overlay
    return overlay(shipped(), site)


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
