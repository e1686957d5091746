"""GPU power caps on the node, level-triggered: each collector pass sets every GPU's limit to
what its jobs ask, so a cap reaches a GPU at its job's start, follows a reconcile change, and is
gone once the job has left (the epilog also resets at once).

A job's cap is recorded in its AdminComment (``wb:..;cap=W``: job_submit.lua from wattbatch's
tag, or reconcile's ``power_cap`` action), which users cannot change. A GPU holds one limit, so
on a shared GPU the rule (``physics.power.gpu_cap_w``, which the simulator applies too) is: no
cap unless every running job on it asks for one, and then the highest of their caps. A cap a
job asks for thus never lowers the limit under a co-located job that asked for none, or for a
higher one.

Where a limit cannot be set (no permission, a board without a settable limit), the failure is
reported on stderr by the collector and the GPU keeps its limit: never fatal. A cap is moved
into the settable range of the GPU's model (the catalogue's, for the model NVML names) and
then into the board's own range (NVML's limit constraints).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from ..errors import ConfigError, WattError
from ..model import Gpu, Job
from ..physics import clamp_cap_w
from ..physics.power import gpu_cap_w


def model_clamped(desired: Mapping[int, float | None],
                  model_of: Callable[[int], str]) -> dict[int, float | None]:
    """Each GPU's cap moved into the settable range of its model (``model_of(index)``, any
    catalogued name); a GPU of no catalogued model keeps the cap asked (``apply_caps`` then
    keeps it within the board's own NVML range)."""
    out: dict[int, float | None] = {}
    for index, cap in desired.items():
        if cap is not None:
            try:
                cap = clamp_cap_w(cap, model_of(index))
            except ConfigError:
                pass
        out[index] = cap
    return out


def caps_of(gpu: Gpu, jobs: Mapping[str, Job]) -> float | None:
    return gpu_cap_w((jobs[j].power_cap_w for j in gpu.job_ids if j in jobs and jobs[j].running),
                     gpu.model)


def desired_caps(jobs: Iterable[Job], node: str, indexes: Iterable[int],
                 leaving: str | None = None, gpu_model: str = "V100") -> dict[int, float | None]:
    """GPU index -> the limit it should have now (None: the board's default) on ``node``, from
    the jobs' allocations; ``leaving``: a job to count as gone already (the epilog's own)."""
    asks: dict[int, list[float | None]] = {i: [] for i in indexes}
    for job in jobs:
        if job.running and job.job_id != leaving:
            for use in job.uses:
                if use.node == node and use.index in asks:
                    asks[use.index].append(job.power_cap_w)
    return {i: gpu_cap_w(caps, gpu_model) for i, caps in asks.items()}


def node_jobs(cfg: Any, node: str) -> tuple[Job, ...]:
    """The running jobs of one node (one ``squeue --json --nodelist`` call: a node's collector
    never reads the whole queue)."""
    from ..slurm.cli import slurm_json
    from ..slurm.parse import parse_jobs
    doc = slurm_json("squeue", [f"--nodelist={node}", "--states=RUNNING"], cfg)
    return parse_jobs(doc, active_only=True, warnings=[])


def apply_caps(nvml: Any, desired: Mapping[int, float | None]) -> list[str]:
    """Set each GPU's limit to ``desired`` (None: the board's default) where it differs by 1 W
    or more; returns what could not be set, one line each."""
    failed = []
    for index, cap_w in sorted(desired.items()):
        try:
            lo, hi = nvml.power_limit_range_w(index)
            target = nvml.default_power_limit_w(index) if cap_w is None else cap_w
            target = min(hi, max(lo, target))
            if abs(nvml.power_limit_w(index) - target) >= 1.0:
                nvml.set_power_limit_w(index, target)
        except WattError as exc:
            failed.append(f"power cap {cap_w} W not set on GPU {index}: {exc}")
    return failed
