"""The power greenflow prices owed work at: the mean measured power of the GPUs that hold a
job (whole or by shards), each with its share of its node's base power; idle and unread GPUs
do not count."""

from __future__ import annotations

from slurm_plugin.model import Cluster, Gpu, GpuReading, Node, Readings
from slurm_plugin.policy.greenflow.observe import OWED_GPU_W, power_per_allocated_gpu_w


def _reading(node: str, index: int, power_w: float) -> GpuReading:
    return GpuReading(node=node, index=index, power_w=power_w, energy_j=0.0, util_pct=0.0,
                      mem_used_mib=0.0, power_limit_w=300.0, taken_s=0.0)


def test_only_gpus_holding_a_job_and_read_count():
    a = (Gpu(node="a", index=0, exclusive_job="1"),
         Gpu(node="a", index=1, shards_total=8, shards_used=2, shard_jobs=("2", "3")),
         Gpu(node="a", index=2),                                  # idle: not counted
         Gpu(node="a", index=3, exclusive_job="4"))               # holds a job, not read
    b = (Gpu(node="b", index=0, exclusive_job="5"), Gpu(node="b", index=1))
    cluster = Cluster(nodes=(Node(name="a", gpus=a), Node(name="b", gpus=b)))
    readings = Readings(gpus={("a", 0): _reading("a", 0, 200.0), ("a", 1): _reading("a", 1, 100.0),
                              ("a", 2): _reading("a", 2, 999.0), ("b", 0): _reading("b", 0, 60.0),
                              ("b", 1): _reading("b", 1, 999.0)})
    # base 400 W a node: 100 W a GPU on a (4 GPUs), 200 W a GPU on b (2 GPUs)
    want = ((200 + 100) + (100 + 100) + (60 + 200)) / 3
    assert power_per_allocated_gpu_w(cluster, readings, 400.0) == want


def test_nothing_allocated_or_read_prices_at_the_default():
    idle = Cluster(nodes=(Node(name="a", gpus=(Gpu(node="a", index=0),)),))
    assert power_per_allocated_gpu_w(idle, Readings(), 400.0) == OWED_GPU_W
    held = Cluster(nodes=(Node(name="a", gpus=(Gpu(node="a", index=0, exclusive_job="1"),)),))
    assert power_per_allocated_gpu_w(held, Readings(), 400.0) == OWED_GPU_W
