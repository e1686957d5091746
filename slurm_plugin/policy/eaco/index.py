"""EaCO's candidate index: which nodes offer a kind of request a GPU set, kept between calls.

``Eaco._options`` orders candidate sets by the node-on time a job would add. Every node that
holds a job must be looked at on every call (that time moves with the clock), but empty nodes
differ only in their boot delay and place: of the empty nodes with the same boot delay only
the first in cluster order can come first, and the first free GPU set in the order is taken,
so the others are never tried. ``KindIndex`` keeps, per kind of request, the nodes holding jobs
that offer a candidate (with their parts) and the empty ones by boot delay; a call refreshes
only the nodes whose view is another object than on its last call. ``OfferIndex`` keeps, the
same way, the kinds of GPU that offer shards (the share weights are per kind). Nothing here
decides: the parts are the policy's, computed as on a call without the index.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

from ...model import Gpu, Node
from ..view_changes import ViewChanges


class NodeMemo:
    """Per node, while its view is the same object: whether it takes jobs, the candidate parts
    of each kind of request, what they are built from (``gpus``: the policy's summary of its
    GPUs, the same for every request) and when it goes idle. Candidates depend only on the
    node, the request's shape and class, the settings and the share weight (part of the key);
    reused between calls."""

    __slots__ = ("node", "available", "parts", "gpus", "idle", "kind", "kind_id")

    def __init__(self, node: Node, kinds: dict[tuple, int]) -> None:
        self.node = node
        self.available = node.available
        self.parts: dict[tuple, tuple | None] = {}
        self.gpus: tuple | None = None
        self.idle: tuple[bool, float | None] | None = None
        g0 = node.gpus[0] if node.gpus else None
        same_kind = g0 is not None and all(
            (g.shards_total, g.memory_mib, g.model) == (g0.shards_total, g0.memory_mib, g0.model)
            for g in node.gpus)
        # the GPU every GPU of the node is like (weights are per kind of GPU), else None, and
        # that kind as a small number (``kinds``: the policy's, kept between calls)
        self.kind = g0 if same_kind else None
        self.kind_id = kinds.setdefault(
            (g0.shards_total, g0.memory_mib, g0.model, len(node.gpus)), len(kinds)) \
            if g0 is not None and same_kind else -1


# What ``KindIndex.refresh`` asks the policy of a node (its position and view): its memo, its
# part (None: no candidate) and whether the part may be kept (False: GPUs of several kinds,
# built again on every call).
Refresh = Callable[[int, Node], tuple[NodeMemo, tuple | None, bool]]


class KindIndex:
    """Of one kind of request (``k`` GPUs), by node position: the nodes holding jobs that offer
    a candidate, with memo and part (``busy``); the empty ones that offer one (``idle``), and by
    boot delay their positions in cluster order (``empty``); the node views and share weights
    (per kind of node) they were built from; the nodes rebuilt on every call (``volatile``).
    The busy nodes' candidates ranked by what does not move with the clock: those sharing by
    (summed utilisation, busiest first, position) (``shared``), those alone by (busiest first,
    position) (``alone``); parts are ``(busy, free, shared, util, mem)``."""

    __slots__ = ("changes", "weights", "busy", "idle", "empty", "volatile", "k", "shared",
                 "alone")

    def __init__(self, k: int = 1) -> None:
        self.changes = ViewChanges()
        self.weights: dict[int, int] = {}
        self.busy: dict[int, tuple[NodeMemo, tuple]] = {}
        self.idle: dict[int, tuple[NodeMemo, tuple]] = {}
        self.empty: dict[float | None, list[int]] = {}
        self.volatile: set[int] = set()
        self.k = k
        self.shared: list[tuple[float, int, int]] = []
        self.alone: list[tuple[int, int]] = []

    def refresh(self, nodes: Sequence[Node], weight_of: Callable[[int], int],
                build: Refresh, log=None, version: int | None = None) -> None:
        """Bring the index to ``nodes``: every node again when the cluster's length or a share
        weight (``weight_of``: the job's weight per kind of node now) changed, else only the
        nodes whose view changed (``log``, ``version``: the cluster's node log, as
        ``ViewChanges`` reads it) and the volatile ones."""
        changed: Sequence[int] | None = self.changes.changed(nodes, log, version)
        if changed is None or any(weight_of(k) != w for k, w in self.weights.items()):
            self.weights = {}
            self.busy, self.idle, self.empty = {}, {}, {}
            self.volatile = set()
            self.shared, self.alone = [], []
            changed = range(len(nodes))
        elif self.volatile:
            changed = sorted(set(changed) | self.volatile)
        else:
            changed = sorted(changed)
        for pos in changed:
            node = nodes[pos]
            self._drop(pos)
            m, part, cacheable = build(pos, node)
            if not cacheable:
                self.volatile.add(pos)
            if m.kind_id >= 0:
                self.weights[m.kind_id] = weight_of(m.kind_id)
            if part is None:
                continue
            if part[0]:
                self.busy[pos] = (m, part)
                busy, free, shared = part[0], part[1], part[2]
                if len(free) >= self.k:
                    bisect.insort(self.alone, (-busy, pos))
                if shared and len(shared) + len(free) >= self.k:
                    bisect.insort(self.shared, (part[3], -busy, pos))
            else:
                self.idle[pos] = (m, part)
                bisect.insort(self.empty.setdefault(_delay(m), []), pos)

    def _drop(self, pos: int) -> None:
        entry = self.busy.pop(pos, None)
        if entry is not None:
            busy, free, shared = entry[1][0], entry[1][1], entry[1][2]
            if len(free) >= self.k:
                _remove(self.alone, (-busy, pos))
            if shared and len(shared) + len(free) >= self.k:
                _remove(self.shared, (entry[1][3], -busy, pos))
        self.volatile.discard(pos)
        entry = self.idle.pop(pos, None)
        if entry is not None:
            self.empty[_delay(entry[0])].remove(pos)

    def firsts(self) -> list[tuple[int, NodeMemo, tuple]]:
        """Of the empty nodes, the first of each boot delay: position, memo and part."""
        return [(ps[0], *self.idle[ps[0]]) for ps in self.empty.values() if ps]


class OfferIndex:
    """Of each kind of GPU that offers shards (shards, memory, model, its node's GPU count),
    the first GPU in node order and its node's GPU count, kept between calls: a call looks
    again only at the nodes whose view is another object than on its last call, and lists
    the kinds again only when one of those offers other kinds than before (jobs coming and
    going change views, not kinds)."""

    __slots__ = ("changes", "offers", "kinds")

    def __init__(self) -> None:
        self.changes = ViewChanges()
        self.offers: list[tuple[tuple[tuple, Gpu], ...]] = []   # per node position
        self.kinds: list[tuple[Gpu, int]] = []

    def refresh(self, nodes: Sequence[Node], log=None,
                version: int | None = None) -> list[tuple[Gpu, int]]:
        changed = self.changes.changed(nodes, log, version)
        if changed is None:
            self.offers = [_offers(n) for n in nodes]
            self._list()
            return self.kinds
        moved = False
        for pos in changed:
            got = _offers(nodes[pos])
            if [k for k, _ in got] != [k for k, _ in self.offers[pos]]:
                self.offers[pos] = got
                moved = True
        if moved:
            self._list()
        return self.kinds

    def _list(self) -> None:
        kinds: dict[tuple, tuple[Gpu, int]] = {}
        for node, offers in zip(self.changes.views, self.offers):
            for key, g in offers:
                kinds.setdefault(key, (g, len(node.gpus)))
        self.kinds = list(kinds.values())


def _offers(node: Node) -> tuple[tuple[tuple, Gpu], ...]:
    """The kinds of GPU (shards, memory, model, the node's GPU count) a node offers shards of,
    each with its first GPU."""
    out: dict[tuple, Gpu] = {}
    gpn = len(node.gpus)
    for g in node.gpus:
        if g.shards_total > 0:
            out.setdefault((g.shards_total, g.memory_mib, g.model, gpn), g)
    return tuple(out.items())


def _remove(ranked: list, key: tuple) -> None:
    del ranked[bisect.bisect_left(ranked, key)]


def _delay(m: NodeMemo) -> float | None:
    """An empty node's boot delay (``NodeMemo.idle``, set by the policy when it has a part)."""
    return m.idle[1] if m.idle is not None else None
