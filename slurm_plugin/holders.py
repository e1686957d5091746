"""Each GPU's holders from the jobs' allocations: what the snapshot, the cluster view and the
burst cache all count (a submission that decides from the view loads this, not the Slurm
parsers). Pure."""

from __future__ import annotations

from .model import Gpu, Job, Node
from .record import replace

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Iterable, Mapping

ACTIVE_STATES = frozenset({"PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING",
                           "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING",
                           "STAGE_OUT"})


def attach_jobs(nodes: Iterable[Node], jobs: Iterable[Job]) -> tuple[Node, ...]:
    """Fill each GPU's exclusive job, shard jobs and shards used from the jobs' allocations,
    and from the typed pins of pending jobs (the GPU is theirs once they start). A pin never
    hides a job that holds the GPU now: it counts only where it could share, or the GPU is
    free."""
    exclusive: dict[tuple[str, int], str] = {}
    shared: dict[tuple[str, int], list[tuple[str, int]]] = {}
    nodes = tuple(nodes)
    pinned = []
    for job in jobs:
        if job.state == "PENDING" or job.state not in ACTIVE_STATES:
            if job.pinned:
                pinned.append(job)
            continue
        for use in job.uses:
            if use.shards:
                shared.setdefault((use.node, use.index), []).append((job.job_id, use.shards))
            else:
                exclusive[(use.node, use.index)] = job.job_id
    out = []
    get_owner, get_held = exclusive.get, shared.get
    for node in nodes:
        gpus = None
        for k, g in enumerate(node.gpus):        # ``_holders``, inline: 80,000 GPUs and more
            key = (g.node, g.index)
            owner, held = get_owner(key), get_held(key, ())
            if owner is None and not held and g.exclusive_job is None and not g.shard_jobs \
                    and not g.shards_used:
                continue
            if gpus is None:
                gpus = list(node.gpus)
            gpus[k] = Gpu(g.node, g.index, g.model, g.gres_type, g.memory_mib, g.shards_total,
                          sum([n for _, n in held]), owner, tuple([j for j, _ in held]))
        out.append(node if gpus is None else replace(node, gpus=tuple(gpus)))
    attached = with_pins(tuple(out), pinned)    # the pins last, by the one rule for pins
    assert attached is not None                 # no job in ``pinned`` holds GPUs now
    return attached


def with_pins(nodes: tuple[Node, ...], jobs: Iterable[Job]) -> tuple[Node, ...] | None:
    """``nodes`` (their holders attached) with the typed pins of ``jobs`` added, in order: a
    pin counts on its node's one GPU of that type, where no job holds the whole GPU and, for a
    whole-GPU pin, none holds shards of it. ``attach_jobs`` adds every pin this way after the
    allocations, so a submission's jobs added later count as attaching every job again would
    count them; only the nodes they pin are made anew, the others are the same objects (a
    policy's caches of them hold). None when one of ``jobs`` holds GPUs now (``attach_jobs``
    then counts again)."""
    pins = []
    for job in jobs:
        if job.state != "PENDING" and job.state in ACTIVE_STATES:
            if job.uses:
                return None
            continue
        pins.extend((job.job_id, pin) for pin in job.pinned)
    if not pins:
        return nodes
    names = {node for _, (node, _, _) in pins}
    out = list(nodes)
    where = {n.name: k for k, n in enumerate(out) if n.name in names}
    for job_id, (name, typ, shares) in pins:
        k = where.get(name)
        index = None if k is None else _unique_types((out[k],)).get((name, typ))
        if index is None:
            continue
        node = out[k]
        at = next(i for i, g in enumerate(node.gpus) if g.index == index)
        g = node.gpus[at]
        if g.exclusive_job is not None or (not shares and g.shard_jobs):
            continue
        g = replace(g, shards_used=g.shards_used + shares, shard_jobs=(*g.shard_jobs, job_id)) \
            if shares else replace(g, exclusive_job=job_id)
        out[k] = replace(node, gpus=(*node.gpus[:at], g, *node.gpus[at + 1:]))
    return tuple(out)


def _unique_types(nodes: Iterable[Node]) -> dict[tuple[str, str], int]:
    """(node, GRES type) -> GPU index, for types that name one GPU of their node."""
    seen: dict[tuple[str, str], list[int]] = {}
    for n in nodes:
        for g in n.gpus:
            if g.gres_type:
                seen.setdefault((n.name, g.gres_type), []).append(g.index)
    return {k: v[0] for k, v in seen.items() if len(v) == 1}
