"""``holders.with_pins``: a submission's pending jobs added to a snapshot's holders on the
nodes they pin only, counting what ``attach_jobs`` over every job counts."""

from __future__ import annotations

import random

import pytest

from slurm_plugin.holders import attach_jobs, with_pins
from slurm_plugin.model import Gpu, GpuUse, Job, Node


def _shape(rng: random.Random) -> tuple[tuple[Node, ...], list[Job], list[Job]]:
    """Nodes of typed GPUs (a type naming two GPUs of a node now and then: no pin counts
    there), running jobs whole and on shards, pending jobs pinned, and new pending jobs."""
    nodes = []
    for n in range(rng.randint(1, 6)):
        types = [f"g{i}" for i in range(rng.randint(1, 4))]
        if rng.random() < 0.2:
            types.append(types[0])
        nodes.append(Node(name=f"n{n}", gpus=tuple(
            Gpu(f"n{n}", i, gres_type=t, shards_total=rng.choice((0, 4)))
            for i, t in enumerate(types))))
    keys = [(node.name, g.index, g.gres_type) for node in nodes for g in node.gpus]

    def pending(job_id: str) -> Job:
        pins = tuple((node, typ, rng.choice((0, 1, 2)))
                     for node, _, typ in rng.sample(keys, rng.randint(1, min(3, len(keys)))))
        return Job(job_id=job_id, state="PENDING", pinned=pins)

    old = []
    for k in range(rng.randint(0, 8)):
        node, index, _ = rng.choice(keys)
        if rng.random() < 0.4:
            old.append(pending(f"p{k}"))
        else:
            shards = rng.choice((0, 1, 2))
            old.append(Job(job_id=f"r{k}", state="RUNNING", gpus=0 if shards else 1,
                           shards=shards, uses=(GpuUse(node, index, shards),)))
    new = [pending(f"s{k}") for k in range(rng.randint(1, 4))]
    return tuple(nodes), old, new


@pytest.mark.parametrize("seed", range(300))
def test_pins_added_count_as_attaching_every_job_again(seed):
    rng = random.Random(seed)
    nodes, old, new = _shape(rng)
    attached = attach_jobs(nodes, old)
    added = with_pins(attached, new)
    assert added == attach_jobs(nodes, old + new)
    pinned = {node for job in new for node, _, _ in job.pinned}
    for before, after in zip(attached, added):
        if before.name not in pinned:
            assert after is before          # an untouched node is the same object


def test_a_job_that_holds_gpus_now_has_them_counted_again():
    node = Node(name="n1", gpus=(Gpu("n1", 0, gres_type="g0"),))
    running = Job(job_id="1", state="RUNNING", gpus=1, uses=(GpuUse("n1", 0, 0),))
    assert with_pins((node,), [running]) is None
    assert with_pins((node,), [Job(job_id="2", state="PENDING")]) == (node,)
