"""tiresias stops a running job only where that lets a queued job ranked above it start on
the nodes: GPUs freed on the wrong nodes would sit idle while the queued job still waits; and
never for a queued job of its own queue and submission time (a tie only the job id breaks)."""

from __future__ import annotations

from slurm_plugin.model import GpuUse, Job
from slurm_plugin.policy.tiresias.decide import _victims


def running(jid: str, *where: str) -> Job:
    return Job(job_id=jid, user="u", state="RUNNING", gpus=len(where), start_s=0.0,
               uses=tuple(GpuUse(node, i) for i, node in enumerate(where)))


def queued(jid: str, gpus: int, num_nodes: int = 1) -> Job:
    return Job(job_id=jid, user="u", state="PENDING", gpus=gpus, num_nodes=num_nodes)


def r(pos: int, queue: int = 0, submit_s: float | None = None) -> tuple:
    """A rank as reconcile makes it: (queue, submission, position); by default each position
    its own submission time."""
    return queue, float(pos) if submit_s is None else submit_s, pos


def test_stopping_jobs_on_different_nodes_for_a_one_node_job_is_futile():
    losers = [(r(5), running("l1", "a")), (r(6), running("l2", "b"))]
    assert _victims([(r(1), queued("q", 2))], losers, {"a": 0, "b": 0}, cap=16) == set()


def test_the_lowest_ranked_jobs_of_one_node_are_stopped():
    losers = [(r(5), running("l1", "a")), (r(6), running("l2", "b")), (r(7), running("l3", "a")),
              (r(8), running("l4", "b", "b"))]
    # node a: l3 then l1 (2 GPUs, two jobs); node b: l4 alone frees 2 GPUs
    assert _victims([(r(1), queued("q", 2))], losers, {"a": 0, "b": 0}, cap=16) == {"l4"}
    assert _victims([(r(1), queued("q", 3))], losers, {"a": 1, "b": 0}, cap=16) == {"l1", "l3"}


def test_a_job_ranked_above_the_queued_one_is_never_stopped():
    losers = [(r(2), running("above", "a", "a"))]
    assert _victims([(r(3), queued("q", 2))], losers, {"a": 0}, cap=16) == set()


def test_free_gpus_first_and_each_gpu_promised_once():
    losers = [(r(5), running("l1", "a")), (r(6), running("l2", "b"))]
    winners = [(r(1), queued("q1", 1)), (r(2), queued("q2", 1)), (r(3), queued("q3", 1))]
    # q1 takes the free GPU of c; q2 and q3 stop one job each
    assert _victims(winners, losers, {"a": 0, "b": 0, "c": 1}, cap=16) == {"l1", "l2"}


def test_a_job_over_several_nodes_and_the_cap():
    losers = [(r(5), running("l1", "a")), (r(6), running("l2", "b"))]
    assert _victims([(r(1), queued("q", 1, num_nodes=2))], losers, {"a": 0, "b": 0},
                    cap=16) == {"l1", "l2"}
    assert _victims([(r(1), queued("q", 1, num_nodes=2))], losers, {"a": 0, "b": 0},
                    cap=1) == set()


def test_a_tie_in_queue_and_submission_stops_nothing():
    # the same queue and submission time: only the job id orders them, and Slurm (or the
    # simulator's trace order) may order them the other way: a stop would restart the loser
    # ahead of the winner, pass after pass
    losers = [(r(2, submit_s=600.0), running("yolov3-0", "a", "a", "a", "a"))]
    assert _victims([(r(1, submit_s=600.0), queued("bert-1", 3))], losers, {"a": 0},
                    cap=16) == set()
    # an earlier submission, or a higher queue, still wins the GPUs
    assert _victims([(r(1, submit_s=599.0), queued("bert-1", 3))], losers, {"a": 0},
                    cap=16) == {"yolov3-0"}
    higher = [(r(2, queue=1, submit_s=600.0), running("yolov3-0", "a", "a", "a", "a"))]
    assert _victims([(r(1, submit_s=600.0), queued("bert-1", 3))], higher, {"a": 0},
                    cap=16) == {"yolov3-0"}
