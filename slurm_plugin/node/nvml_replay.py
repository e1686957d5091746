"""Recorded NVML passes, replayed through the real ``Nvml`` wrapper (tests and benchmarks on
machines without a GPU). ``NvmlReplay`` offers the pynvml calls the wrapper makes, answering
each from the current pass of a replay file; ``replay_source`` is the collector's NVML source
on it. ``scripts/record_nvml.py`` records such a file on a GPU node (``nvml_record.py``);
``nvml_synth.py`` makes them from the emulated physics.

The file is JSON (``FORMAT``)::

    {"format": "wattbatch-nvml-replay/1",
     "provenance": "how it was made",
     "node": "n1",
     "pids": {"4001": "101", "3000": null},         # pid -> its Slurm job (null: none)
     "jobs": {"101": {"app": "vgg16", "gpus": {"0": 50}}},   # Slurm: class, shares by GPU
     "binding_lacks": ["nvmlDeviceGetMPSComputeRunningProcesses"],   # optional
     "passes": [{"t_s": 1700000000.0,
                 "gpus": [{"nvmlDeviceGetPowerUsage": 312000, ...,
                           "mig_devices": {"0": {"nvmlDeviceGetAttributes": {...}, ...}}}]}],
     "truth_j": {"101": 12345.6}}                   # each job's true energy, where known

Each GPU (and MIG device, by slot) maps a pynvml function to what it returned in that pass,
in NVML's units (milliwatts, millijoules, bytes, microsecond timestamps): a number, a string,
a list, or a structure as an object of its fields; or ``{"error": "NVML_ERROR_..."}`` for the
error it raised (``NVMLLibraryMismatchError`` for pynvml's own, raised where the driver lacks
the version an unversioned function calls). A function a GPU's record lacks answers
``NVML_ERROR_FUNCTION_NOT_FOUND``; one in ``binding_lacks`` is missing from the module, as in
an old pynvml.
``nvmlDeviceGetProcessUtilization`` answers the recorded samples newer than the time asked
(``NVML_ERROR_NOT_FOUND`` when none is), ``nvmlDeviceGetCount`` the pass's GPUs, and
``nvmlDeviceSetPowerManagementLimit`` is kept in ``limits_set``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterable, Iterator, Mapping

from ..errors import InputError
from ..model import GpuUse, Job
from ..telemetry.nvml import Nvml, import_pynvml
from .source import NvmlSource

FORMAT = "wattbatch-nvml-replay/1"


def dumps(doc: Mapping[str, Any]) -> str:
    """A replay document as its file's text: one line per key, one line per pass."""
    head = [f" {json.dumps(k)}: {json.dumps(v, sort_keys=True)}"
            for k, v in doc.items() if k != "passes"]
    passes = ",\n".join("  " + json.dumps(p, sort_keys=True, separators=(",", ":"))
                         for p in doc["passes"])
    return "{\n" + ",\n".join(head + [f' "passes": [\n{passes}\n ]']) + "\n}\n"


def _obj(value: Any) -> Any:
    """A recorded value as pynvml gives it: structures as objects with their fields."""
    if isinstance(value, dict):
        return SimpleNamespace(**{k: _obj(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_obj(v) for v in value]
    return value


class NvmlReplay:
    """A replay file's passes, one at a time (``passes()``), behind the pynvml calls."""

    def __init__(self, doc: Mapping[str, Any], origin: str = "replay") -> None:
        self._nv = import_pynvml()          # its error classes and constants
        self.origin = origin
        if doc.get("format") != FORMAT:
            raise self._bad("format", doc.get("format"), f"expected {FORMAT!r}")
        passes = doc.get("passes")
        if not isinstance(passes, list) or not passes:
            raise self._bad("passes", passes, "expected a non-empty list of passes")
        for k, p in enumerate(passes):
            if not isinstance(p, dict) or not isinstance(p.get("t_s"), (int, float)) \
                    or not isinstance(p.get("gpus"), list):
                raise self._bad(f"passes[{k}]", p, "expected {\"t_s\": seconds, \"gpus\": [...]}")
        self._passes = passes
        self.node = str(doc.get("node", "n1"))
        self.provenance = str(doc.get("provenance", ""))
        self.truth_j = {str(k): float(v) for k, v in (doc.get("truth_j") or {}).items()}
        self._pids = {int(k): v for k, v in (doc.get("pids") or {}).items()}
        self._jobs = tuple(Job(str(j), "RUNNING", app=str(v.get("app", "")), nodes=(self.node,),
                               uses=tuple(GpuUse(self.node, int(i), int(n))
                                          for i, n in (v.get("gpus") or {}).items()))
                           for j, v in (doc.get("jobs") or {}).items())
        self._lacks = frozenset(doc.get("binding_lacks") or ())
        self.at = 0
        self.limits_set: list[tuple[float, int, int]] = []   # (t_s, GPU index, milliwatts)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "NvmlReplay":
        try:
            doc = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise InputError(f"nvml replay {path}: cannot read ({exc})") from None
        return cls(doc, str(path))

    def _bad(self, key: str, value: Any, fix: str) -> InputError:
        shown = repr(value) if len(repr(value)) < 80 else repr(value)[:77] + "..."
        return InputError(f"nvml replay {self.origin}: {key} = {shown}: {fix}")

    # --- the replay's course ----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._passes)

    def passes(self) -> Iterator[int]:
        """Step through the passes: each one is current while the loop body runs."""
        for k in range(len(self._passes)):
            self.at = k
            yield k

    def now_s(self) -> float:
        return float(self._passes[self.at]["t_s"])

    def job_of(self, pid: int) -> str | None:
        job = self._pids.get(int(pid))
        return None if job is None else str(job)

    def node_jobs(self, seen: Iterable[str] = ()) -> tuple[Job, ...]:
        return self._jobs

    # --- pynvml ---------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        if name in self._lacks:
            raise AttributeError(f"pynvml (replayed) has no {name}")
        special = getattr(type(self), f"_{name}", None) if name.startswith("nvml") else None
        if special is not None:
            return special.__get__(self)
        if name.startswith("nvmlDevice"):
            return lambda handle, *args: self._answer(handle, name)
        if name.startswith("NVML"):         # error classes and constants
            return getattr(self._nv, name)
        raise AttributeError(name)

    def _error(self, name: str) -> Exception:
        if name == "NVMLLibraryMismatchError":   # pynvml's: the driver lacks this version
            return self._nv.NVMLLibraryMismatchError(name)
        return self._nv.NVMLError(getattr(self._nv, name))

    def _record(self, handle: tuple) -> dict:
        gpus = self._passes[self.at]["gpus"]
        if handle[1] >= len(gpus):
            raise self._error("NVML_ERROR_GPU_IS_LOST")
        rec = gpus[handle[1]]
        return rec if handle[0] == "gpu" else rec.get("mig_devices", {}).get(str(handle[2]), {})

    def _answer(self, handle: tuple, name: str) -> Any:
        value = self._record(handle).get(name)
        if value is None:
            raise self._error("NVML_ERROR_FUNCTION_NOT_FOUND")
        if isinstance(value, dict) and set(value) == {"error"}:
            raise self._error(value["error"])
        return _obj(value)

    def _nvmlInit(self) -> None:
        pass

    def _nvmlShutdown(self) -> None:
        pass

    def _nvmlDeviceGetCount(self) -> int:
        return len(self._passes[self.at]["gpus"])

    def _opened(self, handle: tuple, name: str) -> tuple:
        """``handle``, or the error its record holds for the call that opens it."""
        got = self._record(handle).get(name)
        if isinstance(got, dict) and set(got) == {"error"}:
            raise self._error(got["error"])
        return handle

    def _nvmlDeviceGetHandleByIndex(self, index: int) -> tuple:
        return self._opened(("gpu", int(index)), "nvmlDeviceGetHandleByIndex")

    def _nvmlDeviceGetMigDeviceHandleByIndex(self, handle: tuple, slot: int) -> tuple:
        if str(slot) not in self._record(handle).get("mig_devices", {}):
            raise self._error("NVML_ERROR_NOT_FOUND")
        return self._opened(("mig", handle[1], int(slot)), "nvmlDeviceGetMigDeviceHandleByIndex")

    def _nvmlDeviceGetProcessUtilization(self, handle: tuple, since_us: int) -> list:
        samples = [s for s in self._answer(handle, "nvmlDeviceGetProcessUtilization")
                   if s.timeStamp > since_us]
        if not samples:
            raise self._error("NVML_ERROR_NOT_FOUND")
        return samples

    def _nvmlDeviceSetPowerManagementLimit(self, handle: tuple, limit_mw: int) -> None:
        self.limits_set.append((self.now_s(), handle[1], int(limit_mw)))


def replay_source(replay: NvmlReplay, warn: Callable[[str], None] | None = None,
                  caps: Callable[[range], Mapping[int, float | None]] | None = None,
                  ) -> NvmlSource:
    """The collector's NVML source over ``replay``: the real ``Nvml`` wrapper on its calls,
    its clock, its pids' jobs and its Slurm jobs."""
    return NvmlSource(replay.node, Nvml(replay), clock=replay.now_s, job_of=replay.job_of,
                      caps=caps, jobs=replay.node_jobs, warn=warn)
