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

from operator import itemgetter

from ...model import Cluster, Node
from ..model_groups import model_key, node_model
from ..view_changes import PositionCache, ViewChanges


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
        if free.issuperset(range(start, start + size)):
            return tuple(range(start, start + gpus))
    return None


class _Row:
    """One node view's facts for placement: whether it takes jobs (it has GPUs and is
    available), its free GPU indexes, its switch, its GPU model (``model_key``) and whether it
    is whole (every GPU free)."""

    __slots__ = ("node", "available", "free", "switch", "model", "gpus", "whole")

    def __init__(self, node: Node) -> None:
        gpus = node.gpus
        self.node = node
        self.available = bool(gpus) and node.available
        self.free = frozenset([g.index for g in gpus if g.is_free])
        self.switch = switch_of(node) if node.features else ""
        self.model = model_key(node_model(node))
        self.gpus = len(gpus)
        self.whole = len(self.free) == self.gpus


class _Index:
    """Per node position, the row of the view last seen there (node views are frozen and a
    cluster hands a changed node a new view, so a row is good while its view is the same
    object); how many rows each switch has; and per (GPU count, model key or None: any model)
    asked for, the one-node spots: position -> (free GPUs, node name, position, buddy block)
    of each available node of the model with a free block for the count, made again (when
    next asked for) at the positions whose view changed: a decision reads the same rows and
    spots as when built afresh."""

    __slots__ = ("changes", "rows", "switches", "spots")

    def __init__(self) -> None:
        self.changes = ViewChanges()
        self.rows: list[_Row] = []
        self.switches: dict[str, int] = {}
        # (GPU count, model key) -> the spot of each position, ranked (fullest node first)
        self.spots: dict[tuple[int, str | None], PositionCache] = {}

    def refresh(self, cluster: Cluster) -> None:
        changed = self.changes.changed_in(cluster)
        if changed is None:
            self.rows = [_Row(n) for n in cluster.nodes]
            self.switches, self.spots = {}, {}
            for r in self.rows:
                self.switches[r.switch] = self.switches.get(r.switch, 0) + 1
            return
        rows, nodes = self.rows, cluster.nodes
        for pos in changed:
            old = rows[pos]
            row = rows[pos] = _Row(nodes[pos])
            if row.switch != old.switch:
                self.switches[row.switch] = self.switches.get(row.switch, 0) + 1
                left = self.switches.pop(old.switch) - 1
                if left:
                    self.switches[old.switch] = left
        if changed:
            for entry in self.spots.values():
                entry.stale.update(changed)

    def available(self, key: str | None) -> list[_Row]:
        """The available rows with GPUs, of the model ``key`` (None: any), in node order."""
        return [r for r in self.rows if r.available and (key is None or r.model == key)]

    def spots_for(self, gpus: int, key: str | None) -> PositionCache:
        entry = self.spots.get((gpus, key))
        if entry is None:
            entry = self.spots[(gpus, key)] = PositionCache(len(self.rows), _FULLEST)
        entry.refresh(lambda pos: _spot(self.rows[pos], pos, gpus, key))
        return entry


_FULLEST = itemgetter(0, 1, 2)  # a spot's rank: fewest free GPUs, node name, position


def _spot(row: _Row, pos: int, gpus: int, key: str | None) -> tuple | None:
    """(free GPUs, node name, position, block) of a row a one-node job of ``gpus`` GPUs of
    the model ``key`` may take, or None."""
    if not row.available or (key is not None and row.model != key) or row.gpus < gpus \
            or len(row.free) < gpus:
        return None
    block = _buddy(row.free, row.gpus, gpus)
    return None if block is None else (len(row.free), row.node.name, pos, block)


_INDEX = _Index()


def place(cluster: Cluster, gpus_per_node: int, num_nodes: int, gpu_model: str | None = None
          ) -> tuple[tuple[str, ...], tuple[int, ...]] | None:
    """(nodes, GPU indexes on a single node) for a job now, on nodes of ``gpu_model`` (None:
    any node, and a job over several nodes on nodes of one model), or None when it does not
    fit."""
    index = _INDEX
    index.refresh(cluster)
    key = None if gpu_model is None else model_key(gpu_model)
    if num_nodes == 1:
        ranked = index.spots_for(gpus_per_node, key)
        if not ranked.values:
            return None
        if len(index.switches) <= 1:      # one switch: the fullest node, then node order
            best = ranked.least()
        else:
            free_per_switch = _whole_per_switch(index.available(key))
            rows = index.rows
            best = min(ranked.values.values(),
                       key=lambda e: (e[0], free_per_switch[rows[e[2]].switch], e[1], e[2]))
        return (best[1],), best[3]
    nodes = index.available(key)
    if key is None and len({r.model for r in nodes}) > 1:
        return _one_model(cluster, gpus_per_node, num_nodes, nodes)
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


def _whole_per_switch(rows: list[_Row]) -> dict[str, int]:
    """Per switch, how many of ``rows`` have every GPU free."""
    out: dict[str, int] = {}
    for r in rows:
        out[r.switch] = out.get(r.switch, 0) + r.whole
    return out


def _one_model(cluster: Cluster, gpus_per_node: int, num_nodes: int,
               rows: list[_Row]) -> tuple[tuple[str, ...], tuple[int, ...]] | None:
    """``place`` over several models: the first model, in node order, that holds the job."""
    for model in dict.fromkeys(r.model for r in rows):
        spot = place(cluster, gpus_per_node, num_nodes, model)
        if spot is not None:
            return spot
    return None
