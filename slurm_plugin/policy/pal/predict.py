"""What PAL predicts: a GPU's slowdown for a class (from the per-GPU profile; a GPU the profile
does not name counts as median, 1.0), a GPU set's (its slowest GPU, times the class's locality
penalty when the set spans nodes), and the classes in order of sensitivity to variability."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ...errors import ConfigError
from ...physics.variability import load_profile
from .freshness import measured_times
from .settings import CLASSES, SOURCE, PalSettings

Factors = Mapping[tuple[str, int], tuple[float, float, float, float]]
CLASS_INDEX = {c: i for i, c in enumerate(CLASSES)}


@dataclass(frozen=True, slots=True)
class Profile:
    factors: Factors                       # (node, GPU index) -> time multiplier per class
    order: tuple[str, ...] = CLASSES       # most variability-sensitive class first
    spread: Mapping[str, float] | None = None
    measured_s: Mapping[tuple[str, int], float] | None = None   # when each row was measured
    labels: Mapping[tuple[str, int], tuple[str, ...]] | None = None   # cluster per class

    def factor(self, node: str, index: int, cls: str) -> float:
        f = self.factors.get((node, index))
        return 1.0 if f is None else f[CLASS_INDEX[cls]]

    def rank(self, cls: str) -> int:
        """Queue tier of a class: how many classes are more sensitive (0: none; classes of
        equal spread share a tier, so without a profile every job is in tier 0)."""
        if not self.spread or cls not in self.spread:
            return 0
        mine = round(self.spread[cls], 6)
        return len({round(v, 6) for v in self.spread.values() if round(v, 6) > mine})


EMPTY = Profile({})


def sensitivity(factors: Factors) -> dict[str, float]:
    """Per class, the spread of its factors over the profiled GPUs: 90th over 10th percentile
    (1.0: every GPU alike)."""
    out = {}
    for c, i in CLASS_INDEX.items():
        vals = sorted(f[i] for f in factors.values())
        if not vals:
            out[c] = 1.0
            continue
        lo, hi = vals[int(0.1 * (len(vals) - 1))], vals[int(round(0.9 * (len(vals) - 1)))]
        out[c] = hi / lo if lo > 0 else 1.0
    return out


def make_profile(factors: Factors,
                 measured_s: Mapping[tuple[str, int], float] | None = None,
                 labels: Mapping[tuple[str, int], tuple[str, ...]] | None = None) -> Profile:
    spread = sensitivity(factors)
    order = tuple(sorted(CLASSES, key=lambda c: (-round(spread[c], 9), c)))
    return Profile(factors, order, spread, measured_s, labels)


_by_mapping: dict[int, tuple[object, Profile]] = {}
_by_file: dict[str, tuple[tuple[float, int], Profile]] = {}


def profile_of(values: Mapping[str, object], s: PalSettings) -> Profile:
    """The profile the policy plans with: the simulator's ``profile_factors`` (what it applies),
    else the site's ``profile`` file (read again when it changes), else none."""
    given = values.get("profile_factors")
    if given is not None:
        hit = _by_mapping.get(id(given))
        if hit is None or hit[0] is not given:
            hit = (given, make_profile(given))       # type: ignore[arg-type]
            _by_mapping.clear()
            _by_mapping[id(given)] = hit
        return hit[1]
    if not s.profile:
        return EMPTY
    try:
        st = os.stat(s.profile)
    except OSError as exc:
        raise ConfigError(SOURCE, "profile", s.profile,
                          f"cannot read the GPU profile ({exc.strerror}); write one with "
                          "wattctl profile-gpus import") from None
    stamp = (st.st_mtime, st.st_size)
    hit2 = _by_file.get(s.profile)
    if hit2 is None or hit2[0] != stamp:
        loaded = load_profile(s.profile)
        prof = loaded.by_gpu()
        if not prof:
            raise ConfigError(SOURCE, "profile", s.profile, "the profile names no GPU (node "
                              "and gpu_index columns); write one with wattctl profile-gpus import")
        hit2 = (stamp, make_profile(prof, measured_times(loaded, st.st_mtime),
                                    loaded.clusters_by_gpu()))
        _by_file[s.profile] = hit2
    return hit2[1]


def set_slowdown(factors: list[float], nodes: int, cls: str, s: PalSettings) -> float:
    """A job runs at its slowest GPU; across nodes it pays its class's locality penalty."""
    worst = max(factors) if factors else 1.0
    return worst * (s.penalty(cls) if nodes > 1 else 1.0)
