"""NVIDIA GPUs through NVML (``pynvml``), with every NVML error mapped to ``TelemetryError``.

Units in names: NVML reports milliwatts and millijoules; this wrapper returns watts and joules.
Energy is NVML's total energy consumption counter (Volta and later), which only grows while
the driver stays loaded: a job's energy is the difference of two readings.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from ..errors import InputError, TelemetryError

MIB = 1024 * 1024
MPS_CONTROL = "nvidia-cuda-mps-control"


def _import_pynvml() -> ModuleType:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)   # the pynvml shim's deprecation note
            import pynvml
    except ImportError as exc:
        raise TelemetryError(f"nvml: cannot import pynvml ({exc}); install it with "
                             "`pip install nvidia-ml-py`") from None
    return pynvml


class Nvml:
    """An initialised NVML session; use as a context manager or call ``close()``."""

    def __init__(self) -> None:
        self._nv = _import_pynvml()
        try:
            self._nv.nvmlInit()
        except self._nv.NVMLError as exc:
            raise TelemetryError(f"nvml: nvmlInit failed: {exc}; is the NVIDIA driver installed "
                                 "(libnvidia-ml.so.1) and a GPU visible on this node?") from None
        self._handles: dict[int, Any] = {}

    def __enter__(self) -> "Nvml":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._nv.nvmlShutdown()
        except self._nv.NVMLError:
            pass

    def _call(self, what: str, index: int | None, fn: Callable, *args: Any) -> Any:
        try:
            return fn(*args)
        except self._nv.NVMLError as exc:
            on = f" on GPU {index}" if index is not None else ""
            raise TelemetryError(f"nvml: {what}{on}: {exc}") from None

    def _handle(self, index: int) -> Any:
        if index not in self._handles:
            self._handles[index] = self._call("get handle", index,
                                              self._nv.nvmlDeviceGetHandleByIndex, index)
        return self._handles[index]

    def count(self) -> int:
        return int(self._call("device count", None, self._nv.nvmlDeviceGetCount))

    def name(self, index: int) -> str:
        raw = self._call("name", index, self._nv.nvmlDeviceGetName, self._handle(index))
        return raw.decode() if isinstance(raw, bytes) else str(raw)

    def power_w(self, index: int) -> float:
        mw = self._call("power usage", index, self._nv.nvmlDeviceGetPowerUsage, self._handle(index))
        return mw / 1000.0

    def energy_j(self, index: int) -> float:
        mj = self._call("total energy consumption", index,
                        self._nv.nvmlDeviceGetTotalEnergyConsumption, self._handle(index))
        return mj / 1000.0

    def util_pct(self, index: int) -> float:
        rates = self._call("utilization", index, self._nv.nvmlDeviceGetUtilizationRates,
                           self._handle(index))
        return float(rates.gpu)

    def mem_used_mib(self, index: int) -> float:
        info = self._call("memory info", index, self._nv.nvmlDeviceGetMemoryInfo,
                          self._handle(index))
        return info.used / MIB

    def power_limit_w(self, index: int) -> float:
        mw = self._call("power limit", index, self._nv.nvmlDeviceGetPowerManagementLimit,
                        self._handle(index))
        return mw / 1000.0

    def compute_pids(self, index: int) -> tuple[int, ...]:
        """Processes with a CUDA context on the GPU (MPS clients show as the MPS server)."""
        procs = self._call("running compute processes", index,
                           self._nv.nvmlDeviceGetComputeRunningProcesses, self._handle(index))
        return tuple(sorted({int(p.pid) for p in procs}))

    def process_util_pct(self, index: int, since_us: int = 0) -> dict[int, float]:
        """Mean SM utilisation of each process on the GPU over NVML's samples newer than
        ``since_us`` (NVML's microsecond clock); {} when NVML holds no sample yet."""
        try:
            samples = self._nv.nvmlDeviceGetProcessUtilization(self._handle(index), since_us)
        except self._nv.NVMLError as exc:
            if getattr(exc, "value", None) == getattr(self._nv, "NVML_ERROR_NOT_FOUND", -1):
                return {}
            raise TelemetryError(f"nvml: process utilization on GPU {index}: {exc}") from None
        per_pid: dict[int, list[float]] = {}
        for smp in samples:
            per_pid.setdefault(int(smp.pid), []).append(float(smp.smUtil))
        return {pid: sum(v) / len(v) for pid, v in per_pid.items()}

    def power_limit_range_w(self, index: int) -> tuple[float, float]:
        lo, hi = self._call("power limit constraints", index,
                            self._nv.nvmlDeviceGetPowerManagementLimitConstraints,
                            self._handle(index))
        return lo / 1000.0, hi / 1000.0

    def default_power_limit_w(self, index: int) -> float:
        mw = self._call("default power limit", index,
                        self._nv.nvmlDeviceGetPowerManagementDefaultLimit, self._handle(index))
        return mw / 1000.0

    def set_power_limit_w(self, index: int, power_w: float) -> None:
        """Set the power cap (needs root); a value outside the GPU's range is an InputError."""
        lo, hi = self.power_limit_range_w(index)
        if not lo <= power_w <= hi:
            raise InputError(f"nvml: power limit {power_w:g} W for GPU {index}: outside "
                             f"the GPU's range {lo:g}-{hi:g} W")
        self._call("set power limit", index, self._nv.nvmlDeviceSetPowerManagementLimit,
                   self._handle(index), int(round(power_w * 1000)))


def job_of_pid(pid: int, proc_root: str | os.PathLike = "/proc") -> str | None:
    """The Slurm job a process belongs to: ``SLURM_JOB_ID`` in its environment (readable by
    root, who runs the collector), else the ``job_<id>`` of its cgroup path; None if neither."""
    base = Path(proc_root) / str(pid)
    try:
        for item in (base / "environ").read_bytes().split(b"\0"):
            if item.startswith(b"SLURM_JOB_ID="):
                return item[13:].decode("ascii", "replace") or None
    except OSError:
        pass
    try:
        for line in (base / "cgroup").read_text(errors="replace").splitlines():
            for part in line.split("/"):
                if part.startswith("job_") and part[4:].isdigit():
                    return part[4:]
    except OSError:
        pass
    return None


def mps_daemon_running(proc_root: str | os.PathLike = "/proc") -> bool:
    """Is an MPS control daemon (``nvidia-cuda-mps-control -d``) running on this node?

    NVML does not report the daemon, so look for its process by its program name."""
    for entry in Path(proc_root).iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv0 = (entry / "cmdline").read_bytes().split(b"\0", 1)[0]
        except OSError:
            continue          # the process ended meanwhile, or is not ours to read
        if os.path.basename(argv0.decode("utf-8", "replace")) == MPS_CONTROL:
            return True
    return False
