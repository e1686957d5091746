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
from typing import Any

from ..errors import InputError, TelemetryError

MIB = 1024 * 1024
MPS_CONTROL = "nvidia-cuda-mps-control"
# what NVML answers for a call a GPU or driver does not offer
MISSING_ERRORS = ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_FUNCTION_NOT_FOUND")
RAISE = object()           # Nvml._call: NOT_FOUND is an error


def import_pynvml() -> ModuleType:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)   # the pynvml shim's deprecation note
            import pynvml
    except ImportError as exc:
        raise TelemetryError(f"nvml: cannot import pynvml ({exc}); install it with "
                             "`pip install nvidia-ml-py`") from None
    return pynvml


class Unsupported(TelemetryError):
    """A call this GPU, its driver or the installed pynvml does not offer (NVML's
    NOT_SUPPORTED or FUNCTION_NOT_FOUND, or a function the binding lacks)."""


class NoHandle(TelemetryError):
    """A GPU NVML cannot open (lost, fallen off the bus, no permission): nothing of it reads."""


class Nvml:
    """An initialised NVML session; use as a context manager or call ``close()``.

    ``module`` is the ``pynvml`` module (None: import it), or anything offering the same calls
    (``node/nvml_replay.py`` replays recorded passes). Every failed call raises a
    ``TelemetryError`` naming the pynvml function and the GPU."""

    def __init__(self, module: Any = None) -> None:
        self._nv = import_pynvml() if module is None else module
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

    def _call(self, name: str, index: int | None, *args: Any, not_found: Any = RAISE) -> Any:
        """``pynvml.<name>(*args)``; ``not_found``: what NVML's NOT_FOUND means instead of an
        error (no sample yet, an empty MIG slot)."""
        on = f" on GPU {index}" if index is not None else ""
        fn = getattr(self._nv, name, None)
        if fn is None:
            raise Unsupported(f"nvml: {name}{on}: not in this pynvml; update nvidia-ml-py")
        try:
            return fn(*args)
        except getattr(self._nv, "NVMLLibraryMismatchError", ()) as exc:
            # the driver lacks the version the unversioned name calls: try the one before
            if hasattr(self._nv, f"{name}_v2"):
                return self._call(f"{name}_v2", index, *args, not_found=not_found)
            raise Unsupported(f"nvml: {name}{on}: {exc}") from None
        except self._nv.NVMLError as exc:
            value = getattr(exc, "value", None)
            if not_found is not RAISE and value == getattr(self._nv, "NVML_ERROR_NOT_FOUND", 6):
                return not_found
            missing = value is not None and value in {getattr(self._nv, n, None)
                                                      for n in MISSING_ERRORS}
            kind = Unsupported if missing else TelemetryError
            raise kind(f"nvml: {name}{on}: {exc}") from None

    def _handle(self, index: int) -> Any:
        if index not in self._handles:
            try:
                self._handles[index] = self._call("nvmlDeviceGetHandleByIndex", index, index)
            except TelemetryError as exc:
                raise NoHandle(str(exc)) from None
        return self._handles[index]

    def count(self) -> int:
        return int(self._call("nvmlDeviceGetCount", None))

    def name(self, index: int) -> str:
        raw = self._call("nvmlDeviceGetName", index, self._handle(index))
        return raw.decode() if isinstance(raw, bytes) else str(raw)

    def power_w(self, index: int) -> float:
        return self._call("nvmlDeviceGetPowerUsage", index, self._handle(index)) / 1000.0

    def energy_j(self, index: int) -> float:
        mj = self._call("nvmlDeviceGetTotalEnergyConsumption", index, self._handle(index))
        return mj / 1000.0

    def util_pct(self, index: int) -> float:
        rates = self._call("nvmlDeviceGetUtilizationRates", index, self._handle(index))
        return float(rates.gpu)

    def mem_used_mib(self, index: int) -> float:
        return self._call("nvmlDeviceGetMemoryInfo", index, self._handle(index)).used / MIB

    def power_limit_w(self, index: int) -> float:
        mw = self._call("nvmlDeviceGetPowerManagementLimit", index, self._handle(index))
        return mw / 1000.0

    def compute_pids(self, index: int) -> tuple[int, ...]:
        """Processes with a CUDA context on the GPU (MPS clients show as the MPS server)."""
        procs = self._call("nvmlDeviceGetComputeRunningProcesses", index, self._handle(index))
        return tuple(sorted({int(p.pid) for p in procs}))

    def mps_pids(self, index: int) -> tuple[int, ...]:
        """MPS clients on the GPU (``nvmlDeviceGetMPSComputeRunningProcesses``); () without
        MPS. ``Unsupported`` where the driver or the pynvml binding lacks the call."""
        procs = self._call("nvmlDeviceGetMPSComputeRunningProcesses", index, self._handle(index))
        return tuple(sorted({int(p.pid) for p in procs}))

    def process_samples(self, index: int, since_us: int = 0) -> tuple[dict[int, float], int]:
        """Mean SM utilisation of each process on the GPU over NVML's samples newer than
        ``since_us`` (NVML's microsecond clock), and the newest sample's time (``since_us``
        when there is none): ({}, since_us) when NVML holds no newer sample."""
        samples = self._call("nvmlDeviceGetProcessUtilization", index, self._handle(index),
                             since_us, not_found=())
        per_pid: dict[int, list[float]] = {}
        newest_us = since_us
        for smp in samples:
            per_pid.setdefault(int(smp.pid), []).append(float(smp.smUtil))
            newest_us = max(newest_us, int(smp.timeStamp))
        return {pid: sum(v) / len(v) for pid, v in per_pid.items()}, newest_us

    def mig_enabled(self, index: int) -> bool:
        """Is the GPU in MIG mode now? False for a GPU (or driver) without MIG."""
        try:
            current, _pending = self._call("nvmlDeviceGetMigMode", index, self._handle(index))
        except Unsupported:
            return False
        return current == getattr(self._nv, "NVML_DEVICE_MIG_ENABLE", 1)

    def mig_devices(self, index: int) -> tuple[tuple[int, int, tuple[int, ...]], ...]:
        """The MIG devices of a GPU in MIG mode by slot: (slot, its GPU instance's slices,
        the processes with a CUDA context on it); slots without a device are left out."""
        slots = self._call("nvmlDeviceGetMaxMigDeviceCount", index, self._handle(index))
        out = []
        for slot in range(int(slots)):
            mig = self._call("nvmlDeviceGetMigDeviceHandleByIndex", index, self._handle(index),
                             slot, not_found=None)
            if mig is None:
                continue
            slices = self._call("nvmlDeviceGetAttributes", index, mig).gpuInstanceSliceCount
            procs = self._call("nvmlDeviceGetComputeRunningProcesses", index, mig)
            out.append((slot, int(slices), tuple(sorted({int(p.pid) for p in procs}))))
        return tuple(out)

    def power_limit_range_w(self, index: int) -> tuple[float, float]:
        lo, hi = self._call("nvmlDeviceGetPowerManagementLimitConstraints", index,
                            self._handle(index))
        return lo / 1000.0, hi / 1000.0

    def default_power_limit_w(self, index: int) -> float:
        mw = self._call("nvmlDeviceGetPowerManagementDefaultLimit", index, self._handle(index))
        return mw / 1000.0

    def set_power_limit_w(self, index: int, power_w: float) -> None:
        """Set the power cap (needs root); a value outside the GPU's range is an InputError."""
        lo, hi = self.power_limit_range_w(index)
        if not lo <= power_w <= hi:
            raise InputError(f"nvml: power limit {power_w:g} W for GPU {index}: outside "
                             f"the GPU's range {lo:g}-{hi:g} W")
        self._call("nvmlDeviceSetPowerManagementLimit", index, self._handle(index),
                   int(round(power_w * 1000)))


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
