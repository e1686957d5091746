"""MIG (Multi-Instance GPU): each model's instance profiles, the progress rate of a job in an
instance, the power of a GPU in MIG mode and the instance layout of a group of jobs.

Profiles come from ``slurm_plugin/data/mig_profiles.json`` (NVIDIA's MIG user guide; the
file and docs/gpu-models.md, "MIG profiles", give the provenance), per model family. A model
is any catalogued name (``gpu_models.lookup``: entry, NVML name or alias, any case); a
profile name is NVIDIA's (``3g.40gb``; ``MIG 3g.40gb`` and any case are read the same). V100,
A40 and L40S have no MIG: asking for their profiles is a ConfigError naming the model.

The physics is idealised (nothing here was measured on a GPU in MIG mode):

- Instances do not slow each other: a job's speed depends on its own instance only.
- A job that keeps ``u`` % of the whole GPU busy alone (its solo utilisation at its GPU count)
  needs that share of the GPU's streaming multiprocessors and, as its kernels read memory, of
  its memory bandwidth, which MIG splits with the memory slices (the L2 cache too). An instance
  of ``g`` of 7 compute slices and ``m`` of 8 memory slices gives it ``f = min(g/7, m/8)`` of
  both, so the job progresses at ``min(1, f / (u/100))`` of its solo speed (``mig_rate``). The
  smaller of the two shares is the pessimistic reading: a job bound by compute alone would get
  ``g/7``; one bound by bandwidth alone ``m/8``; a training job is bound by each in turn.
- A GPU in MIG mode draws its idle power plus each job's solo dynamic power times its rate,
  at most the model's top limit: ``colocation.shared_gpu_power_w``, the form of every shared
  GPU (``mig_gpu_power_w``).
- A job must fit its instance's memory: ``memory_mib``, the profile's memory slices of the
  model's catalogued memory (an upper bound: the driver keeps a little of each instance).

Layouts (``layout_valid``): the instances of one GPU take at most 7 compute slices, 8 memory
slices and 7 instances, and no profile more instances than it allows. NVIDIA's placement
table (which start slice each profile may take) rules out a few more layouts; it is not
modelled. ``mig_layout`` gives each job of a group the smallest profile (fewest compute
slices, then memory slices) whose rate keeps its slowdown within a limit and whose memory
holds its peak, and checks the layout beside the instances already taken.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from ..errors import ConfigError
from ..resources import data_dir
from .colocation import shared_gpu_power_w
from .constants import catalogue_entry, gpu_constants
from .gpu_models import DERIVED_CACHES

MIG_FILE = "mig_profiles.json"
COMPUTE_SLICES = 7          # compute slices of a GPU in MIG mode
MEMORY_SLICES = 8           # memory slices
MAX_INSTANCES = 7           # GPU instances on one GPU


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One GPU-instance profile of one model."""

    name: str               # NVIDIA's name, e.g. "3g.40gb"
    compute_slices: int     # of COMPUTE_SLICES
    memory_slices: int      # of MEMORY_SLICES
    memory_mib: int         # memory_slices / 8 of the model's memory
    max_instances: int      # instances of this profile one GPU holds at most

    @property
    def share(self) -> float:
        """The share of the GPU's compute and memory bandwidth a job in it gets: the smaller
        of its compute and memory fractions."""
        return min(self.compute_slices / COMPUTE_SLICES, self.memory_slices / MEMORY_SLICES)


@lru_cache(maxsize=1)
def _table() -> dict:
    path = data_dir() / MIG_FILE
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(str(path), "(file)", MIG_FILE,
                          f"cannot load the MIG profile table ({exc})") from None


@lru_cache(maxsize=64)
def _family(entry: str) -> dict | None:
    """The table's family of catalogue entry ``entry``; None: the model has no MIG."""
    return next((f for f in _table()["families"].values() if entry in f["models"]), None)


def mig_models() -> tuple[str, ...]:
    """The catalogue entries that have MIG, in the table's order."""
    return tuple(m for f in _table()["families"].values() for m in f["models"])


def supports_mig(model: str) -> bool:
    """Whether ``model`` (any catalogued name) has MIG; False for an uncatalogued name."""
    try:
        return _family(catalogue_entry(model)) is not None
    except ConfigError:
        return False


def normalise_profile(name: str) -> str:
    """NVIDIA's spelling of a profile name: ``"MIG 3G.40GB"`` -> ``"3g.40gb"``."""
    s = str(name).strip().lower()
    return s[4:].strip() if s.startswith("mig ") else s


@lru_cache(maxsize=256)
def mig_profiles(model: str) -> tuple[MigProfile, ...]:
    """The profiles of ``model``, smallest first (compute slices, then memory slices). A model
    without MIG, or not catalogued, is a ConfigError naming it."""
    entry = catalogue_entry(model)
    family = _family(entry)
    if family is None:
        raise ConfigError("physics", "gpu_type", model,
                          f"{entry} has no MIG; MIG runs on: {', '.join(mig_models())}")
    memory_mib = int(gpu_constants(model)["memory_mib"])
    out = [MigProfile(p["name"], p["compute_slices"], p["memory_slices"],
                      memory_mib * p["memory_slices"] // MEMORY_SLICES, p["max_instances"])
           for p in family["profiles"]]
    return tuple(sorted(out, key=lambda p: (p.compute_slices, p.memory_slices)))


def mig_profile(model: str, name: str) -> MigProfile:
    """The profile called ``name`` of ``model``; a ConfigError names both and lists the
    model's profiles."""
    want = normalise_profile(name)
    profiles = mig_profiles(model)
    for p in profiles:
        if p.name == want:
            return p
    raise ConfigError("physics", "mig_profile", name,
                      f"not a MIG profile of {catalogue_entry(model)}; its profiles: "
                      f"{', '.join(p.name for p in profiles)}")


def mig_rate(profile: MigProfile, util_pct: float) -> float:
    """Progress rate, against its solo speed, of a job of solo utilisation ``util_pct`` (of
    the whole GPU) alone in an instance of ``profile``: ``min(1, share / (u/100))``."""
    if util_pct <= 0:
        return 1.0
    return min(1.0, profile.share / (util_pct / 100.0))


def mig_gpu_power_w(dynamic_w: Sequence[float], rates: Sequence[float], model: str,
                    power_cap_w: float | None = None) -> float:
    """Power of a GPU of ``model`` in MIG mode whose jobs draw ``dynamic_w`` alone and progress
    at ``rates``: idle power plus each job's dynamic power times its rate, capped (the form of
    every shared GPU, ``colocation.shared_gpu_power_w``)."""
    return shared_gpu_power_w(dynamic_w, rates, power_cap_w=power_cap_w, model=model)


@lru_cache(maxsize=8192)
def smallest_profile(model: str, util_pct: float, need_mib: float, max_slowdown: float,
                     mem_fill_pct: float = 100.0) -> MigProfile | None:
    """The smallest profile of ``model`` in which a job of solo utilisation ``util_pct`` runs
    at a slowdown of at most ``max_slowdown`` and whose memory, filled to ``mem_fill_pct``,
    holds the job's peak ``need_mib``; None when no profile does."""
    for p in mig_profiles(model):
        if mig_rate(p, util_pct) * max_slowdown >= 1.0 - 1e-12 \
                and need_mib <= p.memory_mib * mem_fill_pct / 100.0:
            return p
    return None


def layout_valid(profiles: Sequence[MigProfile]) -> bool:
    """Whether one GPU can hold instances of ``profiles`` at once: at most 7 compute slices,
    8 memory slices and 7 instances, and no profile more instances than it allows."""
    if len(profiles) > MAX_INSTANCES:
        return False
    if sum(p.compute_slices for p in profiles) > COMPUTE_SLICES \
            or sum(p.memory_slices for p in profiles) > MEMORY_SLICES:
        return False
    counts: dict[str, int] = {}
    for p in profiles:
        counts[p.name] = counts.get(p.name, 0) + 1
        if counts[p.name] > p.max_instances:
            return False
    return True


def mig_layout(model: str, jobs: Sequence[tuple[float, float]], max_slowdown: float,
               taken: Sequence[MigProfile] = (),
               mem_fill_pct: float = 100.0) -> tuple[MigProfile, ...] | None:
    """The profile of each job of ``jobs`` (solo utilisation %, peak memory MiB) on one GPU of
    ``model`` beside the instances ``taken``: each job's ``smallest_profile``; None when a job
    has none or the instances together are no valid layout."""
    chosen = []
    for util_pct, need_mib in jobs:
        p = smallest_profile(model, util_pct, need_mib, max_slowdown, mem_fill_pct)
        if p is None:
            return None
        chosen.append(p)
    return tuple(chosen) if layout_valid(list(taken) + chosen) else None


# a site's catalogue (``gpu_models.use_site_models``) may give a model other memory
DERIVED_CACHES.extend((mig_profiles, smallest_profile))
