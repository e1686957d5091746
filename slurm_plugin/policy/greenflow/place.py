"""GreenFlow's placement: buddy allocation on a node and network packing across nodes.

Buddy allocation (as ElasticFlow): a job of ``n`` GPUs on one node gets an aligned block of the
next power of two (indexes ``k*b .. k*b+n-1`` with ``b >= n`` a power of two and every GPU of the
block free), so small jobs never split the blocks a larger one needs. Among nodes with such a
block the fullest wins (best fit), then the node on the busiest switch. Network packing: a job
over several whole nodes takes free nodes on the fewest switches (one switch if any has
enough), fullest switch first. A node's switch is its ``switch=NAME`` feature (Slurm's
topology.conf); without one every node is on one switch. Given a GPU model, only its nodes are
looked at (a job runs on one model).
"""

from __future__ import annotations

from ...model import Cluster, Node
from ..model_groups import model_key, node_model


def block_size(gpus: int) -> int:
    b = 1
    while b < gpus:
        b *= 2
    return b


def switch_of(node: Node) -> str:
    return next((f[7:] for f in node.features if f.startswith("switch=")), "")


def buddy_block(node: Node, gpus: int) -> tuple[int, ...] | None:
    """The lowest aligned free block for ``gpus`` GPUs on ``node`` (its first ``gpus`` indexes)."""
    return _buddy({g.index for g in node.gpus if g.is_free}, len(node.gpus), gpus)


def _buddy(free, count: int, gpus: int) -> tuple[int, ...] | None:
    size = block_size(gpus)
    if size > count:
        return None
    for start in range(0, count - size + 1, size):
        if all(i in free for i in range(start, start + size)):
            return tuple(range(start, start + gpus))
    return None


class _Row:
    """One node view's facts for placement: whether it takes jobs (it has GPUs and is
    available), its free GPU indexes, its switch, its GPU model (``model_key``), whether it is
    whole (every GPU free), and its buddy blocks per GPU count (worked out when first asked)."""

    __slots__ = ("node", "available", "free", "switch", "model", "gpus", "whole", "blocks")

    def __init__(self, node: Node) -> None:
        self.node = node
        self.available = bool(node.gpus) and node.available
        self.free = frozenset(g.index for g in node.gpus if g.is_free)
        self.switch = switch_of(node)
        self.model = model_key(node_model(node))
        self.gpus = len(node.gpus)
        self.whole = len(self.free) == self.gpus
        self.blocks: dict[int, tuple[int, ...] | None] = {}

    def block(self, gpus: int) -> tuple[int, ...] | None:
        got = self.blocks.get(gpus, False)
        if got is False:
            got = self.blocks[gpus] = _buddy(self.free, self.gpus, gpus)
        return got


# per node position, the row of the view last seen there: node views are frozen and a cluster
# hands a changed node a new view, so a row is good while its view is the same object
_ROWS: list[_Row] = []


def _available(views) -> list[_Row]:
    """The row of each available node with GPUs."""
    rows = _ROWS
    if len(rows) != len(views):
        rows[:] = [_Row(n) for n in views]
    out = []
    for i, n in enumerate(views):
        row = rows[i]
        if row.node is not n:
            row = rows[i] = _Row(n)
        if row.available:
            out.append(row)
    return out


def place(cluster: Cluster, gpus_per_node: int, num_nodes: int, gpu_model: str | None = None
          ) -> tuple[tuple[str, ...], tuple[int, ...]] | None:
    """(nodes, GPU indexes on a single node) for a job now, on nodes of ``gpu_model`` (None:
    any node, and a job over several nodes on nodes of one model), or None when it does not
    fit."""
    nodes = _available(cluster.nodes)
    if gpu_model is not None:
        key = model_key(gpu_model)
        nodes = [r for r in nodes if r.model == key]
    elif num_nodes > 1 and len({r.model for r in nodes}) > 1:
        return _one_model(cluster, gpus_per_node, num_nodes, nodes)
    free_per_switch: dict[str, int] = {}
    for r in nodes:
        free_per_switch[r.switch] = free_per_switch.get(r.switch, 0) + r.whole
    if num_nodes == 1:
        best = None
        for r in nodes:
            if r.gpus < gpus_per_node or len(r.free) < gpus_per_node:
                continue
            block = r.block(gpus_per_node)
            if block is None:
                continue
            key = (len(r.free), free_per_switch[r.switch], r.node.name)
            if best is None or key < best[0]:
                best = (key, r.node.name, block)
        return None if best is None else ((best[1],), best[2])
    whole = [(r.node, r.switch) for r in nodes if r.whole and r.gpus >= gpus_per_node]
    if len(whole) < num_nodes:
        return None
    by_switch: dict[str, list[str]] = {}
    for n, sw in whole:
        by_switch.setdefault(sw, []).append(n.name)
    fitting = [s for s, names in by_switch.items() if len(names) >= num_nodes]
    if fitting:   # one switch: the one with the fewest free nodes that still holds the job
        s = min(fitting, key=lambda s: (len(by_switch[s]), s))
        return tuple(sorted(by_switch[s])[:num_nodes]), ()
    chosen: list[str] = []
    for s in sorted(by_switch, key=lambda s: (-len(by_switch[s]), s)):
        chosen += sorted(by_switch[s])[:num_nodes - len(chosen)]
        if len(chosen) == num_nodes:
            break
    return tuple(chosen), ()


def _one_model(cluster: Cluster, gpus_per_node: int, num_nodes: int,
               rows: list[_Row]) -> tuple[tuple[str, ...], tuple[int, ...]] | None:
    """``place`` over several models: the first model, in node order, that holds the job."""
    for model in dict.fromkeys(r.model for r in rows):
        spot = place(cluster, gpus_per_node, num_nodes, model)
        if spot is not None:
            return spot
    return None
