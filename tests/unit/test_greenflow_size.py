"""GreenFlow's sizing of running elastic jobs (``policy/greenflow/size.py``)."""

from __future__ import annotations

import pytest

from slurm_plugin.model import Cluster, Gpu, Job, Node, Readings
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.base import Context
from slurm_plugin.policy.greenflow.size import is_resizable, resize

H = 3600.0


def elastic_job(**kw) -> Job:
    fields = dict(job_id="7", state="RUNNING", gpus=8, app="vgg16", min_gpus=1, max_gpus=8,
                  start_s=0.0, time_limit_s=100 * H, nodes=("n0",))
    fields.update(kw)
    return Job(**fields)


def step(before: float, after: float, at_s: float = 7 * H):
    """Mean intensity over [a, b]: ``before`` until ``at_s``, ``after`` from then on."""
    def mean(a: float, b: float) -> float:
        cut = min(max(at_s, a), b)
        return (before * (cut - a) + after * (b - cut)) / (b - a)
    return mean


def dirty_then_clean(dirty: float, clean: float):
    return step(dirty, clean)


def decide(job: Job, mean, w: float, now_s: float = 7 * H, free: int = 0):
    return resize(job, now_s, {"n0": free}, 8, lambda g: 250.0, 40.0, 400.0, mean, w, 90.0,
                  6 * H, "greenflow")


def test_a_job_shrinks_through_hours_much_dirtier_than_the_day_after_them():
    a = decide(elastic_job(), dirty_then_clean(2000.0, 100.0), w=1.0, now_s=H * 6.5)
    assert a is not None and a.kind == "resize" and a.gpus < 8 and a.run == 0
    # the same with carbon of no weight: shrinking only costs time
    assert decide(elastic_job(), dirty_then_clean(2000.0, 100.0), w=0.0, now_s=H * 6.5) is None


def test_flat_intensity_or_a_node_that_stays_on_gives_no_reason_to_shrink():
    # over 6 h the GPUs given back still idle and the node's base power is paid: the work
    # made up later costs more than the dynamic power saved
    assert decide(elastic_job(), dirty_then_clean(300.0, 300.0), w=1.0) is None
    assert decide(elastic_job(), dirty_then_clean(400.0, 300.0), w=1.0, now_s=H * 6.5) is None


def test_a_job_grows_into_free_gpus_of_its_node_and_not_beyond_them():
    # more work per powered node: less time and, at the same intensity, less carbon
    job = elastic_job(gpus=2, max_gpus=8)
    for w in (0.0, 1.0):
        a = decide(job, step(300.0, 300.0), w=w, free=6)
        assert a is not None and a.gpus == 8
    assert decide(job, step(300.0, 300.0), w=1.0, free=2).gpus == 4
    assert decide(job, step(300.0, 300.0), w=1.0, free=0) is None


def test_only_single_node_elastic_jobs_past_their_interval_and_limit_are_resized():
    mean = dirty_then_clean(2000.0, 100.0)
    assert not is_resizable(elastic_job(min_gpus=None, max_gpus=None))
    assert not is_resizable(elastic_job(num_nodes=2))
    assert not is_resizable(elastic_job(min_gpus=4, max_gpus=4))
    assert not is_resizable(elastic_job(state="PENDING"))
    assert is_resizable(elastic_job())
    assert decide(elastic_job(start_s=2 * H), mean, w=1.0, now_s=6.5 * H) is None   # too soon
    assert decide(elastic_job(time_limit_s=10 * H), mean, w=1.0, now_s=6.5 * H) is None  # ends


@pytest.mark.parametrize("queued", [False, True])
def test_reconcile_resizes_only_while_no_job_is_queued(queued):
    node = Node(name="n0", gpus=tuple(Gpu(node="n0", index=i, exclusive_job="7")
                                      for i in range(8)))
    jobs = {"7": elastic_job()}
    if queued:
        jobs["8"] = Job(job_id="8", state="PENDING", gpus=1, time_limit_s=H)
    now = 6.5 * H
    forecast = tuple((now + k * H, 2000.0 if k < 1 else 100.0) for k in range(1, 48))
    ctx = Context(cluster=Cluster(nodes=(node,), jobs=jobs), now_s=now,
                  settings={"budget_kg_per_day": 0.001},
                  readings=Readings(carbon_g_per_kwh=2000.0, carbon_forecast=forecast,
                                    cluster_power_w=2400.0))
    kinds = [a.kind for a in get_policy("greenflow").reconcile(ctx) if a.job_id == "7"]
    assert ("resize" in kinds) is not queued
