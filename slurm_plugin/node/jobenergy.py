"""A job's GPU energy on one node: the prolog records each GPU's energy counter, the epilog
takes the difference and writes ``job_energy,job_id=..,user=..,node=.. energy_j=..,co2_g=..``.

A GPU shared by several jobs (shards, MPS) is charged in full to each of them: splitting a
shared GPU's energy between its jobs is the co-location policy's business.
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
from ..telemetry.carbon import CarbonProvider
from ..telemetry.lineproto import Point
from .source import GpuSource

MEASUREMENT = "job_energy"
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

    def point(self, user: str, cluster: str) -> Point:
        fields: dict[str, float | int] = {"energy_j": self.energy_j, "gpus": len(self.gpus),
                                          "duration_s": self.end_s - self.start_s}
        if self.co2_g is not None:
            fields["co2_g"] = self.co2_g
        return Point(MEASUREMENT, {"job_id": self.job_id, "user": user, "cluster": cluster,
                                   "node": self.node}, fields, self.end_s)


def mean_intensity(carbon: CarbonProvider, start_s: float, end_s: float) -> float | None:
    """Mean of the value in force at the start and of every point up to the end; values out
    of bounds (``telemetry.bounds``: NaN, negative, absurd) are left out."""
    values = [v for _, v in carbon.forecast(start_s, end_s)]
    first = carbon.intensity_at(start_s)
    if first is not None:
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
           now_s: float, carbon: CarbonProvider | None = None) -> JobEnergy:
    """Energy since ``record_start`` summed over the job's GPUs. CO2 is left out when the
    carbon provider knows no intensity or fails."""
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
        intensity = mean_intensity(carbon, state["start_s"], now_s) if carbon else None
    except TelemetryError as exc:
        print(f"wattbatch epilog: warning: no carbon intensity: {exc}", file=sys.stderr)
        intensity = None
    co2 = energy / J_PER_KWH * intensity if intensity is not None else None
    return JobEnergy(job_id, node, tuple(sorted(start)), float(state["start_s"]), now_s,
                     energy, co2, intensity)


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
