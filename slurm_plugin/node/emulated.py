"""Emulated GPUs for the local test cluster, driven by the calibrated physics.

The fake GPU device nodes have no power, utilisation or memory of their own. This source reads
which jobs Slurm placed on each GPU of the node (one ``squeue``/``sinfo`` snapshot), and asks
``physics`` what those jobs draw together: per-GPU utilisation and power, a monotone energy
counter integrated between reads (kept in a small state file), and each running job's
interference slowdown, written to ``<node.state_dir>/emulated/slowdown-<job_id>`` where the
emulated training job reads it before every step. The simulator uses the same functions.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable

from ..errors import InputError
from ..model import Cluster, Gpu, GpuReading, Job
from ..physics import (group_slowdowns, idle_power_w, job_class, max_power_w, shared_gpu_power_w,
                       shared_gpu_util)

DEFAULT_APP = "resnet18"   # class of a GPU job that names none (see docs/physics.md)


def slowdown_path(state_dir: str | os.PathLike, job_id: str) -> Path:
    return Path(state_dir) / "emulated" / f"slowdown-{job_id}"


def _class(job: Job):
    try:
        return job_class(job.app or DEFAULT_APP)
    except InputError:
        return job_class(DEFAULT_APP)


def gpu_state(gpu: Gpu, jobs: dict[str, Job]) -> tuple[float, float, float, dict[str, float]]:
    """(util_pct, power_w, mem_used_mib, {job_id: slowdown}) of one GPU from its resident jobs."""
    resident = [jobs[j] for j in gpu.job_ids if j in jobs and jobs[j].running]
    if not resident:
        return 0.0, idle_power_w(gpu.model), 0.0, {}
    classes = [_class(j) for j in resident]
    n_gpus = [max(1, len(j.uses)) for j in resident]
    slow = group_slowdowns([c.name for c in classes])
    rates = [1 / s for s in slow]
    util = shared_gpu_util([c.util_at(n) for c, n in zip(classes, n_gpus)], rates)
    power = shared_gpu_power_w([c.dynamic_power_at(n, gpu.model) for c, n in zip(classes, n_gpus)],
                               rates, model=gpu.model)
    mem = float(min(gpu.memory_mib, sum(c.memory_mib for c in classes)))
    return util, power, mem, {j.job_id: s for j, s in zip(resident, slow)}


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
        cluster = self._snapshot()
        wanted = None if self.nodes == "all" else set(self.nodes.split(","))
        gpus = [g for n in cluster.nodes if wanted is None or n.name in wanted for g in n.gpus]
        now_s = self._clock()
        energy = self._load()            # "node:index" -> [t_s, power_w, energy_j]
        jobs = dict(cluster.jobs)
        out = []
        for gpu in gpus:
            util, power, mem, slow = gpu_state(gpu, jobs)
            key = f"{gpu.node}:{gpu.index}"
            t0, p0, e0 = energy.get(key, [now_s, power, 0.0])
            e = e0 + max(0.0, now_s - t0) * (p0 + power) / 2
            energy[key] = [now_s, power, e]
            for job_id, s in slow.items():
                path = slowdown_path(self.state_dir, job_id)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(f"{s:.4f}\n")
            out.append(GpuReading(node=gpu.node, index=gpu.index, power_w=power, energy_j=e,
                                  util_pct=util, mem_used_mib=mem,
                                  power_limit_w=max_power_w(gpu.model), taken_s=now_s))
        self._save(energy)
        return out
