"""A job's GPU energy on one node, as the epilog reports it.

The node collector charges every GPU's energy to the jobs on it as it goes (``ledger``), a
shared GPU's split between its jobs (``split``). The epilog closes the job's ledger and writes
``job_energy`` (see ``JobEnergy.point``). Where the ledger has nothing for the job (no collector
ran), the prolog's record of the job's GPU energy counters at its start is the fallback: the
counters' difference, which is right for GPUs the job held alone (``split=counters``).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from ..errors import InputError, TelemetryError
from ..telemetry.bounds import Rejected, checked
from ..formats.carbon_series import CarbonProvider, is_stale
from ..telemetry.lineproto import Point
from .source import GpuSource

MEASUREMENT = "job_energy"
SUMMARY_PREFIX = "wb-energy:"     # the epilog's summary in AdminComment
J_PER_KWH = 3.6e6


def job_gpus(environ: Mapping[str, str]) -> tuple[int, ...]:
    """GPU indexes of the job from ``SLURM_JOB_GPUS`` (e.g. ``0,2``); () when unset/empty."""
    raw = environ.get("SLURM_JOB_GPUS", "").strip()
    try:
        return tuple(sorted({int(x) for x in raw.split(",") if x.strip()}))
    except ValueError:
        raise InputError(f"job energy: SLURM_JOB_GPUS = {raw!r}: expected GPU indexes like "
                         "0,1") from None


def state_path(state_dir: str | os.PathLike, job_id: str) -> Path:
    if not job_id or not job_id.replace("_", "").isalnum():
        raise InputError(f"job energy: SLURM_JOB_ID = {job_id!r}: expected a Slurm job id")
    return Path(state_dir) / "jobs" / f"{job_id}.json"


def record_start(source: GpuSource, job_id: str, gpus: tuple[int, ...],
                 state_dir: str | os.PathLike, now_s: float) -> dict:
    """Store each of the job's GPU energy counters at its start (atomically)."""
    by_index = {r.index: r.energy_j for r in source.read()}
    missing = [i for i in gpus if i not in by_index]
    if missing:
        raise InputError(f"job energy: SLURM_JOB_GPUS names GPU {missing[0]} but the GPU source "
                         f"reads only {sorted(by_index)}")
    state = {"job_id": job_id, "start_s": now_s,
             "energy_j": {str(i): by_index[i] for i in gpus}}
    path = state_path(state_dir, job_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)
    return state


@dataclass(frozen=True, slots=True)
class JobEnergy:
    job_id: str
    node: str
    gpus: tuple[int, ...]
    start_s: float
    end_s: float
    energy_j: float
    co2_g: float | None
    gco2_per_kwh: float | None
    idle_j: float = 0.0
    gpu_s: float = 0.0
    shared_gpu_s: float = 0.0
    split: str = "counters"       # exclusive, util-solo, util-class, util, shards, counters
    app: str = ""

    def point(self, user: str, cluster: str, account: str = "", partition: str = "") -> Point:
        fields: dict[str, float | int | str] = {
            "energy_j": self.energy_j, "gpus": len(self.gpus),
            "duration_s": self.end_s - self.start_s, "idle_j": self.idle_j,
            "gpu_s": self.gpu_s, "shared_gpu_s": self.shared_gpu_s, "split": self.split}
        if self.gpus:       # which GPUs: the report finds who shared them (a string field)
            fields["gpu_indexes"] = ",".join(str(i) for i in self.gpus)
        if self.co2_g is not None:
            fields["co2_g"] = self.co2_g
        return Point(MEASUREMENT, {"job_id": self.job_id, "user": user, "account": account,
                                   "partition": partition, "cluster": cluster,
                                   "node": self.node, "app": self.app}, fields, self.end_s)

    def summary(self) -> str:
        """The ``wb-energy:`` summary kept in the job's AdminComment (``sacct -o AdminComment``)."""
        parts = [f"energy_j={self.energy_j:.0f}"]
        if self.co2_g is not None:
            parts.append(f"co2_g={self.co2_g:.1f}")
        parts += [f"shared_gpu_s={self.shared_gpu_s:.0f}", f"split={self.split}"]
        return SUMMARY_PREFIX + ";".join(parts)


def from_ledger(job_id: str, node: str, entry: Mapping, end_s: float,
                carbon: CarbonProvider | None = None, max_age_s: float = 0.0) -> JobEnergy:
    """The job's figures on ``node`` from its ledger entry: what the collector charged it,
    pass by pass (so the shares of a GPU add up to its counter; a job's first and last
    collector interval are its error, one interval over its run time). CO2 over the part of
    the energy charged while no intensity was known is estimated at the run's mean
    intensity (``mean_intensity``: none where the zone's data is stale)."""
    energy = float(entry.get("energy_j", 0.0))
    start = float(entry.get("first_s", end_s))
    co2, covered = entry.get("co2_g"), float(entry.get("co2_energy_j", 0.0))
    intensity = None
    if co2 is not None and covered > 0:
        intensity = float(co2) / covered * J_PER_KWH
    elif carbon is not None:
        try:
            intensity = mean_intensity(carbon, start, end_s, max_age_s)
        except TelemetryError as exc:
            print(f"wattbatch epilog: warning: no carbon intensity: {exc}", file=sys.stderr)
    co2_g = (float(co2 or 0.0) + (energy - covered) / J_PER_KWH * intensity
             if intensity is not None else None)
    methods = entry.get("method_j") or {}
    split = max(methods, key=methods.get) if methods else "exclusive"
    return JobEnergy(job_id, node, tuple(entry.get("gpus", ())), start, end_s, energy, co2_g,
                     intensity, idle_j=float(entry.get("idle_j", 0.0)),
                     gpu_s=float(entry.get("gpu_s", 0.0)),
                     shared_gpu_s=float(entry.get("shared_gpu_s", 0.0)), split=split,
                     app=str(entry.get("app", "")))


def mean_intensity(carbon: CarbonProvider, start_s: float, end_s: float,
                   max_age_s: float = 0.0) -> float | None:
    """Mean of the value in force at the start and of every point up to the end; values out
    of bounds (``telemetry.bounds``: NaN, negative, absurd) are left out, and so is the value
    at the start where it is older than ``max_age_s`` (``telemetry.carbon.is_stale``; 0: any
    age): a run with no point of its own then has no intensity."""
    values = [v for _, v in carbon.forecast(start_s, end_s)]
    first = carbon.intensity_at(start_s)
    if first is not None and not is_stale(carbon, start_s, max_age_s):
        values.insert(0, first)
    values = [v for v in values if _sane(v)]
    return sum(values) / len(values) if values else None


def _sane(g_per_kwh: object) -> bool:
    try:
        checked(g_per_kwh, "gco2_per_kwh", "carbon_intensity")
    except Rejected:
        return False
    return True


def finish(source: GpuSource, node: str, job_id: str, state_dir: str | os.PathLike,
           now_s: float, carbon: CarbonProvider | None = None,
           max_age_s: float = 0.0) -> JobEnergy:
    """Energy since ``record_start`` summed over the job's GPUs. CO2 is left out when the
    carbon provider knows no intensity (or only a stale one: ``mean_intensity``) or fails."""
    path = state_path(state_dir, job_id)
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"job energy: {path}: no readable start record ({exc}); did the "
                         "prolog run for this job?") from None
    start = {int(k): float(v) for k, v in state["energy_j"].items()}
    now = {r.index: r.energy_j for r in source.read()}
    energy = sum(max(0.0, now[i] - e0) for i, e0 in start.items() if i in now)
    try:
        intensity = mean_intensity(carbon, state["start_s"], now_s, max_age_s) \
            if carbon else None
    except TelemetryError as exc:
        print(f"wattbatch epilog: warning: no carbon intensity: {exc}", file=sys.stderr)
        intensity = None
    co2 = energy / J_PER_KWH * intensity if intensity is not None else None
    return JobEnergy(job_id, node, tuple(sorted(start)), float(state["start_s"]), now_s,
                     energy, co2, intensity, gpu_s=(now_s - float(state["start_s"])) * len(start))


def run_hook(hook: str, body: Callable[[Mapping[str, str]], object]) -> int:
    """Run a prolog/epilog body on this process's environment; never fail the job (a non-zero
    exit would drain the node): any problem is one warning line on stderr, exit 0."""
    try:
        body(os.environ)
    except Exception as exc:    # noqa: BLE001 - a node hook must never drain the node
        print(f"wattbatch {hook}: warning: {exc}", file=sys.stderr)
    return 0


def forget(state_dir: str | os.PathLike, job_id: str) -> None:
    """Drop the start record once the job's energy is stored."""
    state_path(state_dir, job_id).unlink(missing_ok=True)
