"""The packing baselines (fifo-packed, gandiva) explain why a job is not packed: a one-GPU job
is no multi-GPU job."""

from __future__ import annotations

import pytest

from slurm_plugin.model import Cluster, JobRequest
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.base import Context

CTX = Context(cluster=Cluster(nodes=()))


@pytest.mark.parametrize("name", ["fifo-packed", "gandiva"])
@pytest.mark.parametrize("request_, why", [
    (JobRequest(gpus=2, app="resnet18"), "multi-GPU job, exclusive GPUs"),
    (JobRequest(gpus=1, num_nodes=2, app="resnet18"), "multi-GPU job, exclusive GPUs"),
    (JobRequest(gpus=1), "job class unknown (no --wb-app)"),
    (JobRequest(gpus=1, app="resnet18", allow_share=False), "opted out of sharing"),
    (JobRequest(gpus=1, app="resnet18", opt_out=frozenset({"share"})), "opted out of sharing"),
])
def test_a_job_not_packed_is_explained_by_its_reason(name, request_, why):
    placement = get_policy(name).advise(request_, CTX)
    assert placement.share_mode != "shard" and placement.why[0].startswith(f"{name}: ")
    assert why in placement.why[0]
    if request_.total_gpus == 1:
        assert "multi-GPU" not in placement.why[0]
