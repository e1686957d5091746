"""Per-GPU performance variability (PAL's classes A-D, measured on TACC Longhorn V100s).

A profile is a CSV with columns ``PerfVar_classA`` .. ``PerfVar_classD`` (one row per GPU:
time multiplier of that GPU for the class, 1.0 = median GPU): PAL's 32gpu-variability.csv, or
a profile written by ``wattctl profile-gpus import`` (``gpu_profile``). Where it names the GPU
(``node`` and ``gpu_index``, or PAL's ``Node_ID`` and ``Local_GPU_ID``) the row is keyed by it.

Simulated clusters (``factors``): the rows in a seeded shuffled order
(``random.Random(f"variability:{seed}")``), GPU by GPU in node and index order, cycling when
the cluster is larger than the profile.
"""

from __future__ import annotations

import csv
import random
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..resources import data_dir

CLASSES = ("A", "B", "C", "D")
BUILTIN_FILE = "variability-longhorn-32gpu.csv"


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


def load_profile(path: str | Path | None = None) -> VariabilityProfile:
    """Read a profile; ``None`` reads the built-in Longhorn one."""
    p = Path(path) if path else data_dir() / BUILTIN_FILE
    try:
        fh = p.open(newline="")
    except OSError as exc:
        raise InputError(f"variability: {p}: cannot read ({exc.strerror})") from None
    rows, keys, uuids, stamps, labels = [], [], [], [], []
    with fh:
        reader = csv.DictReader(fh)
        cols = [f"PerfVar_class{c}" for c in CLASSES]
        missing = [c for c in cols if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"variability: {p}: line 1: field {missing[0]}: missing column; "
                             f"expected {', '.join(cols)}")
        for line, rec in enumerate(reader, start=2):
            vals = []
            for c in cols:
                try:
                    v = float(rec[c])
                except (TypeError, ValueError):
                    raise InputError(f"variability: {p}: line {line}: field {c}: "
                                     f"{rec[c]!r} is not a number") from None
                if v <= 0:
                    raise InputError(f"variability: {p}: line {line}: field {c}: "
                                     f"{v} must be positive")
                vals.append(v)
            rows.append(tuple(vals))
            keys.append(_key(rec))
            uuids.append((rec.get("uuid") or rec.get("GPU_UUID") or "").strip())
            stamps.append((rec.get("measured_at") or "").strip())
            labels.append(tuple((rec.get(f"cluster_class{c}") or "").strip() for c in CLASSES))
    if not rows:
        raise InputError(f"variability: {p}: line 2: no GPU rows")
    return VariabilityProfile(tuple(rows), tuple(keys), tuple(uuids), tuple(stamps),
                              tuple(labels))


def _key(rec: dict[str, str]) -> tuple[str, int] | None:
    for ncol, icol in (("node", "gpu_index"), ("Node_ID", "Local_GPU_ID")):
        node, idx = (rec.get(ncol) or "").strip(), (rec.get(icol) or "").strip()
        if node and idx:
            try:
                return node, int(idx)
            except ValueError:
                return None
    return None
