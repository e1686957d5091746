"""Emulated GPUs for the local test cluster, driven by the calibrated physics.

The fake GPU device nodes have no power, utilisation or memory of their own. This source reads
which jobs Slurm placed on each GPU of the node (one ``squeue``/``sinfo`` snapshot), and asks
``physics`` what those jobs draw together: per-GPU utilisation and power, a monotone energy
counter integrated between reads (kept in a small state file), and each running job's
interference slowdown (times its power cap's, ``physics.job_cap``, where the GPU's jobs carry
one: ``node/power_cap.py``; the reading's ``power_limit_w`` is then the cap), written to ``<node.state_dir>/emulated/slowdown-<job_id>`` where the
emulated training job reads it before every step. The simulator uses the same functions.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Callable, Mapping

from ..errors import InputError
from ..record import record
from ..model import EMPTY_MAP, Cluster, Gpu, GpuReading, Job, Resident
from ..physics import (group_slowdowns, idle_power_w, job_class, max_power_w, shared_gpu_power_w,
                       shared_gpu_throttle, shared_gpu_util)
from ..physics.colocation import MODES
from ..physics.job_cap import capped_job
from .power_cap import caps_of

DEFAULT_APP = "resnet18"   # class of a GPU job that names none (see docs/physics.md)


# the GPU sources over the emulated GPUs (``node.gpu_source``): read directly, or shown to the
# collector's NVML path (``emulated_nvml.py``); either way the jobs run on no real GPU
EMULATED_SOURCES = ("emulated", "emulated-nvml")


def is_emulated(gpu_source: str) -> bool:
    """Whether ``node.gpu_source`` names the emulated GPUs (jobs emulate their speed)."""
    return gpu_source in EMULATED_SOURCES


def slowdown_path(state_dir: str | os.PathLike, job_id: str) -> Path:
    return Path(state_dir) / "emulated" / f"slowdown-{job_id}"


def _class(job: Job):
    try:
        return job_class(job.app or DEFAULT_APP)
    except InputError:
        return job_class(DEFAULT_APP)


# A job may declare a co-located pair of one class as its app (``pair:<mode>:<class>``, e.g.
# ``pair:mps:aps``): the calibration job's (``calibrate_pair.py``) two copies of a workload
# sharing its GPU, computed as two co-located jobs of that class.
PAIR_PREFIX = "pair:"


def pair_app(app: str, mode: str) -> str:
    """The app that declares two co-located copies of class ``app`` sharing a GPU in ``mode``
    (``physics.colocation.MODES``)."""
    return f"{PAIR_PREFIX}{mode}:{app}"


def declared_pair(app: str) -> tuple[str, str] | None:
    """(class, mode) of an app declaring a pair (``pair_app``); None for any other app (one
    that names no known class or mode is no pair)."""
    if not app.startswith(PAIR_PREFIX):
        return None
    mode, _, name = app[len(PAIR_PREFIX):].partition(":")
    if mode not in MODES:
        return None
    try:
        return job_class(name).name, mode
    except InputError:
        return None


def _copies(job: Job) -> list:
    """The classes a job runs on its GPU: two of its class when it declares a pair."""
    pair = declared_pair(job.app)
    return [_class(job)] if pair is None else [job_class(pair[0])] * 2


@record
class GpuState:
    """One emulated GPU now: what NVML would read, each resident job's slowdown, and each
    job's true power (idle split evenly, its own dynamic power): the truth the energy split
    is measured against."""

    util_pct: float
    power_w: float
    mem_used_mib: float
    slowdown: Mapping[str, float]
    residents: tuple[Resident, ...]
    job_power_w: Mapping[str, float]
    power_limit_w: float


def gpu_state(gpu: Gpu, jobs: dict[str, Job]) -> GpuState:
    """The GPU's state from the jobs on it. Each job is one copy of its class, a job declaring
    a pair (``declared_pair``) two: the physics runs on the copies, and a job's slowdown is
    its copies', its utilisation and power their sum. The jobs share the GPU time-sliced
    (this source cannot tell jobs sharing it through MPS), or through MPS where a job declares
    an MPS pair."""
    resident = [jobs[j] for j in gpu.job_ids if j in jobs and jobs[j].running]
    idle = idle_power_w(gpu.model)
    if not resident:
        return GpuState(0.0, idle, 0.0, EMPTY_MAP, (), EMPTY_MAP, max_power_w(gpu.model))
    copies = [_copies(j) for j in resident]
    owner = [k for k, cs in enumerate(copies) for _ in cs]
    classes = [c for cs in copies for c in cs]
    n_gpus = [max(1, len(resident[k].uses)) for k in owner]
    mps = any((declared_pair(j.app) or ("", ""))[1] == "mps" for j in resident)
    slow = group_slowdowns([c.name for c in classes], model=gpu.model,
                           mode="mps" if mps else "time-sliced")
    rates = [1 / s for s in slow]
    utils = [c.util_at(n) * r for c, n, r in zip(classes, n_gpus, rates)]
    util = shared_gpu_util([c.util_at(n) for c, n in zip(classes, n_gpus)], rates)
    if sum(utils) > util:                  # a saturated GPU: the jobs' readings add up to it
        utils = [u * util / sum(utils) for u in utils]
    solo_dynamic = [c.dynamic_power_at(n, gpu.model) for c, n in zip(classes, n_gpus)]
    dynamic = [d * r for d, r in zip(solo_dynamic, rates)]
    mem = float(min(gpu.memory_mib, sum(c.memory_mib for c in classes)))
    held = [next((u.shards for u in j.uses if (u.node, u.index) == gpu.key), 0)
            for j in resident]
    cap_w = caps_of(gpu, jobs)
    if len(classes) > 1:        # shared: one limit for all, past it every job slows
        throttle = shared_gpu_throttle(solo_dynamic, rates, cap_w, gpu.model)
        slow = [s * throttle for s in slow]
        power = shared_gpu_power_w(solo_dynamic, rates, cap_w, gpu.model)
        scale = (power - idle) / sum(dynamic) if sum(dynamic) > 0 else 0.0
        job_dynamic = [d * scale for d in dynamic]
    elif cap_w is not None:     # alone and capped: its configuration model, slower and cooler
        (power_w, slowdown), = [capped_job(c.name, n, cap_w, gpu.model)
                                for c, n in zip(classes, n_gpus)]
        slow = [s * slowdown for s in slow]
        job_dynamic = [max(0.0, power_w - idle)]
        power = min(cap_w, idle + job_dynamic[0])
    else:
        power = shared_gpu_power_w(solo_dynamic, rates, model=gpu.model)
        job_dynamic = [power - idle]
    slow, utils, job_dynamic = (_per_job(slow, owner, max), _per_job(utils, owner, sum),
                                _per_job(job_dynamic, owner, sum))
    return GpuState(
        util, power, mem, {j.job_id: s for j, s in zip(resident, slow)},
        tuple(Resident(j.job_id, h, u, j.app) for j, h, u in zip(resident, held, utils)),
        {j.job_id: idle / len(resident) + d for j, d in zip(resident, job_dynamic)},
        cap_w if cap_w is not None else max_power_w(gpu.model))


def _per_job(values: list[float], owner: list[int], combine) -> list[float]:
    """Per-copy ``values`` combined per job (``owner[i]``: the job of copy ``i``)."""
    out: dict[int, list[float]] = {}
    for k, v in zip(owner, values):
        out.setdefault(k, []).append(v)
    return [combine(out[k]) for k in sorted(out)]


class EmulatedSource:
    """``GpuSource`` over the fake GPUs of the local cluster.

    ``nodes`` is one node name, a comma-separated list, or ``all``: on the local cluster every
    node is on this host, and one collector serves them all from one snapshot per read.
    """

    def __init__(self, nodes: str, snapshot: Callable[[], Cluster], state_dir: str | os.PathLike,
                 clock: Callable[[], float] = time.time) -> None:
        self.nodes, self._snapshot, self._clock = nodes, snapshot, clock
        self.state_dir = Path(state_dir)
        self._energy_file = self.state_dir / "emulated" / "energy.json"

    def _load(self) -> dict[str, list[float]]:
        try:
            return json.loads(self._energy_file.read_text())
        except (OSError, ValueError):
            return {}

    def _save(self, energy: dict[str, list[float]]) -> None:
        self._energy_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._energy_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(energy))
        tmp.replace(self._energy_file)

    def read(self) -> list[GpuReading]:
        """Every GPU of ``nodes`` now. Readers of one state directory (the collector, a
        calibration job) take turns: each advances the energy counters and the truth under a
        lock, so none loses another's update."""
        cluster = self._snapshot()
        wanted = None if self.nodes == "all" else set(self.nodes.split(","))
        gpus = [g for n in cluster.nodes if wanted is None or n.name in wanted for g in n.gpus]
        self._energy_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self._energy_file.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return self._read_locked(gpus, dict(cluster.jobs))

    def _read_locked(self, gpus: list[Gpu], jobs: dict[str, Job]) -> list[GpuReading]:
        now_s = self._clock()
        energy = self._load()   # "node:index" -> [t_s, power_w, energy_j, {job: power_w}]
        truth = self._load_truth()
        out = []
        for gpu in gpus:
            st = gpu_state(gpu, jobs)
            key = f"{gpu.node}:{gpu.index}"
            t0, p0, e0, jp0 = (energy.get(key, []) + [now_s, st.power_w, 0.0, {}][
                len(energy.get(key, [])):])
            dt = max(0.0, now_s - t0)
            e = e0 + dt * (p0 + st.power_w) / 2
            for job_id in set(jp0) | set(st.job_power_w):   # the counter's rule, per job
                was, now = jp0.get(job_id, 0.0), st.job_power_w.get(job_id, 0.0)
                truth[job_id] = truth.get(job_id, 0.0) + dt * (was + now) / 2
            energy[key] = [now_s, st.power_w, e, dict(st.job_power_w)]
            for job_id, s in st.slowdown.items():
                path = slowdown_path(self.state_dir, job_id)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(f"{s:.4f}\n")
            out.append(GpuReading(node=gpu.node, index=gpu.index, power_w=st.power_w, energy_j=e,
                                  util_pct=st.util_pct, mem_used_mib=st.mem_used_mib,
                                  power_limit_w=st.power_limit_w, taken_s=now_s,
                                  residents=st.residents, model=gpu.model))
        self._save(energy)
        self._save_truth(truth)
        return out

    # --- the true split, for benchmarks/bench_energy_split.py -----------------------------
    @property
    def truth_file(self) -> Path:
        return self.state_dir / "emulated" / "true_job_energy.json"

    def _load_truth(self) -> dict[str, float]:
        try:
            return json.loads(self.truth_file.read_text())
        except (OSError, ValueError):
            return {}

    def _save_truth(self, truth: dict[str, float]) -> None:
        tmp = self.truth_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(truth))
        tmp.replace(self.truth_file)


# --- per-GPU speed (PAL's variability) -------------------------------------------------------
# The local cluster's GPUs differ in speed as PAL measured real V100s do: ``localcluster up``
# spreads the rows of a variability profile over the cluster's GPUs (seeded, as the simulator's
# ``VariabilityProfile.factors``) into a profile CSV named by ``node.emulated_variability``. An
# emulated job (``emulated_train``, ``gpu_bench``) runs at its slowest GPU's factor for its class.

EMULATED_FIELDS = ("node", "gpu_index", "uuid", "PerfVar_classA", "PerfVar_classB",
                   "PerfVar_classC", "PerfVar_classD")


def emulated_uuid(cluster: str, node: str, index: int, seed: int) -> str:
    """A stable uuid of a fake GPU; another seed (the GPUs spread anew) gives other uuids, as
    swapped hardware would."""
    import uuid
    return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_URL,
                                   f"wattbatch-emulated:{cluster}:{node}:{index}:{seed}"))


def emulated_profile_csv(cluster: str, gpus: list[tuple[str, int]], seed: int,
                         profile_path: str | None = None) -> str:
    """The emulated GPUs' profile: the rows of ``profile_path`` (None: the built-in Longhorn
    one) spread over ``gpus`` (node and index order) by ``seed``."""
    import csv
    import io

    from ..physics.variability import CLASSES, load_profile
    factors = load_profile(profile_path).factors(len(gpus), seed)
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(EMULATED_FIELDS)
    for (node, index), f in zip(gpus, factors):
        w.writerow([node, index, emulated_uuid(cluster, node, index, seed),
                    *(f"{f[c]:.6f}" for c in CLASSES)])
    return out.getvalue()


_emulated_cache: dict[str, tuple[tuple[float, int], dict]] = {}


def emulated_gpus(path: str) -> dict[tuple[str, int], tuple[str, tuple[float, ...]]]:
    """(node, index) -> (uuid, factors A-D) of the emulated GPUs' profile at ``path`` (read
    again when it changes); {} for "" (every GPU alike)."""
    if not path:
        return {}
    from ..physics.variability import load_profile
    try:
        st = os.stat(path)
    except OSError as exc:
        raise InputError(f"node.emulated_variability: {path}: cannot read ({exc.strerror})") \
            from None
    stamp = (st.st_mtime, st.st_size)
    hit = _emulated_cache.get(path)
    if hit is None or hit[0] != stamp:
        prof = load_profile(path)
        uuids = prof.uuid_by_gpu()
        hit = (stamp, {k: (uuids.get(k, ""), f) for k, f in prof.by_gpu().items()})
        _emulated_cache[path] = hit
    return hit[1]


def variability_factor(path: str, node: str, indexes: tuple[int, ...] | list[int],
                       cls: str) -> float:
    """The time multiplier of a job of PAL class ``cls`` on these GPUs of ``node``: its slowest
    GPU's factor (1.0 for GPUs the profile does not name, or no profile)."""
    from ..physics.variability import CLASSES
    table = emulated_gpus(path)
    ci = CLASSES.index(cls)
    vals = [table[(node, i)][1][ci] for i in indexes if (node, i) in table]
    return max(vals) if vals else 1.0


def job_gpu_indexes(environ: Mapping[str, str]) -> tuple[int, ...]:
    """The GPU indexes a Slurm job holds on its node, from ``SLURM_JOB_GPUS`` (else
    ``SLURM_STEP_GPUS``, else ``GPU_DEVICE_ORDINAL``); () when none says."""
    for name in ("SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "GPU_DEVICE_ORDINAL"):
        text = environ.get(name, "").strip()
        if text:
            try:
                return tuple(int(x) for x in text.split(",") if x.strip())
            except ValueError:
                continue
    return ()


def job_node(environ: Mapping[str, str]) -> str:
    import socket
    return environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
