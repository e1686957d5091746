"""``first_queued`` reads the head of the caller's priority order only where that order is by
submission (no job in a later --nice tier); with tiers, or where it is not said, it sorts every
pending job, and both ways give the first jobs by (submission, id), ids in Slurm's number
order."""

from __future__ import annotations

import pytest

from slurm_plugin.model import Cluster, Job
from slurm_plugin.policy.queue import first_queued, id_order


def _job(jid: str, submit_s: float, shards: int = 0) -> Job:
    return Job(job_id=jid, state="PENDING", gpus=0 if shards else 1, shards=shards,
               submit_s=submit_s)


def _cluster(order: list[Job], tiered: int | None) -> Cluster:
    return Cluster(nodes=(), jobs={j.job_id: j for j in order}, pending_count=len(order),
                   pending_jobs=tuple(order), pending_tiered=tiered)


def _ids(jobs: list[Job]) -> list[str]:
    return [j.job_id for j in jobs]


def test_a_later_tier_with_an_earlier_submission_is_not_missed():
    # priority order: tier 0 by submission, then a tier-1 job submitted first of all
    order = [_job("b", 20.0), _job("c", 30.0), _job("a", 10.0)]
    assert _ids(first_queued(_cluster(order, 1), 1)) == ["a"]
    assert _ids(first_queued(_cluster(order, None), 2)) == ["a", "b"]


@pytest.mark.parametrize("limit", [1, 2, 3, 5])
def test_the_head_of_a_submission_order_is_read_with_ties_and_without_shard_jobs(limit):
    order = [_job("1", 5.0), _job("s", 6.0, shards=2), _job("9", 7.0), _job("10", 7.0),
             _job("2", 8.0)]
    plain = Cluster(nodes=(), jobs={j.job_id: j for j in order}, pending_count=len(order))
    got = first_queued(_cluster(order, 0), limit)
    assert _ids(got) == _ids(first_queued(plain, limit))
    assert _ids(first_queued(plain, 5)) == ["1", "9", "10", "2"]   # ties by id, as numbers


def test_ties_go_by_slurms_number_order_array_tasks_included():
    # an array submitted at once: Slurm runs task 2 before task 10, job 99 before job 100
    order = [_job("123_10", 5.0), _job("123_2", 5.0), _job("100", 5.0), _job("99", 5.0),
             _job("123_[11-20]", 5.0), _job("name-1", 5.0)]
    plain = Cluster(nodes=(), jobs={j.job_id: j for j in order}, pending_count=len(order))
    assert _ids(first_queued(plain, 6)) == ["99", "100", "123_[11-20]", "123_2", "123_10",
                                            "name-1"]
    assert _ids(first_queued(_cluster(order, 0), 6)) == _ids(first_queued(plain, 6))


@pytest.mark.parametrize("ids", [["7", "7_1", "7_2", "7_10", "8", "10", "10+1", "a", "b2"]])
def test_id_order_is_slurms_numbers_then_names(ids):
    import random
    shuffled = ids[:]
    random.Random(0).shuffle(shuffled)
    assert sorted(shuffled, key=id_order) == ids
