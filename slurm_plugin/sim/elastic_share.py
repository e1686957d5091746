"""A seeded share of a trace's jobs made elastic (for traces that say nothing about it, such
as Philly's): job ``j`` is elastic when ``random.Random(f"{seed}:elastic:{j}").random() <
share``, then between 1 GPU and twice its request (``max_gpus = 2 * num_gpus``), and its time
limit covers a run on its minimum as an elastic job's must (``LIMIT_FACTOR`` x its duration x
its GPUs, whole minutes: linear scaling, the slowest a run on 1 GPU can be for its classes). A
job's draw depends only on the seed and its id, not on the order jobs are read."""

from __future__ import annotations

from dataclasses import replace

from ..physics.seeded import seeded
from .trace import TraceJob

LIMIT_FACTOR = 1.25


def make_elastic(jobs: list[TraceJob], share: float, seed: int = 0) -> list[TraceJob]:
    out = []
    for j in jobs:
        if j.min_gpus is None and seeded(f"{seed}:elastic:{j.job_id}").random() < share:
            limit = 60.0 * -(-LIMIT_FACTOR * j.duration_s * j.num_gpus // 60)
            j = replace(j, min_gpus=1, max_gpus=2 * j.num_gpus, time_limit_s=limit)
        out.append(j)
    return out
