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


def _reading_as_defined(sim, node_name: str, index: int):
    """A GPU's reading as the view defines it: the memory of all its jobs, the lowest cap
    among them (the GPU's maximum when none is capped)."""
    from slurm_plugin.model import GpuReading

    node = sim.node_by_name[node_name]
    g = node.gpus[index]
    cap = min((j.cap_w for j in g.jobs if j.cap_w), default=node.kind.max_w)
    return GpuReading(node=node_name, index=index, power_w=g.power_w, energy_j=0.0,
                      util_pct=g.util_pct, mem_used_mib=sum(j.cls.memory_mib for j in g.jobs),
                      power_limit_w=cap, taken_s=sim.now)


def test_gpu_readings_match_their_definition_for_idle_single_and_shared_gpus():
    """The view's fast paths (no job, one job) and ``get`` give what the definition gives,
    under sharing (eaco) and under power caps (greenflow)."""
    from slurm_plugin.policy.eaco.decide import Eaco
    from slurm_plugin.policy.greenflow.decide import GreenFlow
    from slurm_plugin.sim.engine import Simulator
    from slurm_plugin.sim.run import load_carbon, load_jobs, period_budget

    for base in (Eaco, GreenFlow):
        holders: set[int] = set()
        capped, passes = [0], [0]
        wrong: list = []
        absent: list = []
        spy_sim: list = []

        class Spy(base):
            def reconcile(self, ctx):
                passes[0] += 1
                if passes[0] % 50:      # a pass a minute for months: every 50th is enough
                    return super().reconcile(ctx)
                sim = spy_sim[0]
                gpus = ctx.readings.gpus
                for key in gpus:
                    want = _reading_as_defined(sim, *key)
                    if gpus[key] != want or gpus.get(key) != want:
                        wrong.append((key, gpus[key], want))
                    g = sim.node_by_name[key[0]].gpus[key[1]]
                    holders.add(len(g.jobs))
                    capped[0] += any(j.cap_w for j in g.jobs)
                node = next(iter(gpus))[0]
                absent.append((gpus.get(("no-such-node", 0)), gpus.get((node, 99), "absent")))
                return super().reconcile(ctx)

        inputs = _inputs(4)
        jobs = load_jobs(inputs)[:100]
        sim = Simulator(jobs, inputs.spec, Spy(),
                        carbon=load_carbon(inputs.carbon, inputs.zone, jobs[0].submit_s),
                        settings=period_budget(jobs, 1.0) if base is GreenFlow else None)
        spy_sim.append(sim)
        sim.run()
        # an exception in a pass is the simulator's fail-open fallback, not a test failure
        assert sim.metrics.policy_fallbacks == 0
        assert not wrong, wrong[:3]
        assert absent and set(absent) == {(None, "absent")}
        assert {0, 1} <= holders, (base.name, holders)
        if base is Eaco:
            assert max(holders) >= 2, holders
        else:
            assert capped[0] > 0
