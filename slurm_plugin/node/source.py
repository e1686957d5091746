"""Where GPU readings come from: the ``GpuSource`` interface and its NVML implementation.

The collector, the prolog and the epilog only see ``GpuSource.read()``. Sources are named in
``SOURCES`` (site key ``node.gpu_source``); an emulated source for the test cluster's fake GPUs
registers itself there the same way.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from typing import Any, Callable, Mapping, Protocol

from ..errors import ConfigError, TelemetryError, WattError
from ..model import GpuReading, Resident
from ..telemetry.nvml import Nvml, job_of_pid
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


class NvmlSource:
    """GPUs read through NVML. Where the GPU has no energy counter (before Volta), energy is
    integrated from power between reads of this source. Each GPU's model is read once from its
    NVML name (``model``): it sets the range its power cap is moved into and goes with each
    reading (``GpuReading.model``); a model not in the catalogue changes nothing measured."""

    def __init__(self, node: str, nvml: Nvml | None = None,
                 clock: Callable[[], float] = time.time,
                 job_of: Callable[[int], str | None] = job_of_pid,
                 caps: Callable[[range], Mapping[int, float | None]] | None = None,
                 cap_refresh_s: float = 60.0) -> None:
        self.node = node
        self.nvml = nvml or Nvml()
        self._clock, self._job_of = clock, job_of
        self._caps, self._cap_refresh_s, self._caps_at_s = caps, cap_refresh_s, None
        self._seen_us: dict[int, int] = {}
        self._integrated: dict[int, tuple[float, float, float]] = {}  # index -> (t, power, energy)
        self._models: dict[int, str] = {}

    def model(self, index: int) -> str:
        """GPU ``index``'s model (``nvml_model``), read once: a board does not change."""
        m = self._models.get(index)
        if m is None:
            m = self._models[index] = nvml_model(self.nvml, index)
        return m

    def _energy_j(self, index: int, power_w: float, now_s: float) -> float:
        try:
            return self.nvml.energy_j(index)
        except TelemetryError:
            t0, p0, e0 = self._integrated.get(index, (now_s, power_w, 0.0))
            energy = e0 + (now_s - t0) * (p0 + power_w) / 2
            self._integrated[index] = (now_s, power_w, energy)
            return energy

    def residents(self, index: int) -> tuple[Resident, ...]:
        """The Slurm jobs with a process on the GPU and each one's SM utilisation since the
        last read (NVML per-process samples; processes of no job are left out)."""
        util = self.nvml.process_util_pct(index, self._seen_us.get(index, 0))
        self._seen_us[index] = int(self._clock() * 1e6) - 1_000_000   # overlap one second
        per_job: dict[str, float] = {}
        for pid in set(self.nvml.compute_pids(index)) | set(util):
            job = self._job_of(pid)
            if job is not None:
                per_job[job] = per_job.get(job, 0.0) + util.get(pid, 0.0)
        return tuple(Resident(job, 0, u) for job, u in sorted(per_job.items()))

    def set_caps(self) -> None:
        """Every ``cap_refresh_s``: each GPU's limit to what its jobs ask (``power_cap``);
        what cannot be set or read is said on stderr, and the readings go on."""
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
            print(f"wattbatch collector: warning: {self.node}: {line}", file=sys.stderr,
                  flush=True)

    def read(self) -> list[GpuReading]:
        self.set_caps()
        out = []
        for i in range(self.nvml.count()):
            now_s = self._clock()
            power = self.nvml.power_w(i)
            out.append(GpuReading(node=self.node, index=i, power_w=power,
                                  energy_j=self._energy_j(i, power, now_s),
                                  util_pct=self.nvml.util_pct(i),
                                  mem_used_mib=self.nvml.mem_used_mib(i),
                                  power_limit_w=self.nvml.power_limit_w(i), taken_s=now_s,
                                  residents=self.residents(i), model=self.model(i)))
        return out


def _emulated(node: str, cfg: Any) -> GpuSource:
    from ..slurm.snapshot import snapshot
    from .emulated import EmulatedSource

    return EmulatedSource(node, lambda: snapshot(cfg), cfg["node.state_dir"])


def _nvml(node: str, cfg: Any) -> GpuSource:
    # caps as the jobs ask; the source moves each into its GPU's model's range
    return NvmlSource(node, caps=lambda indexes: desired_caps(node_jobs(cfg, node), node, indexes,
                                                              gpu_model=""),
                      cap_refresh_s=cfg["node.cap_refresh_s"])


SOURCES: dict[str, Callable[[str, Any], GpuSource]] = {
    "nvml": _nvml,
    "emulated": _emulated,
}


def make_source(name: str, node: str, cfg: Any, origin: str = "site config") -> GpuSource:
    """The GPU source ``name`` of ``node``; an unknown name is blamed on ``origin``, where it
    came from (the site file, a ``$WATTBATCH_*`` variable, ``--source``)."""
    if name not in SOURCES:
        raise ConfigError(origin, "node.gpu_source", name,
                          f"choose one of: {', '.join(sorted(SOURCES))}")
    return SOURCES[name](node, cfg)
