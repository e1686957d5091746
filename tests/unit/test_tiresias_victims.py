"""tiresias stops a running job only where that lets a queued job ranked above it start on
the nodes: GPUs freed on the wrong nodes would sit idle while the queued job still waits."""

from __future__ import annotations

from slurm_plugin.model import GpuUse, Job
from slurm_plugin.policy.tiresias.decide import _victims


def running(jid: str, *where: str) -> Job:
    return Job(job_id=jid, user="u", state="RUNNING", gpus=len(where), start_s=0.0,
               uses=tuple(GpuUse(node, i) for i, node in enumerate(where)))


def queued(jid: str, gpus: int, num_nodes: int = 1) -> Job:
    return Job(job_id=jid, user="u", state="PENDING", gpus=gpus, num_nodes=num_nodes)


def test_stopping_jobs_on_different_nodes_for_a_one_node_job_is_futile():
    losers = [(5, running("l1", "a")), (6, running("l2", "b"))]
    assert _victims([(1, queued("q", 2))], losers, {"a": 0, "b": 0}, cap=16) == set()


def test_the_lowest_ranked_jobs_of_one_node_are_stopped():
    losers = [(5, running("l1", "a")), (6, running("l2", "b")), (7, running("l3", "a")),
              (8, running("l4", "b", "b"))]
    # node a: l3 then l1 (2 GPUs, two jobs); node b: l4 alone frees 2 GPUs
    assert _victims([(1, queued("q", 2))], losers, {"a": 0, "b": 0}, cap=16) == {"l4"}
    assert _victims([(1, queued("q", 3))], losers, {"a": 1, "b": 0}, cap=16) == {"l1", "l3"}


def test_a_job_ranked_above_the_queued_one_is_never_stopped():
    losers = [(2, running("above", "a", "a"))]
    assert _victims([(3, queued("q", 2))], losers, {"a": 0}, cap=16) == set()


def test_free_gpus_first_and_each_gpu_promised_once():
    losers = [(5, running("l1", "a")), (6, running("l2", "b"))]
    winners = [(1, queued("q1", 1)), (2, queued("q2", 1)), (3, queued("q3", 1))]
    # q1 takes the free GPU of c; q2 and q3 stop one job each
    assert _victims(winners, losers, {"a": 0, "b": 0, "c": 1}, cap=16) == {"l1", "l2"}


def test_a_job_over_several_nodes_and_the_cap():
    losers = [(5, running("l1", "a")), (6, running("l2", "b"))]
    assert _victims([(1, queued("q", 1, num_nodes=2))], losers, {"a": 0, "b": 0},
                    cap=16) == {"l1", "l2"}
    assert _victims([(1, queued("q", 1, num_nodes=2))], losers, {"a": 0, "b": 0},
                    cap=1) == set()
