"""One simulation from inputs to metrics: what ``wattctl simulate`` calls."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import InputError
from ..physics.classes import ClassMix, assign_class, class_mix
from ..physics.variability import load_profile
from ..policy import get_policy
from ..policy.oracle import energy_bound
from .carbon import WeekAlignedCarbon, load_carbon
from .cluster import ClusterSpec
from .engine import Simulator
from .metrics import percentile
from .trace import TraceJob, TraceJobs, builtin_trace, read_trace, repeat_trace

ORACLE = "oracle-bound"


@dataclass(frozen=True)
class Inputs:
    trace: Path
    trace_format: str
    spec: ClusterSpec
    zone: str
    carbon: Path | None = None
    variability: Path | None = None
    seed: int = 0
    limit_jobs: int | None = None
    class_mix: ClassMix | None = None   # classes of trace jobs that name no app (None: all)
    repeat: int = 1     # copies of the trace overlaid on its span (``repeat_trace``)


def load_jobs(inputs: Inputs) -> list[TraceJob]:
    """The trace, checked against the cluster: a job larger than it (than the nodes of its
    largest GPU model, where it has several: a job runs on one) is an input error."""
    if inputs.repeat > 1:
        jobs = repeat_trace(read_trace(inputs.trace, inputs.trace_format), inputs.repeat)
        if inputs.limit_jobs:
            kept = TraceJobs(jobs[:inputs.limit_jobs])
            kept.warnings = jobs.warnings
            jobs = kept
    else:
        jobs = read_trace(inputs.trace, inputs.trace_format, inputs.limit_jobs)
    spec = inputs.spec
    field = "num_replicas" if inputs.trace_format == "pollux" else "num_gpus"
    most = spec.largest_model_nodes
    for j in jobs:
        nodes = math.ceil(j.num_gpus / spec.gpus_per_node)
        if j.num_gpus > spec.gpu_count or nodes > most:
            shape = f"{spec.nodes} nodes x {spec.gpus_per_node} GPUs" if not spec.groups else \
                f"at most {most} nodes x {spec.gpus_per_node} GPUs of one model: {spec.gpu_type}"
            how = "(--gpu-type MODEL:NODES,...)" if spec.groups else "(--nodes, --gpus-per-node)"
            raise InputError(f"trace: {inputs.trace}: line {j.line}: field {field}: {j.num_gpus} GPUs "
                             f"is larger than the cluster ({shape}); give a larger cluster "
                             f"{how} or a trace without it")
    return jobs


def simulate(inputs: Inputs, policy_name: str, *, settings: Mapping[str, Any] | None = None,
             jobs: list[TraceJob] | None = None, carbon: WeekAlignedCarbon | None = None,
             timeline: Callable[[dict[str, float]], None] | None = None,
             progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Run ``policy_name`` (or compute the oracle bound) and return the metrics dict."""
    policy = get_policy(policy_name, "--policy")
    jobs = jobs if jobs is not None else load_jobs(inputs)
    carbon = carbon or load_carbon(inputs.carbon, inputs.zone, jobs[0].submit_s)
    if policy_name == ORACLE:
        return oracle_metrics(jobs, inputs.spec.resolved(), carbon, inputs.seed,
                              inputs.class_mix)
    variability = None
    if inputs.variability is not None:
        variability = load_profile(inputs.variability).factors(inputs.spec.gpu_count, inputs.seed)
    sim = Simulator(jobs, inputs.spec, policy, carbon=carbon, seed=inputs.seed,
                    class_mix=inputs.class_mix, variability=variability, settings=settings,
                    timeline=timeline, progress=progress)
    return sim.run()


def oracle_metrics(jobs: list[TraceJob], spec: ClusterSpec, carbon: WeekAlignedCarbon,
                   seed: int, mix: ClassMix | None = None,
                   max_jobs_per_gpu: int | None = None) -> dict[str, Any]:
    """The oracle lower bound over the trace (computed, not scheduled); with
    ``max_jobs_per_gpu``, the bound within the site's share limit. On a cluster of several GPU
    models each job runs on the model, of those with nodes enough for it, that needs least."""
    mix = mix or class_mix("all")
    energy = gpu_energy = carbon_g = 0.0
    jct, stretch = [], []
    end = jobs[0].submit_s
    models = spec.model_nodes
    for j in jobs:
        need = math.ceil(j.num_gpus / spec.gpus_per_node)
        app = j.app or assign_class(j.job_id, seed, mix)
        b = min((energy_bound(app, j.num_gpus, j.duration_s, m, spec.gpus_per_node,
                              spec.node_base_power_w, max_jobs_per_gpu)
                 for m, nodes in models if nodes >= need), key=lambda x: x.energy_j)
        energy += b.energy_j
        gpu_energy += b.gpu_energy_j
        carbon_g += b.power_w * carbon.integral_h(j.submit_s, j.submit_s + b.duration_s) / 1000
        jct.append(b.duration_s)
        stretch.append(b.duration_s / j.duration_s)
        end = max(end, j.submit_s + b.duration_s)
    jct.sort()
    n = len(jobs)
    return {"policy": ORACLE, "jobs": n, "jobs_finished": n,
            "energy_kwh": energy / 3.6e6, "gpu_energy_kwh": gpu_energy / 3.6e6,
            "carbon_kg": carbon_g / 1000, "avg_jct_s": sum(jct) / n,
            "p50_jct_s": percentile(jct, 50), "p99_jct_s": percentile(jct, 99),
            "geomean_jct_s": math.exp(sum(math.log(x) for x in jct) / n),
            "makespan_s": end - jobs[0].submit_s, "avg_queue_s": 0.0, "max_queue_s": 0.0,
            "avg_runtime_stretch": sum(stretch) / n, "gpu_alloc_of_powered": None,
            "gpu_alloc_of_installed": None, "sharing_factor": None, "jobs_per_busy_gpu": None,
            "sm_util_of_powered": None, "avg_nodes_on": None, "max_jobs_per_gpu": max_jobs_per_gpu,
            "sim_wall_s": 0.0, "events": 0, "bound": True, "seed": seed,
            "class_mix": mix.name, "classes": list(mix.classes), "carbon_zone": carbon.zone}


def period_budget(jobs: list[TraceJob], budget_kg: float) -> dict[str, float]:
    """GreenFlow settings for a carbon budget over the whole simulated period: from the first to
    the last submission (carbon after it still counts against the same budget)."""
    start = jobs[0].submit_s
    return {"budget_kg": budget_kg, "budget_start_s": start,
            "budget_period_s": max(3600.0, jobs[-1].submit_s - start)}


def default_trace() -> Path:
    return builtin_trace()


TIMELINE_FIELDS = ("time_s", "duration_s", "power_w", "gpu_power_w", "busy_gpus", "running_jobs",
                   "pending_jobs", "nodes_on")


class TimelineWriter:
    """Streams timeline rows (one per interval between events) to a CSV file."""

    def __init__(self, path: Path) -> None:
        try:
            self._fh = path.open("w", newline="")
        except OSError as exc:
            raise InputError(f"timeline: {path}: cannot write ({exc.strerror})") from None
        self._w = csv.writer(self._fh)
        self._w.writerow(TIMELINE_FIELDS)

    def __call__(self, row: dict[str, float]) -> None:
        self._w.writerow([round(row[k], 3) if isinstance(row[k], float) else row[k]
                          for k in TIMELINE_FIELDS])

    def close(self) -> None:
        self._fh.close()
