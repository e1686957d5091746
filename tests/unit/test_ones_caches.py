"""``ones`` keeps what it read from pass to pass (each running job's count range and GPUs per
node by its view, each queued job's plan by its view, fraction done, geometry and settings;
the bound's price of a GPU): a pass decides exactly as one that starts with none of it, over a
whole simulated run of profiled and unprofiled elastic jobs arriving, growing and ending.
A pass that builds no plans because no running job could grow and none is queued decides as
one that builds them."""

from __future__ import annotations

import random

from slurm_plugin.model import Cluster, Gpu, Job, Node, Readings
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.base import Context
from slurm_plugin.policy.ones import decide
from slurm_plugin.policy.ones import evolve as evolve_module
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.trace import TraceJob

from test_ones_policy import _workload


class Twin:
    """Runs ``ones`` and, on the same context, a second ``ones`` whose kept readings are
    dropped (and the price set at random) before every pass; records where they differ."""

    def __init__(self) -> None:
        self.inner, self.fresh = get_policy("ones"), get_policy("ones")
        self.name = self.inner.name
        self.rng = random.Random(5)
        self.passes = 0
        self.differ: list = []

    def advise(self, request, ctx):
        return self.inner.advise(request, ctx)

    def reconcile(self, ctx):
        acts = self.inner.reconcile(ctx)
        self.fresh._seen.clear()
        self.fresh._queued.clear()
        evolve_module._PRICE[0] = self.rng.choice((0.0, 1e-7, 1e-5, 1e-3))
        again = self.fresh.reconcile(ctx)
        self.passes += 1
        if acts != again:
            self.differ.append((ctx.now_s, acts, again))
        return acts


def _unprofiled(n: int, every_s: float = 90.0) -> list[TraceJob]:
    rng = random.Random(3)
    return [TraceJob(job_id=f"u{i}", submit_s=every_s * i, duration_s=rng.uniform(600, 7200),
                     num_gpus=rng.choice((1, 2, 4)), line=i + 2, min_gpus=1, max_gpus=8,
                     time_limit_s=40_000.0) for i in range(n)]


def test_kept_readings_decide_as_a_pass_without_them():
    jobs = sorted(_workload(30) + _unprofiled(30), key=lambda j: j.submit_s)
    twin = Twin()
    spec = ClusterSpec(nodes=4, gpus_per_node=4, reconcile_interval_s=60, restart_cost_s=90)
    r = Simulator(jobs, spec, twin, seed=0, settings={"restart_cost_s": 90.0}).run()
    assert r["jobs_finished"] == len(jobs)
    assert twin.passes > 50 and r["actions"].get("resize", 0) > 5
    assert twin.differ == []


def _queued_ctx(now: float, queued: Job, history: dict) -> Context:
    """An idle node of 8 GPUs and one elastic job queued for it."""
    node = Node(name="n0", state="idle", gpus=tuple(Gpu(node="n0", index=k) for k in range(8)))
    cluster = Cluster(nodes=(node,), jobs={"2": queued}, taken_s=now, pending_count=1,
                      nodes_version=int(now))
    return Context(cluster=cluster, readings=Readings(), now_s=now, history=history,
                   history_version=len(history))


def test_a_queued_job_whose_view_or_fraction_changed_is_planned_again():
    wide, narrow = (Job(job_id="2", state="PENDING", gpus=1, submit_s=1.0, time_limit_s=1e5,
                        min_gpus=1, max_gpus=m) for m in (8, 2))
    kept = get_policy("ones")
    for now, job, history in ((1000.0, wide, {}), (1060.0, narrow, {}),
                              (1120.0, narrow, {"ones:f:2": 0.5})):
        got = kept.reconcile(_queued_ctx(now, job, history))
        assert got == get_policy("ones").reconcile(_queued_ctx(now, job, history))
        assert [a.gpus for a in got if a.kind == "resize"] == [job.max_gpus]


class Unskipped(Twin):
    """As ``Twin``, the second ``ones`` building every plan: it never takes a running
    schedule that cannot grow as the answer without evolving it; counts the passes the first
    took so."""

    def __init__(self, monkeypatch) -> None:
        super().__init__()
        self.monkeypatch = monkeypatch
        self.skipped = 0
        real = decide._may_grow

        def counted(*args):
            grows = real(*args)
            self.skipped += not grows and bool(args[0])
            return grows
        self.counted = counted

    def reconcile(self, ctx):
        with self.monkeypatch.context() as m:
            m.setattr(decide, "_may_grow", self.counted)
            acts = self.inner.reconcile(ctx)
        with self.monkeypatch.context() as m:
            m.setattr(decide, "_may_grow", lambda *args: True)
            again = self.fresh.reconcile(ctx)
        self.passes += 1
        if acts != again:
            self.differ.append((ctx.now_s, acts, again))
        return acts


def test_a_pass_that_builds_no_plan_when_nothing_can_grow_decides_as_one_that_does(
        monkeypatch):
    jobs = sorted(_workload(6) + _unprofiled(60, 1200.0), key=lambda j: j.submit_s)
    twin = Unskipped(monkeypatch)
    spec = ClusterSpec(nodes=4, gpus_per_node=4, reconcile_interval_s=60, restart_cost_s=90)
    r = Simulator(jobs, spec, twin, seed=0, settings={"restart_cost_s": 90.0}).run()
    assert r["jobs_finished"] == len(jobs)
    assert twin.skipped > 100 and r["actions"].get("resize", 0) > 5
    assert twin.differ == []
