"""Record a GPU node's NVML passes into a replay file (``nvml_replay.py``). ``Recorder``
stands between the ``Nvml`` wrapper and pynvml: it passes every call on and keeps what came
back under the current pass, so the file holds exactly the calls the collector makes.
``record`` runs the collector's NVML source over it (power limits untouched) and keeps each
process's Slurm job and the node's jobs as Slurm listed them. ``scripts/record_nvml.py`` is the
command.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Sequence

from ..model import Job
from ..telemetry.nvml import Nvml, import_pynvml, job_of_pid
from .nvml_replay import FORMAT
from .source import NvmlSource


def plain(value: Any) -> Any:
    """What pynvml returned, as JSON: structures as objects of their fields, bytes as text."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    fields = getattr(value, "_fields_", None)
    if fields is not None:                       # a ctypes structure
        return {f[0]: plain(getattr(value, f[0])) for f in fields}
    if hasattr(value, "__dict__"):               # pynvml's friendly objects
        return {k: plain(v) for k, v in vars(value).items()}
    return value


class _Handle:
    """A device handle as the wrapper sees it: which GPU (and MIG slot), and pynvml's own."""

    __slots__ = ("key", "real")

    def __init__(self, key: tuple, real: Any) -> None:
        self.key, self.real = key, real


class Recorder:
    """pynvml (``nv``) with every device call's answer kept in ``passes`` (``begin`` starts
    one) and the functions the binding lacks in ``lacks``."""

    def __init__(self, nv: Any) -> None:
        self._nv = nv
        self.passes: list[dict] = []
        self.lacks: set[str] = set()

    def begin(self, t_s: float) -> None:
        self.passes.append({"t_s": t_s, "gpus": []})

    def __getattr__(self, name: str) -> Any:
        try:
            attr = getattr(self._nv, name)
        except AttributeError:
            if name.startswith("nvml"):
                self.lacks.add(name)
            raise
        if not (name.startswith("nvmlDevice") and callable(attr)):
            return attr
        return lambda *args: self._call(name, attr, args)

    def _error_name(self, exc: Exception) -> str:
        if isinstance(exc, getattr(self._nv, "NVMLLibraryMismatchError", ())):
            return "NVMLLibraryMismatchError"
        value, codes = getattr(exc, "value", None), import_pynvml()
        return next((n for n in dir(codes)
                     if n.startswith("NVML_ERROR_") and getattr(codes, n) == value),
                    "NVML_ERROR_UNKNOWN")

    def _record(self, key: tuple) -> dict:
        """The current pass's record of GPU ``key[1]`` (or of its MIG slot ``key[2]``)."""
        gpus = self.passes[-1]["gpus"]
        while len(gpus) <= key[1]:
            gpus.append({})
        rec = gpus[key[1]]
        return rec if key[0] == "gpu" else rec.setdefault("mig_devices", {}).setdefault(
            str(key[2]), {})

    def _call(self, name: str, fn: Callable, args: tuple) -> Any:
        real = [a.real if isinstance(a, _Handle) else a for a in args]
        if name == "nvmlDeviceGetHandleByIndex":
            key: tuple = ("gpu", int(args[0]))
        elif name == "nvmlDeviceGetMigDeviceHandleByIndex":
            key = ("mig", args[0].key[1], int(args[1]))
        else:
            key = args[0].key
        try:
            out = fn(*real)
        except (self._nv.NVMLError, getattr(self._nv, "NVMLLibraryMismatchError", ())) as exc:
            error = self._error_name(exc)
            if not (key[0] == "mig" and error == "NVML_ERROR_NOT_FOUND"):   # an empty slot
                self._record(key)[name] = {"error": error}
            raise
        if name in ("nvmlDeviceGetHandleByIndex", "nvmlDeviceGetMigDeviceHandleByIndex"):
            self._record(key)
            return _Handle(key, out)
        self._record(key)[name] = plain(out)
        return out

    def nvmlDeviceGetCount(self) -> int:
        count = int(self._nv.nvmlDeviceGetCount())
        for index in range(count):
            self._record(("gpu", index))
        return count


def record(nv: Any, passes: int, interval_s: float, node: str,
           jobs: Callable[[Iterable[str]], Sequence[Job]] | None = None,
           job_of: Callable[[int], str | None] = job_of_pid,
           clock: Callable[[], float] = time.time,
           sleep: Callable[[float], None] = time.sleep,
           warn: Callable[[str], None] | None = None, provenance: str = "") -> dict[str, Any]:
    """``passes`` collector passes over pynvml ``nv``, ``interval_s`` apart, as a replay
    document. ``jobs``: the node's jobs from Slurm (None: not asked)."""
    rec = Recorder(nv)
    now = [clock()]
    pids: dict[str, str | None] = {}
    listed: dict[str, dict] = {}

    def job_of_kept(pid: int) -> str | None:
        pids[str(pid)] = job = job_of(pid)
        return job

    def jobs_kept(seen: Iterable[str]) -> Sequence[Job]:
        got = jobs(seen)                                      # type: ignore[misc]
        for j in got:
            listed[j.job_id] = {"app": j.app, "gpus": {str(u.index): u.shards
                                                       for u in j.uses if u.node == node}}
        return got

    source = NvmlSource(node, Nvml(rec), clock=lambda: now[0], job_of=job_of_kept,
                        jobs=jobs_kept if jobs is not None else None, warn=warn)
    for k in range(passes):
        if k:
            sleep(interval_s)
        now[0] = clock()
        rec.begin(now[0])
        source.read()
    doc: dict[str, Any] = {"format": FORMAT, "provenance": provenance, "node": node,
                           "pids": pids, "jobs": listed}
    if rec.lacks:
        doc["binding_lacks"] = sorted(rec.lacks)
    return {**doc, "passes": rec.passes, "truth_j": {}}
