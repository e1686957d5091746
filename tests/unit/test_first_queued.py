"""``first_queued`` reads the head of the caller's priority order only where that order is by
submission (no job in a later --nice tier); with tiers, or where it is not said, it sorts every
pending job, and both ways give the first jobs by (submission, id)."""

from __future__ import annotations

import pytest

from slurm_plugin.model import Cluster, Job
from slurm_plugin.policy.queue import first_queued


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
    assert _ids(first_queued(plain, 5)) == ["1", "10", "9", "2"]   # ties by id
