"""Shared by the calibrate-gpus tests: samples from known constants, and one emulated node
whose Slurm record a calibration job changes (no Slurm, no clock: sleeps advance a counter)."""

from __future__ import annotations

import random
from pathlib import Path
from types import MappingProxyType

from slurm_plugin.model import Cluster, Gpu, GpuUse, Job, Node
from slurm_plugin.node import calibrate_job as cj
from slurm_plugin.node.calibrate_load import EmulatedLoad
from slurm_plugin.node.emulated import EmulatedSource, slowdown_path
from slurm_plugin.record import replace

UTILS = (5.0, 15.0, 30.0, 45.0, 60.0, 75.0, 90.0, 100.0)


def synthetic_result(idle_w=70.0, dynamic_w=300.0, gamma=0.9, beta=0.7, min_w=150.0,
                     max_w=500.0, utils=UTILS, scales=None, noise=0.0, seed=0, idle_reads=4,
                     cap_levels=8, model="H100-80GB-HBM3", time0_s=2.0) -> dict:
    """A calibration job's result whose readings follow the physics' forms exactly (``noise``:
    relative standard deviation of each power, half of it on each time)."""
    rng = random.Random(seed)
    scales = scales or [1.0] * len(utils)

    def jitter(v: float, rel: float) -> float:
        return v * (1 + rng.gauss(0, rel)) if rel else v

    loads = []
    for u, s in zip(utils, scales):
        p = min(max_w, idle_w + dynamic_w * s * (u / 100) ** gamma)
        loads.append({"label": f"{u:g}%", "util_pct": u, "power_w": jitter(p, noise),
                      "power_limit_w": max_w, "load_scale": s})
    below = [p for p in loads if p["power_w"] < max_w - 10]
    work = max(below, key=lambda p: p["power_w"])
    p0 = work["power_w"]
    caps = []
    for k in range(cap_levels):
        limit = min_w + (max_w - min_w) * k / cap_levels
        slow = ((p0 - idle_w) / (limit - idle_w)) ** beta if limit < p0 else 1.0
        caps.append({"power_limit_w": limit, "time_s": jitter(time0_s * slow, noise / 2),
                     "power_w": min(p0, limit)})
    return {"node": "gpu1", "gpu_index": 0, "job_id": "7", "model": model, "mode": "emulated",
            "error": "", "notes": [], "elapsed_s": 60.0,
            "idle_w": [jitter(idle_w, noise) for _ in range(idle_reads)], "loads": loads,
            "max_limit_w": max_w, "min_limit_w": min_w, "workload": work["label"],
            "workload_time_s": time0_s, "workload_power_w": p0, "caps": caps}


def pair_samples(model: str, level: str = "aps", solo_time_s: float = 2.0,
                 modes: tuple[str, ...] = ("time-sliced", "mps")) -> list[dict]:
    """A calibration job's ``pair`` samples as the physics computes ``level``'s pair with
    itself on ``model`` (``group_slowdowns``), each mode."""
    from slurm_plugin.physics import group_slowdowns, job_class
    return [{"mode": m, "level": level, "util_pct": job_class(level).util_pct,
             "solo_time_s": solo_time_s,
             "pair_time_s": solo_time_s * group_slowdowns([level, level], model=model,
                                                          mode=m)[0]} for m in modes]


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += max(0.0, s) + 0.0005          # every sleep overshoots a little


class EmulatedNode:
    """Node ``gpu1`` with ``gpus`` emulated GPUs of ``model``; job ``7`` holds GPU 0 and its
    class and cap are what the calibration job sets (the ``JobTag``); ``others``: jobs on
    other GPUs (index -> class), ``intruder``: a job that comes onto GPU 0 at that reading."""

    def __init__(self, model: str, gpus: int = 4, others: dict[int, str] | None = None,
                 intruder_at: int | None = None) -> None:
        self.model, self.gpus, self.others = model, gpus, others or {}
        self.job = Job(job_id="7", state="RUNNING", nodes=("gpu1",), uses=(GpuUse("gpu1", 0),))
        self.reads, self.intruder_at = 0, intruder_at

    def snapshot(self) -> Cluster:
        self.reads += 1
        jobs = {"7": self.job}
        shard_jobs: dict[int, tuple[str, ...]] = {}
        for index, app in self.others.items():
            jobs[f"o{index}"] = Job(job_id=f"o{index}", state="RUNNING", app=app,
                                    uses=(GpuUse("gpu1", index),))
        if self.intruder_at is not None and self.reads >= self.intruder_at:
            jobs["99"] = Job(job_id="99", state="RUNNING", app="lstm",
                             uses=(GpuUse("gpu1", 0, 1),))
            shard_jobs[0] = ("99",)
        gpus = tuple(Gpu(node="gpu1", index=i, model=self.model, gres_type=f"g{i}",
                         exclusive_job="7" if i == 0 else self.others.get(i) and f"o{i}",
                         shard_jobs=shard_jobs.get(i, ())) for i in range(self.gpus))
        return Cluster(nodes=(Node(name="gpu1", gpus=gpus),), jobs=MappingProxyType(jobs))

    def set_app(self, app: str) -> None:
        self.job = replace(self.job, app=app)

    def set_cap(self, power_cap_w: float | None) -> None:
        self.job = replace(self.job, power_cap_w=power_cap_w)


def run_emulated(node: EmulatedNode, state_dir: Path, left_s: float = 170.0) -> dict:
    """One calibration job on GPU 0 of ``node``, as ``calibrate_job.run_job`` runs it."""
    clock = FakeClock()
    source = EmulatedSource("gpu1", node.snapshot, state_dir)
    plan = cj.make_plan(left_s, 8, emulated=True)
    reader = cj.GpuReader(source, "gpu1", 0, "7", plan, clock=clock, sleep=clock.sleep)

    def load() -> EmulatedLoad:
        return EmulatedLoad(node, "7", 1, slowdown_path(state_dir, "7"), plan.fixed_s,
                            plan.interval_s, clock=clock, sleep=clock.sleep)

    out = cj.calibrate(reader, node, load, plan, clock() + left_s, lambda line: None,
                       clock=clock)
    return {"node": "gpu1", "gpu_index": 0, "job_id": "7", "error": "", **out}
