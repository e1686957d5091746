"""``job_energy`` points (one per job per node, time = job end) as ``EnergyRecord``s, and the
grid's carbon intensity, read from InfluxDB. ``record_from_row`` is pure and tested alone.

Fields the first epilog did not write (``gpu_s``, ``shared_gpu_s``, ``idle_j``, ``split``)
default to ``gpus * duration_s``, 0, None and "": such a job counts as exclusive; without
``gpu_indexes`` the record's co-runners are every shared record of its node. A job array's
task is named ``A_T`` (``array_task``) from what ``sacct`` says of its raw ``job_id``
(``job_names``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import InputError
from ..telemetry.influx import InfluxClient, quote_str
from ..telemetry.lineproto import time_ns

MEASUREMENT = "job_energy"
CARBON_MEASUREMENT = "carbon_intensity"
TAGS = ("job_id", "user", "account", "partition", "cluster", "node", "app")


@dataclass(frozen=True, slots=True)
class EnergyRecord:
    job_id: str
    node: str
    end_s: float
    energy_j: float
    duration_s: float
    gpus: int
    gpu_s: float
    shared_gpu_s: float
    co2_g: float | None = None
    idle_j: float | None = None
    split: str = ""
    user: str = ""
    account: str = ""
    partition: str = ""
    cluster: str = ""
    app: str = ""
    array_task: str = ""        # "14543_1" for a job array's task, else ""
    gpu_indexes: tuple[int, ...] | None = None    # the node's GPUs it held; None: not recorded

    @property
    def start_s(self) -> float:
        return self.end_s - self.duration_s

    @property
    def job_label(self) -> str:
        """How the job is named to people: its array task (as ``sacct`` shows it), else its
        raw id."""
        return self.array_task or self.job_id


def _num(row: Mapping[str, Any], key: str, where: str) -> float | None:
    v = row.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(f"report: {where}: field {key} = {v!r}: expected a number; the "
                         f"{MEASUREMENT} record was not written by wattbatch's epilog")
    return float(v)


def _indexes(value: Any) -> tuple[int, ...] | None:
    """The ``gpu_indexes`` field (``0,2``); None when absent (an older epilog) or malformed."""
    if not isinstance(value, str) or not value:
        return None
    parts = value.split(",")
    if not all(p.isascii() and p.isdigit() for p in parts):
        return None
    return tuple(sorted({int(p) for p in parts}))


def record_from_row(row: Mapping[str, Any]) -> EnergyRecord:
    """One row of ``SELECT * FROM job_energy`` (tags and fields as columns, time in s)."""
    where = f"{MEASUREMENT} job_id={row.get('job_id')!r} node={row.get('node')!r}"
    energy = _num(row, "energy_j", where)
    duration = _num(row, "duration_s", where)
    if energy is None or duration is None or not row.get("job_id"):
        raise InputError(f"report: {where}: a record needs job_id, energy_j and duration_s; "
                         "it was not written by wattbatch's epilog")
    gpus = int(_num(row, "gpus", where) or 0)
    gpu_s = _num(row, "gpu_s", where)
    gpu_s = gpus * duration if gpu_s is None else gpu_s
    shared = _num(row, "shared_gpu_s", where) or 0.0
    text = {k: str(row.get(k) or "") for k in TAGS}
    return EnergyRecord(job_id=text["job_id"], node=text["node"], end_s=float(row["time"]),
                        energy_j=energy, duration_s=duration, gpus=gpus, gpu_s=gpu_s,
                        shared_gpu_s=min(shared, gpu_s), co2_g=_num(row, "co2_g", where),
                        idle_j=_num(row, "idle_j", where), split=str(row.get("split") or ""),
                        user=text["user"], account=text["account"],
                        partition=text["partition"], cluster=text["cluster"],
                        app=text["app"].lower(), gpu_indexes=_indexes(row.get("gpu_indexes")))


def read_records(client: InfluxClient, since_s: float, until_s: float,
                 cluster: str | None = None) -> list[EnergyRecord]:
    """Records of jobs that ended in ``[since_s, until_s)``, optionally of one cluster."""
    where = f"time >= {time_ns(since_s)} AND time < {time_ns(until_s)}"
    if cluster:
        where += f' AND "cluster" = {quote_str(cluster)}'
    out = []
    for s in client.query(f'SELECT * FROM "{MEASUREMENT}" WHERE {where}'):
        out.extend(record_from_row(r) for r in s.rows())
    return out


def read_intensity(client: InfluxClient, zone: str, since_s: float, until_s: float
                   ) -> list[tuple[float, float]]:
    """Hourly mean ``gco2_per_kwh`` of ``zone`` over the period (hours with data only)."""
    series = client.query(
        f'SELECT mean("gco2_per_kwh") FROM "{CARBON_MEASUREMENT}" WHERE "zone" = '
        f"{quote_str(zone)} AND time >= {time_ns(since_s)} AND time < {time_ns(until_s)} "
        "GROUP BY time(1h) fill(none)")
    return [(float(t), float(v)) for s in series for t, v in s.values if v is not None]
