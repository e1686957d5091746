"""Helpers for the simulator tests: random canonical traces."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from slurm_plugin.physics import class_names


def write_trace(path: Path, rng: random.Random, jobs: int, max_gpus: int) -> Path:
    apps = class_names()
    rows = ["job_id,submit_s,duration_s,num_gpus,user,app"]
    t = 1_700_000_000.0
    for i in range(jobs):
        t += rng.expovariate(1 / 120)
        gpus = rng.choice([1, 1, 1, 1, 2, 4, max_gpus])
        rows.append(f"j{i},{t:.0f},{rng.randint(30, 4 * 3600)},{min(gpus, max_gpus)},"
                    f"u{rng.randint(0, 3)},{rng.choice(apps + ('',))}")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture
def make_trace():
    """``make_trace(path, rng, jobs, max_gpus)`` writes a random canonical trace."""
    return write_trace
