"""A GPU shared time-sliced holds one power limit, as the node sets it (``gpu_cap_w``: no cap
unless every job on it asks for one, then the highest); when its jobs together would draw more
than that limit, or than the board's, the GPU throttles and every job on it slows. A cap one
job asks for never clips the power of a co-located job that asked none (the simulator once
clipped the GPU's power at the least cap while the others kept their speed: energy no GPU
gives). A GPU of one job still follows that job's configuration model."""

from __future__ import annotations

import pytest

from slurm_plugin.model import Placement
from slurm_plugin.physics import cap_slowdown, group_slowdowns, idle_power_w
from slurm_plugin.physics.constants import gpu_constants
from slurm_plugin.physics.job_cap import capped_job
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.trace import TraceJob

ONE_GPU = ClusterSpec(nodes=1, gpus_per_node=1)
RUN_S = 3600.0
MAX_W = gpu_constants("V100")["max_power_w"]


class Sharer:
    """Puts every job on a shard of the one GPU, capped as ``caps_w`` says per class."""
    name = "sharer"

    def __init__(self, caps_w: dict[str, float]) -> None:
        self.caps_w = caps_w

    def advise(self, request, ctx):
        return Placement(policy=self.name, gpus=1, share_mode="shard", shards=1,
                         power_cap_w=self.caps_w.get(request.app))

    def reconcile(self, ctx):
        return ()


def run(apps, caps_w=None):
    jobs = [TraceJob(job_id=f"j{i}", submit_s=1000.0, duration_s=RUN_S, num_gpus=1, line=i,
                     app=app, time_limit_s=100 * RUN_S) for i, app in enumerate(apps)]
    return Simulator(jobs, ONE_GPU, Sharer(caps_w or {}), settings={"allow_share": True}).run()


def demand_w(apps):
    """What the jobs of ``apps`` on one V100 draw together at their co-location rates."""
    idle = idle_power_w("V100")
    slow = group_slowdowns(list(apps), model="V100")
    return idle + sum((capped_job(a, 1, None, "V100", 1)[0] - idle) / s
                      for a, s in zip(apps, slow))


def test_a_pair_drawing_more_than_the_board_gives_runs_slower_at_the_limit():
    pair = ("nas", "nas")
    assert demand_w(pair) > MAX_W                 # the case this test is about
    got = run(pair)
    run_s = RUN_S * group_slowdowns(list(pair), model="V100")[0] \
        * cap_slowdown(demand_w(pair), MAX_W, "V100")
    assert got["avg_jct_s"] == pytest.approx(run_s, rel=1e-9)
    assert got["gpu_energy_kwh"] * 3.6e6 == pytest.approx(MAX_W * run_s, rel=1e-6)


def test_a_pair_within_the_limit_runs_at_its_colocation_rate_only():
    pair = ("lstm", "lstm")
    assert demand_w(pair) < MAX_W
    got = run(pair)
    assert got["avg_jct_s"] == pytest.approx(
        RUN_S * group_slowdowns(list(pair), model="V100")[0], rel=1e-9)


def test_a_cap_one_job_asks_does_not_clip_a_co_located_job_that_asked_none():
    uncapped = run(("alexnet", "nas"))
    light_capped = run(("alexnet", "nas"), {"alexnet": 100.0})
    for key in ("avg_jct_s", "energy_kwh", "gpu_energy_kwh", "makespan_s"):
        assert light_capped[key] == pytest.approx(uncapped[key], rel=1e-12), key


def test_when_every_job_asks_a_cap_the_gpu_holds_the_highest_and_all_slow():
    pair = ("nas", "nas")
    got = run(pair, {"nas": 150.0})
    run_s = RUN_S * group_slowdowns(list(pair), model="V100")[0] \
        * cap_slowdown(demand_w(pair), 150.0, "V100")
    assert got["avg_jct_s"] == pytest.approx(run_s, rel=1e-9)
    assert got["gpu_energy_kwh"] * 3.6e6 == pytest.approx(150.0 * run_s, rel=1e-6)


def test_a_job_alone_on_its_gpu_follows_its_configuration_model():
    got = run(("nas",), {"nas": 150.0})
    power_w, slow = capped_job("nas", 1, 150.0, "V100", 1)
    assert got["avg_jct_s"] == pytest.approx(RUN_S * slow, rel=1e-9)
    assert got["gpu_energy_kwh"] * 3.6e6 == pytest.approx(power_w * RUN_S * slow, rel=1e-6)
