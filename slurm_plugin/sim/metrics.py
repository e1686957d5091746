"""Run metrics: energy, carbon and GPU-time integrals (kept by the engine) and per-job times.
Every figure and its formula: docs/simulator.md."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine import Simulator
    from .state import SimJob

# Field order of the JSON object and of the readable table.
FIELDS = ("policy", "jobs", "jobs_finished", "energy_kwh", "gpu_energy_kwh", "carbon_kg",
          "avg_jct_s", "p50_jct_s", "p99_jct_s", "geomean_jct_s", "makespan_s", "avg_queue_s",
          "max_queue_s", "avg_runtime_stretch", "gpu_alloc_of_powered", "gpu_alloc_of_installed",
          "sharing_factor", "jobs_per_busy_gpu", "sm_util_of_powered", "avg_nodes_on",
          "jobs_timed_out", "sim_wall_s", "events")


def percentile(sorted_vals: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (0 for an empty one)."""
    if not sorted_vals:
        return 0.0
    k = max(0, min(len(sorted_vals) - 1, math.ceil(q / 100 * len(sorted_vals)) - 1))
    return sorted_vals[k]


class Metrics:
    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.energy_j = self.gpu_energy_j = self.carbon_g = 0.0
        self.busy_gpu_s = self.node_on_s = self.job_gpu_s = self.sm_util_gpu_s = 0.0
        self.jct: list[float] = []
        self.queue: list[float] = []
        self.stretch: list[float] = []
        self.first_submit_s = math.inf
        self.last_end_s = -math.inf
        self.events = self.unfinished = self.policy_fallbacks = self.suspends = 0
        self.timed_out = 0
        self.actions: dict[str, int] = {}

    @property
    def jobs_finished(self) -> int:
        return len(self.jct)

    def job_done(self, j: "SimJob") -> None:
        """Queue time runs from submission to the first run (a node's boot counts as waiting);
        the run time from there to the end."""
        self.jct.append(j.end_s - j.t.submit_s)
        self.queue.append(j.first_start_s - j.t.submit_s)
        self.stretch.append((j.end_s - j.first_start_s) / j.t.duration_s)
        self.first_submit_s = min(self.first_submit_s, j.t.submit_s)
        self.last_end_s = max(self.last_end_s, j.end_s)

    def result(self, sim: "Simulator", wall_s: float) -> dict[str, Any]:
        n = self.jobs_finished
        jct = sorted(self.jct)
        span = (self.last_end_s - sim.trace[0].submit_s) if n else 0.0
        gpu_time = sim.spec.gpu_count * span
        powered = self.node_on_s * sim.spec.gpus_per_node
        return {
            "policy": sim.policy.name,
            "jobs": self.jobs,
            "jobs_finished": n,
            "energy_kwh": self.energy_j / 3.6e6,
            "gpu_energy_kwh": self.gpu_energy_j / 3.6e6,
            "carbon_kg": self.carbon_g / 1000.0,
            "avg_jct_s": sum(jct) / n if n else 0.0,
            "p50_jct_s": percentile(jct, 50),
            "p99_jct_s": percentile(jct, 99),
            "geomean_jct_s": math.exp(sum(math.log(max(x, 1e-9)) for x in jct) / n) if n else 0.0,
            "makespan_s": span,
            "avg_queue_s": sum(self.queue) / n if n else 0.0,
            "max_queue_s": max(self.queue) if n else 0.0,
            "avg_runtime_stretch": sum(self.stretch) / n if n else 0.0,
            "gpu_alloc_of_powered": self.busy_gpu_s / powered if powered else 0.0,
            "gpu_alloc_of_installed": self.busy_gpu_s / gpu_time if gpu_time else 0.0,
            "sharing_factor": self.job_gpu_s / powered if powered else 0.0,
            "jobs_per_busy_gpu": self.job_gpu_s / self.busy_gpu_s if self.busy_gpu_s else 0.0,
            "sm_util_of_powered": self.sm_util_gpu_s / powered if powered else 0.0,
            "avg_nodes_on": self.node_on_s / span if span else 0.0,
            "sim_wall_s": wall_s,
            "events": self.events,
            "unfinished_jobs": self.unfinished,
            "jobs_timed_out": self.timed_out,
            "policy_fallbacks": self.policy_fallbacks,
            "node_suspends": self.suspends,
            "actions": dict(sorted(self.actions.items())),
            "cluster": _cluster(sim),
            "carbon_zone": sim.carbon.zone if sim.carbon else None,
            "seed": sim.seed,
            "class_mix": sim.class_mix.name,
            "classes": list(sim.class_mix.classes),
        }


def _cluster(sim: "Simulator") -> dict[str, Any]:
    """The cluster's shape; a cluster of several GPU models adds its groups in node order."""
    spec = sim.spec
    out: dict[str, Any] = {"nodes": spec.nodes, "gpus_per_node": spec.gpus_per_node,
                           "gpu_type": spec.gpu_type}
    if spec.groups:
        out["groups"] = [{"gpu_type": model, "nodes": n} for model, n in spec.groups]
    return out
