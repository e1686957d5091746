"""Readers that turn the InfluxDB measurements into ``model.Readings`` for the policies.

``gpu,cluster=..,node=..,gpu=..`` -> latest ``GpuReading`` per (node, gpu);
``job_progress,job_id=..`` -> latest ``Progress`` per job; carbon from a ``CarbonProvider``.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Iterable

from ..model import GpuReading, Progress, Readings
from .carbon import CarbonProvider
from .influx import InfluxClient, quote_str
from .lineproto import time_ns

GPU = "gpu"
PROGRESS = "job_progress"


def _num(row: dict[str, Any], key: str, default: float = 0.0) -> float:
    value = row.get(key)
    return float(value) if value is not None else default


def latest_gpu_readings(client: InfluxClient, now_s: float, *, max_age_s: float = 300.0,
                        cluster: str = "") -> dict[tuple[str, int], GpuReading]:
    """The newest ``gpu`` point of each (node, gpu) seen in the last ``max_age_s``.

    A field missing from that point reads 0.0."""
    where = f"time > {time_ns(now_s - max_age_s)} AND time <= {time_ns(now_s)}"
    if cluster:
        where += f' AND "cluster" = {quote_str(cluster)}'
    out: dict[tuple[str, int], GpuReading] = {}
    for s in client.query(f'SELECT * FROM "{GPU}" WHERE {where} GROUP BY "node", "gpu" '
                          "ORDER BY time DESC LIMIT 1"):
        try:
            index = int(s.tags.get("gpu", ""))
        except ValueError:
            continue        # not a GPU index: someone else's point
        for row in s.rows():
            node = s.tags.get("node", "")
            out[(node, index)] = GpuReading(
                node=node, index=index, power_w=_num(row, "power_w"),
                energy_j=_num(row, "energy_j"), util_pct=_num(row, "util_pct"),
                mem_used_mib=_num(row, "mem_used_mib"),
                power_limit_w=_num(row, "power_limit_w"), taken_s=float(row["time"]))
    return out


def latest_progress(client: InfluxClient, now_s: float, *, max_age_s: float | None = None,
                    job_ids: Iterable[str] = ()) -> dict[str, Progress]:
    """The newest ``job_progress`` point of each job (only ``job_ids`` when given)."""
    clauses = [f"time <= {time_ns(now_s)}"]
    if max_age_s is not None:
        clauses.append(f"time > {time_ns(now_s - max_age_s)}")
    ids = sorted(set(job_ids))
    if ids:
        clauses.append("(" + " OR ".join(f'"job_id" = {quote_str(j)}' for j in ids) + ")")
    out: dict[str, Progress] = {}
    for s in client.query(f'SELECT * FROM "{PROGRESS}" WHERE {" AND ".join(clauses)} '
                          'GROUP BY "job_id" ORDER BY time DESC LIMIT 1'):
        job_id = s.tags.get("job_id", "")
        for row in s.rows():
            taken_s = float(row["time"])
            out[job_id] = Progress(
                job_id=job_id, step=int(_num(row, "step")),
                samples_per_s=_num(row, "samples_per_s"), epoch=int(_num(row, "epoch")),
                steps_per_epoch=int(_num(row, "steps_per_epoch")),
                total_steps=int(_num(row, "total_steps")), taken_s=taken_s,
                started_s=_num(row, "started_s", taken_s))
    return out


def read_readings(client: InfluxClient, now_s: float, *, carbon: CarbonProvider | None = None,
                  cluster: str = "", job_ids: Iterable[str] = (),
                  gpu_max_age_s: float = 300.0, progress_max_age_s: float = 7 * 86400.0,
                  forecast_horizon_s: float = 48 * 3600.0) -> Readings:
    """Everything a policy may use at ``now_s``, in one frozen ``Readings``.

    Progress is read for ``job_ids`` when given, else for every job seen in
    ``progress_max_age_s``; the carbon forecast covers ``forecast_horizon_s``."""
    gpus = latest_gpu_readings(client, now_s, max_age_s=gpu_max_age_s, cluster=cluster)
    progress = latest_progress(client, now_s, max_age_s=progress_max_age_s, job_ids=job_ids)
    now_g = forecast = None
    if carbon is not None:
        now_g = carbon.intensity_at(now_s)
        forecast = carbon.forecast(now_s, now_s + forecast_horizon_s)
    return Readings(gpus=MappingProxyType(gpus), progress=MappingProxyType(progress),
                    carbon_g_per_kwh=now_g, carbon_forecast=forecast or (), taken_s=now_s)
