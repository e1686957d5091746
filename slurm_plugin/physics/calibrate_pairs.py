"""Fit a GPU model's co-location constants to a calibration run's co-located pair
(``wattctl calibrate-gpus``; the job's side is ``node/calibrate_pair.py``). Pure.

A pair is the fixed workload of one load level (solo utilisation ``u``) run as two copies
sharing the GPU, time-sliced and through MPS; its time over the same workload's alone
(uncapped) is the slowdown ``s`` of each copy. The physics' form with both copies at ``u``
(``colocation.py``), ``s = 1 + k * (u/100) * max(0, 2u/100 - t)``, with the model's threshold
``t`` kept, gives

    k = (s - 1) / ((u/100) * max(0, 2u/100 - t))

Time-sliced, ``k`` is ``interference_k`` and the pair's normalised speeds ``1/s`` are the
measured pair of that class (``colocation_pairs["c|c"]``, merged over the shipped table);
through MPS, ``k`` is ``interference_k_mps``. A pair faster than alone beyond noise or slower
than ``MAX_PAIR_SLOWDOWN`` is a ``CalibrationError`` (nothing is written); a mode not measured
(the deadline, no MPS) leaves its constants out with a note.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from ..errors import InputError
from .calibrate_fit import CalibrationError, Constant
from .classes import job_class
from .colocation import MODES

MIN_PAIR_SLOWDOWN = 0.95   # a pair faster than alone by more than this is not a measurement
MAX_PAIR_SLOWDOWN = 4.0
# the constants each mode's pair gives (``MODES``, in the order the job runs them)
PAIR_CONSTANTS = {"time-sliced": ("interference_k", "colocation_pairs"),
                  "mps": ("interference_k_mps",)}


@dataclass(frozen=True)
class PairPoint:
    """One mode's pair: the level run twice, its solo utilisation, the fixed workload's time
    alone (uncapped) and as one of the two copies."""
    mode: str
    level: str
    util_pct: float
    solo_time_s: float
    pair_time_s: float


@dataclass(frozen=True)
class Colocation:
    """What the pair fit keeps of the model: its ``interference_util_threshold`` (as the
    physics computes with it) and the shipped table of measured pairs, which the calibrated
    pair joins."""
    util_threshold: float
    shipped_pairs: Mapping[str, Sequence[float]]


def fit_pairs(pairs: Sequence[PairPoint], colocation: Colocation
              ) -> tuple[dict[str, Constant], list[str]]:
    """(constants, notes) of the pair samples: ``interference_k`` and ``colocation_pairs``
    from the time-sliced pair, ``interference_k_mps`` from the MPS one; a note for each mode
    without a sample or whose utilisation leaves the form no interference to fit."""
    by_mode: dict[str, PairPoint] = {}
    for p in pairs:
        if p.mode not in MODES:
            raise CalibrationError(f"a co-located pair's mode {p.mode!r}: not one of "
                                   f"{', '.join(MODES)}")
        if p.mode in by_mode:
            raise CalibrationError(f"two {p.mode} pairs in one run: one per mode")
        by_mode[p.mode] = p
    out: dict[str, Constant] = {}
    notes = []
    t = colocation.util_threshold
    for mode, names in PAIR_CONSTANTS.items():
        p = by_mode.get(mode)
        if p is None:
            notes.append(f"{' and '.join(names)} not measured: no {mode} pair in the run (the "
                         "job's notes say why)")
            continue
        s = pair_slowdown(p)
        u = p.util_pct / 100
        reach = u * max(0.0, 2 * u - t)
        if reach <= 0:
            notes.append(f"{' and '.join(names)} not measured: {p.level} at {p.util_pct:.1f} % "
                         f"alone, twice, is not above the threshold {t:g}: the form has no "
                         "interference to fit")
            continue
        k = max(0.0, (s - 1) / reach)
        how = (f"{p.level} ({p.util_pct:.1f} % alone) run as two copies sharing the GPU "
               f"{mode}: slowdown {s:.4f} ({p.pair_time_s:.3f} s against {p.solo_time_s:.3f} "
               "s alone, uncapped); k = (s - 1) / ((u/100) * max(0, 2u/100 - t)), the "
               f"model's t {t:g} kept")
        out[names[0]] = Constant(k, None, 1, how)
        if mode == "time-sliced" and not _is_class(p.level):
            notes.append(f"colocation_pairs not measured: the pair's load {p.level} is no job "
                         "class (interference_k only)")
        elif mode == "time-sliced":
            key = f"{p.level}|{p.level}"
            table = {name: list(v) for name, v in colocation.shipped_pairs.items()}
            out["colocation_pairs"] = Constant(
                {**table, key: [1 / s, 1 / s]}, None, 1,
                f"the shipped pairs, and {key} measured: normalised speed 1/{s:.4f} of each "
                f"copy ({how})")
    return out, notes


def _is_class(level: str) -> bool:
    try:
        return job_class(level).name == level
    except InputError:
        return False


def pair_slowdown(p: PairPoint) -> float:
    """The pair's slowdown, refused (naming the mode and value) when it is not physical."""
    for what, v in (("alone", p.solo_time_s), ("as a pair", p.pair_time_s)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise CalibrationError(f"the {p.mode} pair: the fixed workload {p.level} took "
                                   f"{v!r} s {what}: not a time")
    if not 0 < p.util_pct <= 100:
        raise CalibrationError(f"the {p.mode} pair: {p.level}'s utilisation alone "
                               f"{p.util_pct!r} %: not a reading")
    s = p.pair_time_s / p.solo_time_s
    if s < MIN_PAIR_SLOWDOWN:
        raise CalibrationError(f"the {p.mode} pair ran faster than alone: slowdown {s:.3f} "
                               f"({p.pair_time_s:.3f} s against {p.solo_time_s:.3f} s), below "
                               f"{MIN_PAIR_SLOWDOWN:g}")
    if s > MAX_PAIR_SLOWDOWN:
        raise CalibrationError(f"the {p.mode} pair ran {s:.3f} times slower than alone "
                               f"({p.pair_time_s:.3f} s against {p.solo_time_s:.3f} s), more "
                               f"than {MAX_PAIR_SLOWDOWN:g}")
    return s
