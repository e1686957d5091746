"""The local cluster's emulated GPUs behind the pynvml calls, live: with
``node.gpu_source = "emulated-nvml"`` the collector reads the fake GPUs through the real NVML
path (``Nvml`` -> ``NvmlSource`` -> ``nvml_attribution`` -> the ledger's split).

Each pass takes one reading of the emulated GPUs (``EmulatedSource``: the energy counters and
each job's true energy advance as with ``"emulated"``, under its lock) and shows each node's
GPUs as NVML would, by the conventions of the synthesised replay files (``nvml_synth``),
answered by ``NvmlReplay`` as a replay of that one pass:

- a GPU's name is the NVML name of its model, so ``NvmlSource`` reads the model from it;
- time-sliced (shard) jobs, and a job holding a whole GPU: each job's two processes are
  compute processes, the first with one per-process sample per pass (the job's utilisation,
  whole percent), beside a monitoring process of no job;
- MPS (site key ``slurm.share_gres = "mps"``, a GPU whose jobs hold MPS shares): the MPS server
  is the one compute process, each job's process is one of its clients, and the one sample is
  the server's (the pool's utilisation), as NVML reports MPS;
- process ids are made up, a job keeping its own while it runs; ``job_of`` maps them back.

Power limits: an emulated GPU's limit is what its jobs ask already (``emulated.gpu_state``,
from the jobs' tags), so a limit the source sets is accepted and changes nothing.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..errors import TelemetryError
from ..model import GpuReading
from ..telemetry.nvml import Nvml
from .nvml_replay import FORMAT, NvmlReplay
from .nvml_synth import board_calls, job_pids, process, samples_at, shared_calls
from .source import GpuSource, NvmlSource


class EmulatedNvml:
    """pynvml's calls over one node's emulated GPUs as the last ``load`` gave them (before
    the first: a node without GPUs). ``mps``: the cluster shares GPUs through MPS."""

    def __init__(self, node: str, mps: bool) -> None:
        self.node, self.mps = node, mps
        self._order: dict[str, int] = {}     # running job -> k: its processes (nvml_synth)
        self._next_k = 0
        self._replay = self._pass(0.0, [], {})

    def __getattr__(self, name: str) -> Any:
        if not name.lower().startswith("nvml"):
            raise AttributeError(name)
        return getattr(self._replay, name)

    def now_s(self) -> float:
        """When the current pass was read."""
        return self._replay.now_s()

    def job_of(self, pid: int) -> str | None:
        """The job of a process of the current pass; None for the monitoring process, the
        MPS server or a process not listed."""
        return self._replay.job_of(pid)

    def load(self, readings: Sequence[GpuReading]) -> None:
        """The next pass: this node's GPUs as one emulated reading gave them."""
        gpus = sorted(readings, key=lambda r: r.index)
        indexes = [r.index for r in gpus]
        if indexes != list(range(len(gpus))):
            raise TelemetryError(f"emulated nvml: {self.node}: GPU indexes {indexes}: NVML "
                                 f"numbers a node's GPUs 0 to {len(gpus) - 1}")
        running = {res.job_id for r in gpus for res in r.residents}
        self._order = {j: k for j, k in self._order.items() if j in running}
        for job in sorted(running - set(self._order)):
            self._order[job], self._next_k = self._next_k, self._next_k + 1
        pid_job: dict[int, str] = {}
        records = [self._gpu(r, pid_job) for r in gpus]
        self._replay = self._pass(gpus[0].taken_s if gpus else self.now_s(), records, pid_job)

    def _gpu(self, r: GpuReading, pid_job: dict[int, str]) -> dict[str, Any]:
        """GPU ``r``'s record of the pass; its jobs' processes go into ``pid_job``."""
        mode = "mps" if self.mps and any(res.shares for res in r.residents) else "shard"
        pids = {res.job_id: job_pids(mode, self._order[res.job_id]) for res in r.residents}
        pid_job.update({p: job for job, ps in pids.items() for p in ps})
        return {**board_calls(r.model, r.power_w, r.energy_j * 1000, r.mem_used_mib,
                              r.power_limit_w),
                **shared_calls(mode, r.index, r.util_pct,
                               [process(p, res.app) for res in r.residents
                                for p in pids[res.job_id]],
                               samples_at(mode, r.index, r.taken_s,
                                          [(pids[res.job_id], res.util_pct or 0.0)
                                           for res in r.residents]))}

    def _pass(self, t_s: float, records: list[dict], pid_job: dict[int, str]) -> NvmlReplay:
        return NvmlReplay({"format": FORMAT, "node": self.node,
                           "provenance": "emulated GPUs, one live pass",
                           "pids": {str(p): j for p, j in pid_job.items()},
                           "passes": [{"t_s": t_s, "gpus": records}]}, f"emulated {self.node}")


class EmulatedNvmlSource:
    """``GpuSource``: the GPUs ``emulated`` reads (an ``EmulatedSource`` of one node, a list,
    or ``all``) read through NVML, one emulated reading per pass for all of them. Each node's
    GPUs are read by ``nvml_source(node, nvml=..., clock=..., job_of=...)`` (an
    ``NvmlSource`` with the site's Slurm lookup and caps; plain ``NvmlSource``: none) over
    its ``EmulatedNvml``."""

    def __init__(self, emulated: GpuSource, mps: bool,
                 nvml_source: Callable[..., GpuSource] = NvmlSource) -> None:
        self.emulated, self.mps, self._nvml_source = emulated, mps, nvml_source
        self._nodes: dict[str, tuple[EmulatedNvml, GpuSource]] = {}

    def read(self) -> list[GpuReading]:
        by_node: dict[str, list[GpuReading]] = {}
        for r in self.emulated.read():
            by_node.setdefault(r.node, []).append(r)
        out = []
        for node, readings in by_node.items():
            if node not in self._nodes:
                module = EmulatedNvml(node, self.mps)
                self._nodes[node] = (module, self._nvml_source(
                    node, nvml=Nvml(module), clock=module.now_s, job_of=module.job_of))
            module, source = self._nodes[node]
            module.load(readings)
            out += source.read()
        return out
