"""Per-job GPU energy on the real local cluster: prolog/epilog run by slurmd, the collector's
split of a shared GPU against the emulated GPUs' truth, the AdminComment summary."""

from __future__ import annotations

import time

import pytest

from slurm_plugin.localcluster.energy_check import (admin_comment, compare, submit_group, truth,
                                                    wait_records)

pytestmark = pytest.mark.cluster


def test_three_jobs_on_one_gpu_and_one_alone_are_charged_their_share(localcluster):
    cfg = localcluster.config()
    shared = submit_group(cfg, ["vgg16", "alexnet", "lstm"], "gpu2", "g1", 40)
    alone = submit_group(cfg, ["resnet18"], "gpu3", "g0", 40)
    records = wait_records(cfg, shared + alone, timeout_s=120)
    assert set(records) == set(shared + alone), records
    true_j = truth(cfg)
    group = compare({j: records[j] for j in shared}, true_j)
    assert group["max_abs_error"] <= 0.05, group
    assert abs(group["sum_error"]) <= 0.05, group
    assert group["splits"] == ["util-class"]
    solo = records[alone[0]]
    assert solo["split"] == "exclusive" and solo["shared_gpu_s"] == 0
    assert solo["energy_j"] == pytest.approx(true_j[alone[0]], rel=0.1)
    assert all(records[j]["shared_gpu_s"] > 0 for j in shared)
    assert all(records[j]["app"] for j in shared + alone)
    # which GPU each ran on (typed g1 is index 1): the report finds co-runners by it
    assert {records[j]["gpu_indexes"] for j in shared} == {"1"} and solo["gpu_indexes"] == "0"
    deadline = time.monotonic() + 30           # the epilog writes it after the point
    while "wb-energy:" not in (comment := admin_comment(cfg, shared[0])):
        assert time.monotonic() < deadline, comment
        time.sleep(0.5)
    parts = comment.split(" ")        # job_submit.lua's facts kept beside the summary
    assert any(p.startswith("wb:uid=") for p in parts), comment
    assert any(p.startswith("wb-energy:energy_j=") and "split=util-class" in p for p in parts)
