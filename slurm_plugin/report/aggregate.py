"""Pure: ``EnergyRecord``s -> one row per job, user, account or partition, with the
counterfactual of the same jobs on exclusive GPUs.

Counterfactual, per record (one job on one node), from the calibrated physics:
- GPU-seconds not shared keep their measured energy (they were exclusive already);
- the shared GPU-seconds would have run ``slowdown`` times faster alone, at the job class's
  solo power per GPU (``JobClass.power_at``, idle power included):
  ``E_excl = E * (gpu_s - shared_gpu_s) / gpu_s + P_class(gpus) * shared_gpu_s / slowdown``;
- ``slowdown`` is the class's co-location slowdown with the records that shared its GPUs at an
  overlapping time (``physics.group_slowdowns``): on the same node, and on one of its GPUs
  where both records say which (``gpu_indexes``); a record that does not (an older epilog)
  counts every shared record of its node as a co-runner; none found: 1 (no speed-up claimed);
- a job with no ``app``, or an app that is not a known job class (a researcher may declare
  any name), uses ``default_app``: one unknown name never fails the whole report;
- carbon: the counterfactual energy at the job's own mean intensity (``co2_g / energy_j``).
``saved = counterfactual - measured``: positive when sharing saved energy.
"""

from __future__ import annotations

import time

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Sequence

from ..errors import InputError
from ..physics import group_slowdowns, job_class
from .records import EnergyRecord

J_PER_KWH = 3.6e6
GROUPS = ("job", "run", "user", "account", "partition")


@dataclass(frozen=True, slots=True)
class Counterfactual:
    energy_j: float
    co2_g: float | None
    slowdown: float
    app: str


def _overlap(a: EnergyRecord, b: EnergyRecord) -> bool:
    return a.start_s < b.end_s and b.start_s < a.end_s


def _same_gpus(a: EnergyRecord, b: EnergyRecord) -> bool:
    """Whether ``a`` and ``b`` held a GPU in common (unknown for either: they may have)."""
    if a.gpu_indexes is None or b.gpu_indexes is None:
        return True
    return not set(a.gpu_indexes).isdisjoint(b.gpu_indexes)


def co_runners(records: Sequence[EnergyRecord]) -> dict[int, list[int]]:
    """For each record with shared GPU time: the indexes of the records that shared GPUs on the
    same node (and cluster) at an overlapping time, one of its own GPUs where both say which."""
    by_node: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        if r.shared_gpu_s > 0:
            by_node[(r.cluster, r.node)].append(i)
    out: dict[int, list[int]] = {}
    for idx in by_node.values():
        for i in idx:
            out[i] = [j for j in idx if j != i and records[j].job_id != records[i].job_id
                      and _overlap(records[i], records[j])
                      and _same_gpus(records[i], records[j])]
    return out


def _class_or_default(app: str | None, default_app: str):
    try:
        return job_class(app or default_app)
    except InputError:
        return job_class(default_app)


def counterfactual(r: EnergyRecord, others: Iterable[EnergyRecord], default_app: str,
                   gpu_model: str = "V100") -> Counterfactual:
    cls = _class_or_default(r.app, default_app)
    if r.shared_gpu_s <= 0 or r.gpu_s <= 0:
        return Counterfactual(r.energy_j, r.co2_g, 1.0, cls.name)
    apps = [_class_or_default(o.app, default_app).name for o in others]
    slowdown = group_slowdowns([cls.name, *apps], model=gpu_model)[0] if apps else 1.0
    exclusive_part = r.energy_j * (r.gpu_s - r.shared_gpu_s) / r.gpu_s
    alone = cls.power_at(max(1, r.gpus), gpu_model) * r.shared_gpu_s / slowdown
    energy = exclusive_part + alone
    co2 = r.co2_g / r.energy_j * energy if r.co2_g is not None and r.energy_j > 0 else None
    return Counterfactual(energy, co2, slowdown, cls.name)


def key_of(r: EnergyRecord, by: str, clusters: int = 1) -> str:
    """The group of a record; a job is named as ``sacct`` names it (``14543_1`` for a job
    array's task, ``EnergyRecord.job_label``), prefixed ``cluster/`` when records of several
    clusters are reported together (job ids repeat across clusters); a run is
    ``JOB@START`` (local time)."""
    if by in ("job", "run"):
        job = f"{r.cluster}/{r.job_label}" if clusters > 1 else r.job_label
        if by == "job":
            return job
        # one run of a job (a requeued job, an elastic job resized, runs again): its start
        return f"{job}@{time.strftime('%Y-%m-%dT%H:%M:%S', time.localtime(round(r.start_s)))}"
    return getattr(r, by) or "(none)"


@dataclass
class _Sum:
    jobs: set
    array_task: str = ""
    records: int = 0
    energy_j: float = 0.0
    co2_g: float = 0.0
    co2_missing: int = 0
    gpu_s: float = 0.0
    shared_gpu_s: float = 0.0
    cf_energy_j: float = 0.0
    cf_co2_g: float = 0.0

    def add(self, r: EnergyRecord, cf: Counterfactual) -> None:
        self.jobs.add((r.cluster, r.job_id))
        self.array_task = self.array_task or r.array_task
        self.records += 1
        self.energy_j += r.energy_j
        self.gpu_s += r.gpu_s
        self.shared_gpu_s += r.shared_gpu_s
        self.cf_energy_j += cf.energy_j
        if r.co2_g is None or cf.co2_g is None:
            self.co2_missing += 1
        else:
            self.co2_g += r.co2_g
            self.cf_co2_g += cf.co2_g

    def row(self, key: str) -> dict:
        kwh, cf_kwh = self.energy_j / J_PER_KWH, self.cf_energy_j / J_PER_KWH
        has_co2 = self.records > self.co2_missing
        kg = self.co2_g / 1000 if has_co2 else None
        cf_kg = self.cf_co2_g / 1000 if has_co2 else None
        return {"key": key, "jobs": len(self.jobs), "records": self.records,
                "energy_kwh": kwh, "co2_kg": kg, "co2_missing_records": self.co2_missing,
                "gpu_hours": self.gpu_s / 3600, "shared_gpu_hours": self.shared_gpu_s / 3600,
                "shared_pct": 100 * self.shared_gpu_s / self.gpu_s if self.gpu_s else 0.0,
                "exclusive_kwh": cf_kwh, "exclusive_co2_kg": cf_kg,
                "saved_kwh": cf_kwh - kwh,
                "saved_co2_kg": cf_kg - kg if kg is not None and cf_kg is not None else None,
                "saved_pct": 100 * (cf_kwh - kwh) / cf_kwh if cf_kwh else 0.0}

    def job_fields(self) -> dict:
        """A job's (or run's) row: its raw ``job_id`` (the smallest, should records of two
        raw ids ever share a name) and ``array_task`` (None: no array task), beside ``key``."""
        return {"job_id": min((j for _, j in self.jobs), key=lambda j: (len(j), j), default=None),
                "array_task": self.array_task or None}


def report(records: Sequence[EnergyRecord], by: str, default_app: str = "vgg16",
           gpu_model: str = "V100") -> dict:
    """``{"by", "rows" (largest energy first), "total"}``; ``job_class(default_app)`` must exist.
    By job or run a row also has the raw ``job_id`` and ``array_task`` (or None)."""
    if by not in GROUPS:
        raise ValueError(f"by must be one of {GROUPS}, not {by!r}")
    job_class(default_app)
    peers = co_runners(records)
    clusters = len({r.cluster for r in records})
    groups: dict[str, _Sum] = {}
    total = _Sum(set())
    for i, r in enumerate(records):
        cf = counterfactual(r, (records[j] for j in peers.get(i, ())), default_app, gpu_model)
        groups.setdefault(key_of(r, by, clusters), _Sum(set())).add(r, cf)
        total.add(r, cf)
    rows = sorted(({**s.row(k), **(s.job_fields() if by in ("job", "run") else {})}
                   for k, s in groups.items()), key=lambda x: (-x["energy_kwh"], x["key"]))
    return {"by": by, "default_app": default_app, "gpu_model": gpu_model, "rows": rows,
            "total": total.row("total")}
