"""``oracle-bound``: a lower bound on energy, not a schedule.

Each job runs at its most energy-efficient power cap, with no interference and no waiting, and
idle GPUs and nodes draw nothing: a job pays its dynamic GPU power plus a share of the static
power (GPU idle power and node base power) in proportion to its utilisation, as on a perfectly
packed cluster with no idle capacity. That share can be as small as a few percent (about 20 jobs
on one GPU), which no policy may do: with ``max_jobs_per_gpu`` (the site's share limit) a job
pays at least ``1 / max_jobs_per_gpu`` of the static power, a bound a policy within the limit
could approach. The simulator computes both from the trace (``energy_bound``); as a live policy
it advises that power cap and changes nothing else: the cap of the model the job asks for, else
of the cluster's one model (on a cluster of several, where the job may land on any, the cap
only when every model's best cap is the same).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..errors import ConfigError
from ..model import Action, JobRequest, Placement
from ..physics import (cap_settings_w, cap_slowdown, capped_power_w, idle_power_w, job_class,
                       node_base_power_w)
from .base import Context, plain_placement
from .model_groups import cluster_models


@dataclass(frozen=True, slots=True)
class JobBound:
    energy_j: float        # all of it: dynamic GPU + static share
    gpu_energy_j: float    # dynamic GPU + GPU idle share
    power_w: float         # average power over the run
    duration_s: float      # run time at that cap
    power_cap_w: float | None


def energy_bound(app: str, gpus: int, duration_s: float, gpu_type: str = "V100",
                 gpus_per_node: int = 8, node_base_w: float | None = None,
                 max_jobs_per_gpu: int | None = None) -> JobBound:
    """The least energy job ``app`` on ``gpus`` GPUs, ``duration_s`` uncapped, can use; with
    ``max_jobs_per_gpu``, sharing a GPU with at most that many jobs."""
    w, gpu_w, slow, cap = _best_cap(app, gpus, gpu_type, gpus_per_node, node_base_w,
                                    max_jobs_per_gpu)
    run_s = slow * duration_s
    return JobBound(w * run_s, gpus * gpu_w * run_s, w, run_s, cap)


@lru_cache(maxsize=4096)
def cap_options(app: str, gpus: int, gpu_type: str, gpus_per_node: int, node_base_w: float | None,
                max_jobs_per_gpu: int | None) -> tuple[tuple[float, float, float, float | None], ...]:
    """(power, GPU power per GPU, slowdown, cap) of every cap setting (None first): a job of this
    shape running ``d`` seconds uncapped runs ``slowdown * d`` at that cap and needs ``power *
    slowdown * d`` joules, its static share as the module doc says."""
    cls = job_class(app)
    idle = idle_power_w(gpu_type)
    base = node_base_power_w() if node_base_w is None else node_base_w
    p0 = cls.power_at(gpus, gpu_type)
    share = cls.util_at(gpus) / 100
    if max_jobs_per_gpu:
        share = max(share, 1.0 / max_jobs_per_gpu)
    out = []
    for cap in (None,) + cap_settings_w(gpu_type):
        slow = cap_slowdown(p0, cap, gpu_type)
        gpu_w = capped_power_w(p0, cap, gpu_type) - idle + share * idle
        out.append((gpus * (gpu_w + share * base / gpus_per_node), gpu_w, slow, cap))
    return tuple(out)


@lru_cache(maxsize=4096)
def _best_cap(app: str, gpus: int, gpu_type: str, gpus_per_node: int, node_base_w: float | None,
              max_jobs_per_gpu: int | None) -> tuple[float, float, float, float | None]:
    """(power, GPU power per GPU, slowdown, cap) of the cap that needs the least energy per
    second of the uncapped run: energy is that power times the slowdown times the run, so the
    choice does not depend on the run's length (one choice per job shape, not per job)."""
    best: tuple[float, float, float, float | None] | None = None
    least = 0.0
    for w, gpu_w, slow, cap in cap_options(app, gpus, gpu_type, gpus_per_node, node_base_w,
                                           max_jobs_per_gpu):
        if best is None or w * slow < least - 1e-12:
            best, least = (w, gpu_w, slow, cap), w * slow
    assert best is not None
    return best


class OracleBound:
    name = "oracle-bound"

    def advise(self, request: JobRequest, ctx: Context) -> Placement:
        if not request.app:
            return plain_placement(self.name, request, "oracle-bound: no job class known")
        models = (request.gpu_model.upper(),) if request.gpu_model else \
            cluster_models(ctx.cluster) or ("V100",)
        try:
            caps = {energy_bound(request.app, max(1, request.total_gpus), 1.0, m).power_cap_w
                    for m in models}
        except ConfigError as exc:
            return plain_placement(self.name, request, f"oracle-bound: {exc.value!r} is not a "
                                   f"catalogued GPU model: uncapped")
        if len(caps) > 1:
            return plain_placement(self.name, request, f"oracle-bound: the best cap differs "
                                   f"between the GPU models the job may get "
                                   f"({', '.join(models)}): uncapped")
        b = energy_bound(request.app, max(1, request.total_gpus), 1.0, models[0])
        if b.power_cap_w is None:
            return plain_placement(self.name, request, "oracle-bound: uncapped is most efficient")
        return Placement(policy=self.name, gpus=request.gpus, power_cap_w=b.power_cap_w,
                         why=(f"oracle-bound: cap {b.power_cap_w:.0f} W uses the least energy",))

    def reconcile(self, ctx: Context) -> tuple[Action, ...]:
        return ()
