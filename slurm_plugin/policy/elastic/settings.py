"""The ``[elastic]`` site keys and their checks: a bad value raises ``ConfigError`` naming
``elastic``, the key and the value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..section import flag, number, parse_section

SOURCE = "elastic"


@dataclass(frozen=True, slots=True)
class ElasticSettings:
    # restart cost of a resize (checkpoint + requeue + start-up) until the job's own restarts
    # are measured (the simulator's model: ``restart_cost_s`` of the cluster spec)
    restart_cost_s: float = 90.0
    # hysteresis: a job is not resized again within this long of its last (re)start
    min_interval_s: float = 600.0
    # a resize must save at least gain_factor x its restart cost over the job's remaining time
    gain_factor: float = 1.0
    # a GPU is added only while it adds at least this share of one GPU's throughput
    min_efficiency: float = 0.5
    # progress older than this is stale: ignored
    stale_s: float = 900.0
    # progress above this many samples/s per GPU is not physical: ignored
    max_samples_per_s_per_gpu: float = 1e7
    # and, on more GPUs than its previous run, above ``superlinear`` x linear scaling of that run
    superlinear: float = 1.5
    # worst wait may be this many times slurm-default's (checked by the benchmark: the policy
    # keeps Slurm's queue order and keeps the nodes the first waiting job counts on from growth)
    fairness_factor: float = 2.0
    # resizes started per reconcile pass (bounds the requeue storm on a live cluster)
    max_resizes_per_pass: int = 16
    # a job's restarts are measured; true: each job's measured cost replaces restart_cost_s
    measure_restart_cost: bool = True
    # queue tiers (sbatch --nice) by the GPU-time a job asks for (time limit x GPUs): smaller
    # jobs first, which shortens the average JCT under a queue but lets a large job wait
    # longer than Slurm's order would (off: fairness_factor is what the policy promises)
    order_queue: bool = False
    # with order_queue: a pending job's tier drops by one for every this long it has waited
    # (0: never), so no job waits behind smaller ones for good
    tier_age_s: float = 900.0



_CHECKS = {
    "restart_cost_s": number(SOURCE, 0.0),
    "min_interval_s": number(SOURCE, 0.0),
    "gain_factor": number(SOURCE, 0.0),
    "min_efficiency": number(SOURCE, 0.0, 1.0),
    "stale_s": number(SOURCE, 1.0),
    "max_samples_per_s_per_gpu": number(SOURCE, 0.0),
    "superlinear": number(SOURCE, 1.0),
    "fairness_factor": number(SOURCE, 1.0),
    "max_resizes_per_pass": number(SOURCE, 0, whole=True),
    "measure_restart_cost": flag(SOURCE),
    "order_queue": flag(SOURCE),
    "tier_age_s": number(SOURCE, 0.0),
}


def parse_settings(raw: Mapping[str, Any] | None) -> ElasticSettings:
    """Settings from the policy's section (unknown keys are an error that lists the known;
    the keys every policy's settings carry, ``base.SITE_KEYS``, are passed over)."""
    return parse_section(SOURCE, raw, ElasticSettings, _CHECKS)
