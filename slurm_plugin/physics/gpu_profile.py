"""Per-GPU variability profiles built from measurement runs, as PAL classifies GPUs.

Input: CSV files of per-GPU benchmark runs in the format of PAL's Longhorn measurements
(``*-longhorn-agg.csv``): one row per run with the application (``exp`` column, else the file
name), where the GPU sits (``node``, optional ``cabinet``, ``device`` or ``dev_id``), its
``uuid`` and its run time (``time``, else ``perf``, larger is slower; PAL's files record times).
Files are UTF-8, with or without a byte-order mark. A run without a uuid (no column, or an empty
value) is named by its node and ``device`` (the physical index); with only ``dev_id`` (which may
count the visible devices alone) it needs its uuid.

Application names (``app_of_name``) match case-insensitively, and a name starting with a known
application counts as it (its family: ``ResNet50``, ``resnet-101`` are resnet; ``bert-large``
is bert). Runs of other applications are ignored and counted per name (``read_runs``'s
``ignored``; ``profile-gpus import`` warns about them); when no run is of a known application
the error lists the names found.

Method, per application class A-D (``APP_CLASSES``: A resnet, B and C bert, D pagerank, as PAL's
``profiles.json``): a GPU's performance is the median of its runs; GPUs above mean + 3 sigma are
outliers and kept apart; the rest are clustered by 1-D k-means with k chosen by silhouette over
2-10; a GPU's factor is its cluster's centroid (an outlier: its own value) over the median
centroid, the centroid of the cluster holding the median GPU. A GPU with no run of a class
counts as median (1.0). A factor outside ``variability.MIN_FACTOR``..``MAX_FACTOR`` (0.1-10)
is an input error naming the GPU (the profile could not be read).

Output: one row per GPU (``node``, ``gpu_index``, ``uuid``, ``PerfVar_classA..D``,
``cluster_classA..D``, ``perf_classA..D``, ``measured_at``), readable by
``variability.load_profile``.
"""

from __future__ import annotations

import csv
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from .kmeans import best_k
from .variability import MAX_FACTOR, MIN_FACTOR

CLASSES = ("A", "B", "C", "D")
APP_CLASSES: dict[str, tuple[str, ...]] = {"resnet": ("A",), "bert": ("B", "C"),
                                          "pagerank": ("D",)}
OUTLIER = "outlier"
UNMEASURED = "-"
TIME_COLUMNS = ("time", "perf")
DEVICE_COLUMNS = ("device", "dev_id")


@dataclass
class GpuRuns:
    node: str
    index: int | None
    uuid: str
    times: dict[str, list[float]] = field(default_factory=dict)   # class -> run times


@dataclass(frozen=True, slots=True)
class ProfileRow:
    node: str
    gpu_index: int | None
    uuid: str
    factors: tuple[float, float, float, float]
    clusters: tuple[str, str, str, str]
    perf: tuple[float | None, ...]


APP_COLUMNS = ("exp", "model", "app")     # the column naming a run's application
_KNOWN = "resnet: class A, bert: B and C, pagerank: D"


def app_of_name(name: str, known) -> str | None:
    """The known application ``name`` names: itself (any case), else the longest known name it
    starts with (``resnet50`` -> ``resnet``); None when it names none."""
    name = name.strip().lower()
    if name in known:
        return name
    return max((k for k in known if name.startswith(k)), key=len, default=None)


def _app_of(path: Path, rec: dict[str, str], known) -> tuple[str, str | None]:
    """A run's application as the file names it and the known application that is (None: not
    known): its ``exp`` (``model``, ``app``) column, else the part of the file name that names a
    known application (``resnet-longhorn-agg.csv``, ``frontera-pagerank-agg.csv``), else the
    file name's first part."""
    for c in APP_COLUMNS:
        v = (rec.get(c) or "").strip().lower()
        if v:
            return v, app_of_name(v, known)
    parts = path.name.lower().split(".")[0].split("-")
    found = next(((p, a) for p in parts if (a := app_of_name(p, known))), None)
    return found or (parts[0], None)


def _location(rec: dict[str, str]) -> tuple[str, int | None, bool]:
    """(node name, device index, strong) of a run; ("", None, False) when the file does not say
    (-1). A ``device`` column is the physical index (strong); ``dev_id`` may be the index among
    the visible devices (0 under CUDA_VISIBLE_DEVICES), so it yields to a ``device`` elsewhere."""
    node = (rec.get("node") or "").strip()
    cab = (rec.get("cabinet") or "").strip()
    if node in ("", "-1"):
        return "", None, False
    try:
        node = str(int(float(node)))
    except ValueError:
        pass
    name = f"{cab}-{node}" if cab and cab != "-1" else node
    for c in DEVICE_COLUMNS:
        v = (rec.get(c) or "").strip()
        if v not in ("", "-1"):
            try:
                return name, int(float(v)), c == "device"
            except ValueError:
                return name, None, False
    return name, None, False


def read_runs(paths: list[Path], app_classes: dict[str, tuple[str, ...]] | None = None,
              ignored: dict[str, int] | None = None) -> list[GpuRuns]:
    """Every run of every file, grouped per GPU: by node and device where a ``device`` column
    says it, else by uuid (a uuid seen with a device elsewhere joins that GPU). Runs of an
    application no class uses are counted per name in ``ignored``; InputError listing the
    names when no run is of a known application."""
    app_classes = app_classes or APP_CLASSES
    other: dict[str, int] = {}
    runs: list[tuple[str, str, int | None, bool, tuple[str, ...], float]] = []
    strong_at: dict[str, tuple[str, int, Path, int]] = {}
    for path in paths:
        try:
            fh = path.open(newline="", encoding="utf-8-sig")
        except OSError as exc:
            raise InputError(f"profile-gpus: {path}: cannot read ({exc.strerror})") from None
        with fh:
            reader = csv.DictReader(fh)
            cols = reader.fieldnames or []
            tcol = next((c for c in TIME_COLUMNS if c in cols), None)
            for need, have in (("uuid", "uuid" in cols or "device" in cols),
                               ("node", "node" in cols), ("time or perf", tcol is not None),
                               ("device or dev_id", any(c in cols for c in DEVICE_COLUMNS))):
                if not have:
                    raise InputError(f"profile-gpus: {path}: line 1: column {need}: missing; "
                                     f"a measurement file needs uuid, node, device and a time "
                                     f"or perf column (without uuid, node and device name "
                                     f"the GPU)")
            for line, rec in enumerate(reader, start=2):
                raw = rec.get(tcol)
                try:
                    t = float(raw)
                except (TypeError, ValueError):
                    raise InputError(f"profile-gpus: {path}: line {line}: column {tcol}: "
                                     f"{raw!r} is not a number") from None
                if not math.isfinite(t) or t <= 0:
                    raise InputError(f"profile-gpus: {path}: line {line}: column {tcol}: "
                                     f"{raw!r}: a run time must be a positive number")
                uuid = (rec.get("uuid") or "").strip()
                node, dev, strong = _location(rec)
                if not uuid and not strong:
                    raise InputError(
                        f"profile-gpus: {path}: line {line}: column uuid: empty, and no node "
                        f"and device name the GPU; give the run its GPU's uuid (nvidia-smi "
                        f"--query-gpu=uuid --format=csv) or its node and physical device index "
                        f"(a device column)")
                if strong and uuid:
                    seen = strong_at.get(uuid)
                    if seen is None:
                        strong_at[uuid] = (node, dev, path, line)
                    elif (seen[0], seen[1]) != (node, dev):
                        raise InputError(
                            f"profile-gpus: {path}: line {line}: column uuid: duplicate GPU "
                            f"uuid {uuid!r}: at {node} device {dev} here, at {seen[0]} device "
                            f"{seen[1]} in {seen[2]} line {seen[3]}")
                name, app = _app_of(path, rec, app_classes)
                classes = app_classes.get(app, ()) if app else ()
                if not classes:
                    other[name] = other.get(name, 0) + 1
                runs.append((uuid, node, dev, strong, classes, t))
    if ignored is not None:
        for name, n in other.items():
            ignored[name] = ignored.get(name, 0) + n
    if runs and len(runs) == sum(other.values()):
        found = ", ".join(f"{k!r} ({n} runs)" for k, n in sorted(other.items()))
        raise InputError(f"profile-gpus: no run of a profiled application ({_KNOWN}; a name "
                         f"starting with one counts as it) in the input files; they hold "
                         f"{found}: name the application in an exp column")
    gpus: dict[tuple, GpuRuns] = {}
    for uuid, node, dev, strong, classes, t in runs:
        if uuid in strong_at:
            node, dev = strong_at[uuid][0], strong_at[uuid][1]
            key = ("loc", node, dev)
        elif node and dev is not None:
            key = ("loc", node, dev)
        else:
            key = ("uuid", uuid)
        g = gpus.get(key)
        if g is None:
            g = gpus[key] = GpuRuns(node, dev, uuid)
        elif not g.uuid:
            g.uuid = uuid   # runs without a uuid: the first one another run of the GPU gives
        elif uuid and g.uuid != uuid and uuid.startswith("GPU-") and not g.uuid.startswith("GPU-"):
            g.uuid = uuid   # a real GPU uuid names the GPU better than a file's own label
        for c in classes:
            g.times.setdefault(c, []).append(t)
    return list(gpus.values())


def classify(values: list[float]) -> tuple[list[float], list[str]]:
    """PAL's classification of one class: (factor, cluster label) per value."""
    mean = statistics.fmean(values)
    sd = statistics.pstdev(values) if len(values) > 1 else 0.0
    limit = mean + 3 * sd
    inliers = [v for v in values if not (sd > 0 and v > limit)]
    clus = best_k(inliers)
    order = sorted(range(len(inliers)), key=inliers.__getitem__)
    median_label = clus.labels[order[(len(order) - 1) // 2]]
    ref = clus.centroids[median_label]
    factors, labels = [], []
    it = iter(clus.labels)
    for v in values:
        if sd > 0 and v > limit:
            factors.append(v / ref)
            labels.append(OUTLIER)
        else:
            lab = next(it)
            factors.append(clus.centroids[lab] / ref)
            labels.append(str(lab))
    return factors, labels


def build_profile(gpus: list[GpuRuns]) -> list[ProfileRow]:
    if not any(g.times for g in gpus):
        raise InputError(f"profile-gpus: no run of a profiled application ({_KNOWN}) in the "
                         f"input files")
    per_class: dict[str, dict[int, tuple[float, str, float]]] = {}
    for c in CLASSES:
        idx = [i for i, g in enumerate(gpus) if g.times.get(c)]
        if not idx:
            continue
        vals = [statistics.median(gpus[i].times[c]) for i in idx]
        factors, labels = classify(vals)
        for i, f in zip(idx, factors):
            if not MIN_FACTOR <= f <= MAX_FACTOR:
                g = gpus[i]
                raise InputError(
                    f"profile-gpus: GPU {g.node or g.uuid}"
                    f"{'' if g.index is None else f' device {g.index}'} (uuid {g.uuid!r}): "
                    f"class {c}: its runs take {f:.3g}x the median GPU's time, outside "
                    f"{MIN_FACTOR:g}-{MAX_FACTOR:g}: a broken GPU or runs in other units; "
                    f"re-measure it or leave its runs out")
        per_class[c] = {i: (f, lab, v) for i, f, lab, v in zip(idx, factors, labels, vals)}
    rows = []
    for i, g in enumerate(gpus):
        got = [per_class.get(c, {}).get(i) for c in CLASSES]
        if not any(got):
            continue   # only runs of applications no class uses: no profile (counts as median)
        rows.append(ProfileRow(
            g.node, g.index, g.uuid,
            tuple(x[0] if x else 1.0 for x in got),                  # unmeasured: median
            tuple(f"{c}{x[1]}" if x and x[1] != OUTLIER else (OUTLIER if x else UNMEASURED)
                  for c, x in zip(CLASSES, got)),
            tuple(x[2] if x else None for x in got)))
    rows.sort(key=lambda r: (r.node == "", r.node, -1 if r.gpu_index is None else r.gpu_index,
                             r.uuid))
    return rows


PROFILE_FIELDS = (["node", "gpu_index", "uuid"] + [f"PerfVar_class{c}" for c in CLASSES]
                  + [f"cluster_class{c}" for c in CLASSES] + [f"perf_class{c}" for c in CLASSES]
                  + ["measured_at"])


def write_profile(rows: list[ProfileRow], path: Path,
                  measured_at: str | dict[tuple[str, int | None], str] = "") -> None:
    """``measured_at``: when the runs were taken (ISO 8601, UTC), one for every row or per
    (node, GPU index); "" when unknown (an import of older files: the profile then ages from
    its file's time)."""
    try:
        fh = path.open("w", newline="")
    except OSError as exc:
        raise InputError(f"profile-gpus: {path}: cannot write ({exc.strerror})") from None
    with fh:
        w = csv.writer(fh)
        w.writerow(PROFILE_FIELDS)
        for r in rows:
            w.writerow([r.node, "" if r.gpu_index is None else r.gpu_index, r.uuid,
                        *(f"{f:.6f}" for f in r.factors), *r.clusters,
                        *("" if p is None else f"{p:.6g}" for p in r.perf),
                        measured_at if isinstance(measured_at, str)
                        else measured_at.get((r.node, r.gpu_index), "")])


def import_files(paths: list[Path], out: Path,
                 ignored: dict[str, int] | None = None) -> list[ProfileRow]:
    """Classify the runs of ``paths`` into the profile ``out``; the runs of other applications
    are counted per name in ``ignored``."""
    rows = build_profile(read_runs(paths, ignored=ignored))
    write_profile(rows, out)
    return rows
