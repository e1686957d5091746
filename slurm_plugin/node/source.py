"""Where GPU readings come from: the ``GpuSource`` interface and its NVML implementation.

The collector, the prolog and the epilog only see ``GpuSource.read()``. Sources are named in
``SOURCES`` (site key ``node.gpu_source``); the test cluster's fake GPUs are there too: read as
they are (``emulated``) or through this NVML path (``emulated-nvml``).
"""

from __future__ import annotations

import functools
import math
import os
import socket
import sys
import time
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

from ..errors import ConfigError, TelemetryError, WattError
from ..model import GpuReading, Job
from ..record import replace
from ..telemetry.nvml import NoHandle, Nvml, job_of_pid
from .job_lookup import CachedJobs
from .nvml_attribution import GpuProcesses, mig_residents, process_residents
from .power_cap import apply_caps, desired_caps, model_clamped, node_jobs


class GpuSource(Protocol):
    """Reads every GPU of one node."""

    def read(self) -> list[GpuReading]:
        """One reading per GPU, ordered by index; ``energy_j`` is a monotone counter."""


def node_name() -> str:
    """Slurm's name for this node in a prolog/epilog, else the short host name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".", 1)[0]


def catalogued(name: str) -> str:
    """The catalogue entry a GPU name means (``"NVIDIA H100 80GB HBM3"`` ->
    ``"H100-80GB-HBM3"``), or "" when the catalogue has no such model."""
    from ..physics.constants import catalogue_entry
    try:
        return catalogue_entry(name) if name else ""
    except ConfigError:
        return ""


def nvml_model(nvml: Any, index: int) -> str:
    """GPU ``index``'s model from its NVML name (``nvmlDeviceGetName``): the catalogue entry,
    else the name itself when it is not catalogued; "" when NVML gives no name."""
    try:
        name = nvml.name(index).strip()
    except (TelemetryError, AttributeError):     # a source that cannot name its boards
        return ""
    return catalogued(name) or name


# what a GPU's residents come from: its processes, or in MIG mode its MIG devices
Processes = GpuProcesses | list[tuple[int, int, tuple[int, ...]]]

# what a reading falls back to when its NVML call fails
FALLBACK = {
    "power_w": "mean power since the last pass from the energy counter",
    "energy_j": "energy integrated from power",
    "util_pct": "utilisation 0",
    "mem_used_mib": "memory left out",
    "power_limit_w": "limit left out",
    "compute_processes": "jobs from the other process lists",
    "mps_processes": "MPS clients unseen",
    "process_util": "jobs' utilisation unknown",
    "mig": "read as a GPU without MIG",
    "mig_devices": "no job seen on its MIG devices",
}


class NvmlSource:
    """GPUs read through NVML. Each GPU's model is read from its NVML name (``model``): it
    sets the range its power cap is moved into and goes with each reading
    (``GpuReading.model``); a model not in the catalogue changes nothing measured.

    The jobs on each GPU (``residents``) come from its processes (``nvml_attribution``; a
    process's job from ``job_of``, default ``job_of_pid``), each with its class and shares from
    Slurm (``jobs``: the node's running jobs, given the job ids seen on the GPUs; None: not
    asked). A failed Slurm ask is one warning, and the residents carry no class or shares until
    it answers again.

    A call a GPU cannot answer (not offered by the board, its driver or pynvml, or any NVML
    error) degrades that one reading as ``FALLBACK`` says (where the board has no energy
    counter, before Volta, energy is integrated from power between reads); ``degraded`` holds
    the last pass's, GPU index -> reading -> why, and a warning names them whenever they
    change. A GPU NVML cannot open is left out of the pass, with the same warning."""

    def __init__(self, node: str, nvml: Nvml | None = None,
                 clock: Callable[[], float] = time.time,
                 job_of: Callable[[int], str | None] | None = None,
                 caps: Callable[[range], Mapping[int, float | None]] | None = None,
                 cap_refresh_s: float = 60.0,
                 jobs: Callable[[Iterable[str]], Sequence[Job]] | None = None,
                 warn: Callable[[str], None] | None = None) -> None:
        self.node = node
        self.nvml = nvml or Nvml()
        self._clock, self._job_of, self._jobs = clock, job_of or job_of_pid, jobs
        self._warn = warn or self._stderr
        self._caps, self._cap_refresh_s, self._caps_at_s = caps, cap_refresh_s, None
        self._seen_us: dict[int, int] = {}
        self._last: dict[int, tuple[float, float, float]] = {}  # index -> (t, power, energy)
        self._models: dict[int, str] = {}
        self.degraded: dict[int, dict[str, str]] = {}
        self._said: frozenset[tuple[int, str]] = frozenset()
        self._jobs_failed = False

    def _stderr(self, line: str) -> None:
        print(f"wattbatch collector: warning: {self.node}: {line}", file=sys.stderr, flush=True)

    def model(self, index: int) -> str:
        """GPU ``index``'s model (``nvml_model``), read until known: a board does not change."""
        m = self._models.get(index)
        if m is None:
            m = nvml_model(self.nvml, index)
            if m:
                self._models[index] = m
        return m

    def _get(self, flags: dict[str, str], reading: str, method: str, *args: Any) -> Any:
        """``self.nvml.<method>(*args)``, or None with the reason in ``flags`` when the GPU
        cannot answer; ``NoHandle`` goes up (the whole GPU is out)."""
        try:
            return getattr(self.nvml, method)(*args)
        except NoHandle:
            raise
        except (TelemetryError, AttributeError) as exc:   # AttributeError: a source without it
            flags[reading] = f"{exc} ({FALLBACK[reading]})"
            return None

    def _power_energy(self, index: int, now_s: float,
                      flags: dict[str, str]) -> tuple[float, float]:
        power = self._get(flags, "power_w", "power_w", index)
        counter = self._get(flags, "energy_j", "energy_j", index)
        t0, p0, e0 = self._last.get(index, (now_s, math.nan, 0.0))
        if power is None:
            power = (counter - e0) / (now_s - t0) if counter is not None and now_s > t0 \
                else math.nan
        if counter is None:
            gained = (now_s - t0) * (p0 + power) / 2
            counter = e0 + (gained if math.isfinite(gained) else 0.0)
        self._last[index] = (now_s, power, counter)
        return power, counter

    def _read_gpu(self, index: int, flags: dict[str, str]) -> tuple[GpuReading, Processes]:
        """GPU ``index``'s reading without residents, and what its residents come from: its
        MIG devices (a list) or its ``GpuProcesses``."""
        now_s = self._clock()
        power, energy = self._power_energy(index, now_s, flags)
        util = self._get(flags, "util_pct", "util_pct", index)
        mem = self._get(flags, "mem_used_mib", "mem_used_mib", index)
        limit = self._get(flags, "power_limit_w", "power_limit_w", index)
        reading = GpuReading(node=self.node, index=index, power_w=power, energy_j=energy,
                             util_pct=0.0 if util is None else util,
                             mem_used_mib=math.nan if mem is None else mem,
                             power_limit_w=math.nan if limit is None else limit,
                             taken_s=now_s, model=self.model(index))
        if self._get(flags, "mig", "mig_enabled", index):
            return reading, list(self._get(flags, "mig_devices", "mig_devices", index)
                                 or ())
        sampled = self._get(flags, "process_util", "process_samples", index,
                            self._seen_us.get(index, 0))
        if sampled is not None:
            self._seen_us[index] = sampled[1]       # the next pass asks for newer samples
        procs = GpuProcesses(self._get(flags, "compute_processes", "compute_pids", index),
                             self._get(flags, "mps_processes", "mps_pids", index),
                             None if sampled is None else sampled[0], util)
        return reading, procs

    def _placed(self, seen: set[str]) -> tuple[dict[int, dict[str, int]], dict[str, str]]:
        """From Slurm: GPU index -> job -> shares held on it (this node), and job -> class."""
        if self._jobs is None:
            return {}, {}
        try:
            jobs = self._jobs(seen)
        except WattError as exc:
            if not self._jobs_failed:
                self._warn(f"Slurm's jobs not read ({exc}); the jobs on the GPUs carry no class "
                           "or shares until it answers")
            self._jobs_failed = True
            return {}, {}
        self._jobs_failed = False
        shares: dict[int, dict[str, int]] = {}
        for job in jobs:
            for use in job.uses:
                if use.node == self.node:
                    shares.setdefault(use.index, {})[job.job_id] = use.shards
        return shares, {j.job_id: j.app for j in jobs if j.app}

    def set_caps(self) -> None:
        """Every ``cap_refresh_s``: each GPU's limit to what its jobs ask (``power_cap``);
        what cannot be set or read is a warning, and the readings go on."""
        now_s = self._clock()
        if self._caps is None or self._cap_refresh_s <= 0 or (
                self._caps_at_s is not None and now_s - self._caps_at_s < self._cap_refresh_s):
            return
        self._caps_at_s = now_s
        try:
            failed = apply_caps(self.nvml, model_clamped(self._caps(range(self.nvml.count())),
                                                         self.model))
        except WattError as exc:
            failed = [f"power caps not read: {exc}"]
        for line in failed:
            self._warn(line)

    def read(self) -> list[GpuReading]:
        self.set_caps()
        flags: dict[int, dict[str, str]] = {}
        read = []
        for i in range(self.nvml.count()):
            try:
                read.append(self._read_gpu(i, flags.setdefault(i, {})))
            except NoHandle as exc:
                flags[i] = {"gpu": f"{exc} (left out of this pass)"}
        job_of = functools.cache(self._job_of)
        seen = {j for _, src in read for p in _pids(src) if (j := job_of(p)) is not None}
        shares, apps = self._placed(seen)
        out = []
        for reading, src in read:
            if isinstance(src, GpuProcesses):
                # a board not catalogued splits with the V100's rates, the measured reference
                residents = process_residents(src, job_of, shares.get(reading.index, {}), apps,
                                              model=catalogued(reading.model) or "V100")
            else:
                residents = mig_residents(src, job_of, apps)
            out.append(replace(reading, residents=residents))
        self._say(flags)
        return out

    def _say(self, flags: dict[int, dict[str, str]]) -> None:
        self.degraded = {i: f for i, f in sorted(flags.items()) if f}
        said = frozenset((i, k) for i, f in self.degraded.items() for k in f)
        if said and said != self._said:
            self._warn("readings degraded: " + "; ".join(
                f"GPU {i} {k}: {why}" for i, f in self.degraded.items() for k, why in f.items()))
        self._said = said


def _pids(src: Processes) -> set[int]:
    """Every process a GPU's NVML answers name (``GpuProcesses`` or MIG devices)."""
    if isinstance(src, GpuProcesses):
        return set(src.compute_pids or ()) | set(src.mps_pids or ()) | set(src.util_by_pid or ())
    return {p for _slot, _n, pids in src for p in pids}


def _emulated(node: str, cfg: Any) -> GpuSource:
    from ..slurm.snapshot import snapshot
    from .emulated import EmulatedSource

    return EmulatedSource(node, lambda: snapshot(cfg), cfg["node.state_dir"])


def _nvml(node: str, cfg: Any, **nvml: Any) -> NvmlSource:
    """``node``'s ``NvmlSource`` with the site's Slurm lookup: one cached squeue answer serves
    the caps (as the jobs ask; the source moves each into its GPU's model's range) and the
    residents' classes and shares. ``nvml``: the rest of its arguments (the NVML wrapper,
    clock, ``job_of``; none: pynvml on this node)."""
    jobs = CachedJobs(lambda: node_jobs(cfg, node), cfg["node.cap_refresh_s"])
    return NvmlSource(node, caps=lambda indexes: desired_caps(jobs(), node, indexes,
                                                              gpu_model=""),
                      cap_refresh_s=cfg["node.cap_refresh_s"], jobs=jobs, **nvml)


def _emulated_nvml(node: str, cfg: Any) -> GpuSource:
    """The emulated GPUs read through the NVML path (``emulated_nvml.py``)."""
    from .emulated_nvml import EmulatedNvmlSource

    return EmulatedNvmlSource(_emulated(node, cfg), cfg["slurm.share_gres"] == "mps",
                              lambda name, **nvml: _nvml(name, cfg, **nvml))


SOURCES: dict[str, Callable[[str, Any], GpuSource]] = {
    "nvml": _nvml,
    "emulated": _emulated,
    "emulated-nvml": _emulated_nvml,
}


def make_source(name: str, node: str, cfg: Any, origin: str = "site config") -> GpuSource:
    """The GPU source ``name`` of ``node``; an unknown name is blamed on ``origin``, where it
    came from (the site file, a ``$WATTBATCH_*`` variable, ``--source``)."""
    if name not in SOURCES:
        raise ConfigError(origin, "node.gpu_source", name,
                          f"choose one of: {', '.join(sorted(SOURCES))}")
    return SOURCES[name](node, cfg)
