"""Which Slurm jobs use a GPU read through NVML, and how much of it, from one pass's NVML
answers. Pure. The rules (docs/energy.md, "Real GPUs"):

- **Time-sliced and shard jobs**: a job's utilisation is the sum, over its processes on the
  GPU, of each one's mean SM utilisation (``nvmlDeviceGetProcessUtilization``). A process of
  no Slurm job is left out.
- **MPS**: the clients (``nvmlDeviceGetMPSComputeRunningProcesses``) make their jobs resident;
  every other process on the GPU is taken for the MPS server. When every MPS job has samples
  of its own, they are its utilisation. Otherwise the pool's utilisation (the server's samples,
  else the GPU's) is divided between the jobs by the shares (MPS percent) each holds times its
  class's utilisation in that group: its solo utilisation over its slowdown beside the others,
  as the calibrated co-location model says (the default class for a job naming none). The
  split then weights each job by shares and class.
- **MIG**: each job holds the GPU-instance slices of the MIG devices its processes are on;
  NVML has no utilisation per instance and instances do not slow each other, so a job's
  utilisation is its class's solo utilisation times its share of the GPU's instantiated
  slices, and the split weights that by the class's watts per point (as for MPS).

A job's shares come from Slurm (``shares``: job -> shares held on this GPU), its class from its
own tag (``apps``); both empty when Slurm could not be asked.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

from ..errors import InputError
from ..model import Resident
from ..physics import JobClass, group_slowdowns, job_class
from ..record import record
from .emulated import DEFAULT_APP


@record
class GpuProcesses:
    """One GPU's NVML answers of one pass; None: the call failed (the reading says which)."""

    compute_pids: tuple[int, ...] | None
    mps_pids: tuple[int, ...] | None
    util_by_pid: Mapping[int, float] | None
    gpu_util_pct: float | None


def _class(app: str) -> JobClass:
    """The class ``app`` names; the default class for an unknown or empty one."""
    try:
        return job_class(app or DEFAULT_APP)
    except InputError:
        return job_class(DEFAULT_APP)


def _by_job(pids: Iterable[int], job_of: Callable[[int], str | None]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for pid in sorted(set(pids)):
        job = job_of(pid)
        if job is not None:
            out.setdefault(job, []).append(pid)
    return out


def _measured(by_job: Mapping[str, list[int]], util: Mapping[int, float]) -> dict[str, float]:
    return {job: sum(util.get(p, 0.0) for p in pids) for job, pids in by_job.items()}


def mps_estimate(jobs: Iterable[str], pool_pct: float, shares: Mapping[str, int],
                 apps: Mapping[str, str], model: str = "V100") -> dict[str, float]:
    """``pool_pct`` divided between ``jobs`` by shares held (at least 1) x each class's
    utilisation in the group (solo utilisation / slowdown among the others on a GPU of
    ``model``, as the calibrated co-location model says: its time-sliced slowdowns, the
    figures this split was checked with, docs/energy.md)."""
    jobs = sorted(jobs)
    classes = [_class(apps.get(j, "")) for j in jobs]
    slow = group_slowdowns([c.name for c in classes], model=model)
    weights = [max(1, shares.get(j, 0)) * c.util_at(1) / s
               for j, c, s in zip(jobs, classes, slow)]
    total = sum(weights)
    return {j: pool_pct * w / total if total > 0 else 0.0 for j, w in zip(jobs, weights)}


def process_residents(procs: GpuProcesses, job_of: Callable[[int], str | None],
                      shares: Mapping[str, int], apps: Mapping[str, str],
                      model: str = "V100") -> tuple[Resident, ...]:
    """The jobs on a GPU (of ``model``) not in MIG mode, each with its utilisation (None: not
    known)."""
    util = procs.util_by_pid
    clients = set(procs.mps_pids or ())
    if clients:
        by_job = _by_job(clients, job_of)
        if util is not None and all(any(p in util for p in pids) for pids in by_job.values()):
            per_job: Mapping[str, float] | None = _measured(by_job, util)
        else:
            pool = sum(u for p, u in (util or {}).items() if p not in clients)
            pool = pool or procs.gpu_util_pct
            per_job = None if pool is None else mps_estimate(by_job, pool, shares, apps, model)
    else:
        by_job = _by_job(set(procs.compute_pids or ()) | set(util or ()), job_of)
        per_job = None if util is None else _measured(by_job, util)
    return tuple(Resident(j, shares.get(j, 0), None if per_job is None else per_job[j],
                          apps.get(j, "")) for j in sorted(by_job))


def mig_residents(devices: Iterable[tuple[int, int, tuple[int, ...]]],
                  job_of: Callable[[int], str | None],
                  apps: Mapping[str, str]) -> tuple[Resident, ...]:
    """The jobs on a GPU in MIG mode from its MIG devices (slot, slices, processes): each
    holds the slices of the devices it has a process on. NVML gives no utilisation per
    instance, and instances do not slow each other: a job's utilisation is taken as its
    class's solo utilisation on its share of the GPU's instantiated slices."""
    devices = list(devices)
    total = sum(n for _slot, n, _pids in devices)
    slices: dict[str, int] = {}
    for _slot, n, pids in devices:
        for job in _by_job(pids, job_of):
            slices[job] = slices.get(job, 0) + n
    return tuple(Resident(j, n, n / total * _class(apps.get(j, "")).util_at(1),
                          apps.get(j, "")) for j, n in sorted(slices.items()))
