"""Free GPUs per node and the cluster's geometry, as the sizing policies (elastic, ones,
tiresias) read them, cached on the node views (the simulator hands in the same objects while a
node is unchanged)."""

from __future__ import annotations

from ..model import Cluster, Job
from .model_groups import largest_model_gpus
from .view_changes import ViewChanges

_NODE_CACHE: dict[str, tuple] = {}    # name -> (node view, free GPUs, job ids, available)


def node_facts(node) -> tuple:
    """(free GPUs, ids of exclusive jobs, available) of a node view, cached on the view object
    (the simulator hands in the same object while a node is unchanged)."""
    c = _NODE_CACHE.get(node.name)
    if c is not None and c[0] is node:
        return c[1], c[2], c[3]
    free = 0
    ids = []
    for g in node.gpus:
        if g.is_free:
            free += 1
        elif g.exclusive_job is not None and g.exclusive_job not in ids:
            ids.append(g.exclusive_job)
    if len(_NODE_CACHE) > 100_000:
        _NODE_CACHE.clear()
    avail = node.available
    _NODE_CACHE[node.name] = (node, free, tuple(ids), avail)
    return free, tuple(ids), avail


def gpus_by_node(job: Job) -> dict[str, int]:
    """Node name -> how many of the job's GPUs it holds there."""
    out: dict[str, int] = {}
    for u in job.uses:
        out[u.node] = out.get(u.node, 0) + 1
    return out


# the node views of the last call: (node views tuple, GPUs per node, the most GPUs of one model:
# the most one job can hold, free GPUs per available node, how many of them have a free GPU); a
# new tuple is compared with the last one at the positions whose view changed (``ViewChanges``:
# the simulator hands in the same view object for a node that did not change)
_NODES: list = [None, 8, 0, {}, 0]
_CHANGES = ViewChanges()


def _nodes_state(cluster: Cluster) -> list:
    c = _NODES
    nodes = cluster.nodes
    old = c[0]
    if old is nodes:
        return c
    free = c[3]
    changed = _CHANGES.changed(nodes, cluster.nodes_log, cluster.nodes_version)
    if old is not None and changed is not None and len(old) == len(nodes):
        for i in changed:
            a, b = old[i], nodes[i]
            if a.name != b.name or len(a.gpus) != len(b.gpus):
                break
            f, _, avail = node_facts(b)
            if avail != (a.name in free):
                break       # availability changed: the map's order is rebuilt
            if avail:
                c[4] += (f > 0) - (free[a.name] > 0)
                free[a.name] = f
        else:
            c[0] = nodes
            return c
    out = {}
    for n in nodes:
        f, _, avail = node_facts(n)
        if avail:
            out[n.name] = f
    c[0], c[3], c[4] = nodes, out, sum(1 for f in out.values() if f > 0)
    c[1] = max((len(n.gpus) for n in nodes), default=8)
    c[2] = largest_model_gpus(cluster)     # a job runs on one GPU model
    return c


def geometry(cluster: Cluster) -> tuple[int, int]:
    """(GPUs per node, the most GPUs one job can hold: of one model), computed once per
    node-views tuple."""
    c = _nodes_state(cluster)
    return c[1], c[2]


def any_free(cluster: Cluster) -> bool:
    """Whether an available node has a free GPU (``free_map`` without the copy)."""
    return _nodes_state(cluster)[4] > 0


def free_map(cluster: Cluster) -> dict[str, int]:
    """Free GPUs per available node (a copy: callers plan on it), computed once per
    node-views tuple."""
    return dict(_nodes_state(cluster)[3])
