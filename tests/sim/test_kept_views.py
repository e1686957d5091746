"""Caches that must decide nothing: gandiva's residents per GPU view (read again for another
view of the GPU), and the simulator's forecast points after now (cut once per forecast issue
and hour, not filtered per read)."""

from __future__ import annotations

from pathlib import Path

import slurm_plugin.policy.gandiva as gandiva
from slurm_plugin.physics.classes import class_mix
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.run import Inputs
from slurm_plugin.sim.trace import builtin_trace


def _inputs(nodes: int = 4) -> Inputs:
    return Inputs(Path(builtin_trace()), "philly", ClusterSpec(nodes=nodes, gpus_per_node=8),
                  "GB", class_mix=class_mix("eaco-paper"))


def test_gandiva_reads_a_gpus_residents_again_for_another_view():
    from slurm_plugin.model import Cluster, Gpu, Job, Node
    from slurm_plugin.physics import job_class

    jobs = {"a": Job(job_id="a", state="RUNNING", app="alexnet"),
            "b": Job(job_id="b", state="RUNNING", app="resnet18")}
    one = Gpu(node="n0", index=0, shards_total=8, shards_used=4, shard_jobs=("a",))
    cluster = Cluster(nodes=(Node(name="n0", gpus=(one,)),), jobs=jobs)
    alexnet, resnet = job_class("alexnet"), job_class("resnet18")
    assert gandiva._residents(cluster, one) == (alexnet.util_at(1), alexnet.memory_mib)
    two = Gpu(node="n0", index=0, shards_total=8, shards_used=8, shard_jobs=("a", "b"))
    assert gandiva._residents(cluster, two) == (
        alexnet.util_at(1) + resnet.util_at(1), alexnet.memory_mib + resnet.memory_mib)
    assert gandiva._residents(cluster, one)[0] == alexnet.util_at(1)


def test_forecast_points_are_those_after_now():
    from slurm_plugin.policy.greenflow.decide import GreenFlow

    seen = []

    class Spy(GreenFlow):
        def advise(self, request, ctx):
            pts = tuple(ctx.readings.carbon_forecast)
            sim = spy_sim[0]
            issued = sim.forecast_cache[1]
            assert pts == tuple(p for p in issued if p[0] > ctx.now_s)
            seen.append(len(pts))
            return super().advise(request, ctx)

    from slurm_plugin.sim.engine import Simulator
    from slurm_plugin.sim.run import load_carbon, load_jobs

    spy_sim: list = []
    inputs = _inputs(4)
    jobs = load_jobs(inputs)[:200]
    sim = Simulator(jobs, inputs.spec, Spy(),
                    carbon=load_carbon(inputs.carbon, inputs.zone, jobs[0].submit_s))
    spy_sim.append(sim)
    sim.run()
    assert len(seen) >= 100 and len(set(seen)) > 5
