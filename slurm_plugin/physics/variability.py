"""Per-GPU performance variability (PAL's classes A-D, measured on TACC Longhorn V100s).

A profile is a CSV with columns ``PerfVar_classA`` .. ``PerfVar_classD`` (one row per GPU:
time multiplier of that GPU for the class, 1.0 = median GPU): PAL's 32gpu-variability.csv, or
a profile written by ``wattctl profile-gpus import`` (``gpu_profile``). Where it names the GPU
(``node`` and ``gpu_index``, or PAL's ``Node_ID`` and ``Local_GPU_ID``) the row is keyed by it.

A factor must be a finite number within ``MIN_FACTOR``..``MAX_FACTOR`` (0.1-10: a GPU at most
10x slower or faster than the median one); a value outside is an input error naming the file,
line, column and value (Longhorn's factors lie within 0.97-1.12).

The file is read as UTF-8, with or without a byte-order mark (as Excel writes it); column
names match in any case (``perfvar_classa``).

Simulated clusters (``factors``): the rows in a seeded shuffled order
(``random.Random(f"variability:{seed}")``), GPU by GPU in node and index order, cycling when
the cluster is larger than the profile.
"""

from __future__ import annotations

import csv
import math
import random
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..resources import data_dir

CLASSES = ("A", "B", "C", "D")
BUILTIN_FILE = "variability-longhorn-32gpu.csv"
MAX_FACTOR = 10.0               # a GPU more than 10x slower than the median one: not plausible
MIN_FACTOR = 1.0 / MAX_FACTOR   # ... or more than 10x faster


@dataclass(frozen=True, slots=True)
class VariabilityProfile:
    rows: tuple[tuple[float, float, float, float], ...]
    keys: tuple[tuple[str, int] | None, ...] = ()   # (node, GPU index) per row where named
    uuids: tuple[str, ...] = ()                     # the GPU's uuid per row ("" unknown)
    measured_at: tuple[str, ...] = ()               # when the row was measured ("" unknown)
    clusters: tuple[tuple[str, ...], ...] = ()      # cluster label per class ("" unknown)

    def by_gpu(self) -> dict[tuple[str, int], tuple[float, float, float, float]]:
        """Factors keyed by (node, GPU index), for the rows that name their GPU."""
        return {k: r for k, r in zip(self.keys, self.rows) if k is not None}

    def uuid_by_gpu(self) -> dict[tuple[str, int], str]:
        """The uuid of each GPU the profile names (where it gives one)."""
        return {k: u for k, u in zip(self.keys, self.uuids) if k is not None and u}

    def clusters_by_gpu(self) -> dict[tuple[str, int], tuple[str, ...]]:
        """The cluster labels per class (``A0``, ``outlier``, ``-``) of each GPU the profile
        names, where it gives them (``profile-gpus`` profiles)."""
        return {k: c for k, c in zip(self.keys, self.clusters) if k is not None and any(c)}

    def factors(self, gpu_count: int, seed: int) -> list[dict[str, float]]:
        """Time multiplier per class for each of ``gpu_count`` GPUs (cluster order)."""
        order = list(range(len(self.rows)))
        random.Random(f"variability:{seed}").shuffle(order)
        return [dict(zip(CLASSES, self.rows[order[i % len(order)]])) for i in range(gpu_count)]


# the columns a profile may have, by their name in lower case: a header is matched in any case
_COLUMNS = {name.lower(): name for name in (
    *(f"PerfVar_class{c}" for c in CLASSES), *(f"cluster_class{c}" for c in CLASSES),
    "node", "gpu_index", "uuid", "measured_at", "Node_ID", "Local_GPU_ID", "GPU_UUID")}


def load_profile(path: str | Path | None = None) -> VariabilityProfile:
    """Read a profile; ``None`` reads the built-in Longhorn one."""
    p = Path(path) if path else data_dir() / BUILTIN_FILE
    try:
        fh = p.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(f"variability: {p}: cannot read ({exc.strerror})") from None
    rows, keys, uuids, stamps, labels = [], [], [], [], []
    with fh:
        reader = csv.DictReader(fh)
        reader.fieldnames = [_COLUMNS.get(f.strip().lower(), f) for f in reader.fieldnames or []]
        cols = [f"PerfVar_class{c}" for c in CLASSES]
        missing = [c for c in cols if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"variability: {p}: line 1: field {missing[0]}: missing column; "
                             f"expected {', '.join(cols)}")
        for line, rec in enumerate(reader, start=2):
            vals = []
            for c in cols:
                try:
                    vals.append(parse_factor(rec[c]))
                except ValueError as exc:
                    raise InputError(f"variability: {p}: line {line}: field {c}: {exc}") from None
            rows.append(tuple(vals))
            keys.append(_key(rec))
            uuids.append((rec.get("uuid") or rec.get("GPU_UUID") or "").strip())
            stamps.append((rec.get("measured_at") or "").strip())
            labels.append(tuple((rec.get(f"cluster_class{c}") or "").strip() for c in CLASSES))
    if not rows:
        raise InputError(f"variability: {p}: line 2: no GPU rows")
    return VariabilityProfile(tuple(rows), tuple(keys), tuple(uuids), tuple(stamps),
                              tuple(labels))


def parse_factor(text: str | None) -> float:
    """One cell of a ``PerfVar_class*`` column: a finite factor within ``MIN_FACTOR`` ..
    ``MAX_FACTOR``; ValueError saying what is wrong and how to fix it."""
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(v):
        raise ValueError(f"{text!r} is not a finite number; give the GPU's time multiplier "
                         f"for the class (1.0 = the median GPU), or leave the GPU's row out")
    if v <= 0:
        raise ValueError(f"{v:g} must be positive (a time multiplier, 1.0 = the median GPU)")
    if not MIN_FACTOR <= v <= MAX_FACTOR:
        raise ValueError(f"{text.strip()} is outside {MIN_FACTOR:g}-{MAX_FACTOR:g}: a GPU "
                         f"{max(v, 1 / v):g}x {'slower' if v > 1 else 'faster'} than the median "
                         f"one is not plausible (a broken GPU or a value in other units); "
                         f"re-measure the GPU or leave its row out")
    return v


def _key(rec: dict[str, str]) -> tuple[str, int] | None:
    for ncol, icol in (("node", "gpu_index"), ("Node_ID", "Local_GPU_ID")):
        node, idx = (rec.get(ncol) or "").strip(), (rec.get(icol) or "").strip()
        if node and idx:
            try:
                return node, int(idx)
            except ValueError:
                return None
    return None
