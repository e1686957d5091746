"""GreenFlow's placement: buddy allocation on a node and network packing across nodes.

Buddy allocation (as ElasticFlow): a job of ``n`` GPUs on one node gets an aligned block of the
next power of two (indexes ``k*b .. k*b+n-1`` with ``b >= n`` a power of two and every GPU of the
block free), so small jobs never split the blocks a larger one needs. Among nodes with such a
block the fullest wins (best fit), then the node on the busiest switch. Network packing: a job
over several whole nodes takes free nodes on the fewest switches (one switch if any has
enough), fullest switch first. A node's switch is its ``switch=NAME`` feature (Slurm's
topology.conf); without one every node is on one switch.
"""

from __future__ import annotations

from ...model import Cluster, Node


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


# id(node view) -> (the view, its free GPU indexes, its switch): node views are frozen and a
# cluster hands a changed node a new view, so a row is good while its view is the same object
_ROWS: dict[int, tuple[Node, frozenset[int], str]] = {}


def _available(views) -> list[tuple[Node, frozenset[int], str]]:
    """Each available node with GPUs once: (node, its free GPU indexes, its switch)."""
    global _ROWS
    old, rows, out = _ROWS, {}, []
    for n in views:
        row = old.get(id(n))
        if row is None or row[0] is not n:
            row = (n, frozenset(g.index for g in n.gpus if g.is_free), switch_of(n))
        rows[id(n)] = row
        if n.gpus and n.available:
            out.append(row)
    _ROWS = rows
    return out


def place(cluster: Cluster, gpus_per_node: int, num_nodes: int) -> tuple[tuple[str, ...],
                                                                        tuple[int, ...]] | None:
    """(nodes, GPU indexes on a single node) for a job now, or None when it does not fit."""
    nodes = _available(cluster.nodes)
    free_per_switch: dict[str, int] = {}
    for n, free, sw in nodes:
        free_per_switch[sw] = free_per_switch.get(sw, 0) + (len(free) == len(n.gpus))
    if num_nodes == 1:
        best = None
        for n, free, sw in nodes:
            if len(n.gpus) < gpus_per_node or len(free) < gpus_per_node:
                continue
            block = _buddy(free, len(n.gpus), gpus_per_node)
            if block is None:
                continue
            key = (len(free), free_per_switch[sw], n.name)
            if best is None or key < best[0]:
                best = (key, n.name, block)
        return None if best is None else ((best[1],), best[2])
    whole = [(n, sw) for n, free, sw in nodes
             if len(free) == len(n.gpus) and len(n.gpus) >= gpus_per_node]
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
