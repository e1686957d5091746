"""Which node positions hold another view than at a cache's last look.

Policies keep work per node view between calls: a frozen view is the same object while its
node is unchanged (the simulator hands in the same objects). ``ViewChanges`` tells a cache
which positions to look at again: from ``Cluster.nodes_log`` when the caller keeps one (the
names of the nodes whose view each version changed: a pass reads only those), else by
comparing every position's view with the one seen last. Either way the answer is the
positions whose view is another object than at the last call, so a cache built on it holds
what one built afresh would.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence
from typing import Any

from ..model import Cluster

# more versions than this since the last look, or than one per LOG_STEPS_PER_NODE nodes:
# comparing every view is cheaper than reading the log
MAX_LOG_STEPS = 8
LOG_STEPS_PER_NODE = 64


class ViewChanges:
    """One cache's last look at the node views: the views, the log and version they were read
    at, and each node's position by name."""

    __slots__ = ("views", "nodes", "log", "version", "position")

    def __init__(self) -> None:
        self.views: list = []
        self.nodes: Sequence | None = None  # the views sequence last seen
        self.log = None
        self.version: int | None = None
        self.position: dict[str, int] = {}

    def changed(self, nodes: Sequence, log=None, version: int | None = None
                ) -> list[int] | None:
        """The positions whose view is another object than at the last call (the views now
        kept instead), or None when every position is new (the first call, another node
        count). ``log`` and ``version``: the cluster's ``nodes_log`` and ``nodes_version``
        (``changed_in``)."""
        if self.nodes is None or len(nodes) != len(self.views):
            self.views = list(nodes)
            self.position = {n.name: i for i, n in enumerate(nodes)}
            got = None
        else:
            got = self._logged(nodes, log, version)
            if got is None:
                got = [i for i, (a, b) in enumerate(zip(self.views, nodes)) if a is not b]
            for i in got:
                self.views[i] = nodes[i]
        self.nodes, self.log, self.version = nodes, log, version
        return got

    def changed_in(self, cluster: Cluster) -> list[int] | None:
        """``changed`` of a cluster's node views."""
        return self.changed(cluster.nodes, cluster.nodes_log, cluster.nodes_version)

    def _logged(self, nodes: Sequence, log, now: int | None) -> list[int] | None:
        """The changed positions read from the log, or None where it cannot tell them: no log,
        another one than last time, or versions missing from it."""
        last = self.version
        if log is None or log is not self.log or now is None or last is None:
            return None
        steps = now - last
        if steps == 0:
            return [] if nodes is self.nodes else None
        if not 0 < steps <= max(MAX_LOG_STEPS, len(nodes) // LOG_STEPS_PER_NODE):
            return None
        if steps == 1:
            names = log.get(now)
            if names is None:
                return None
        else:
            names = set()
            for v in range(last + 1, now + 1):
                logged = log.get(v)
                if logged is None:
                    return None
                names.update(logged)
        views, position = self.views, self.position
        out = []
        for name in names:
            i = position.get(name)
            if i is None or nodes[i].name != name:
                return None
            if nodes[i] is not views[i]:
                out.append(i)
        return out


class PositionCache:
    """A value per node position (None: none there), made again (``refresh``) at the positions
    marked ``stale`` since, with the least value under ``key`` (within a ``group``) found
    without looking at every position: a heap of (key, position, value) per group, where an
    entry whose position holds another value by now is dropped when it comes to the top, and
    the heaps are made anew once they hold mostly such entries. ``key`` should tell positions
    apart (include the position); a heap never compares two values."""

    __slots__ = ("values", "stale", "key", "group", "heaps", "entries", "made")

    def __init__(self, positions: int, key: Callable[[Any], Any] | None = None,
                 group: Callable[[Any], Any] | None = None) -> None:
        self.values: dict[int, Any] = {}
        self.stale: set[int] = set(range(positions))
        self.key, self.group = key, group
        self.heaps: dict[Any, list] = {}
        self.entries = 0
        self.made = itertools.count()     # ties of keys: a heap never compares two values

    def refresh(self, make: Callable[[int], Any]) -> dict[int, Any]:
        """Each stale position's value made again (``make(pos)``); the values by position."""
        values, key = self.values, self.key
        for pos in self.stale:
            value = make(pos)
            if value is None:
                values.pop(pos, None)
                continue
            values[pos] = value
            if key is not None:
                g = self.group(value) if self.group is not None else None
                heap = self.heaps.get(g)
                if heap is None:
                    heap = self.heaps[g] = []
                heapq.heappush(heap, (key(value), next(self.made), pos, value))
                self.entries += 1
        self.stale.clear()
        if key is not None and self.entries > 2 * len(values) + 64:
            self._rebuild()
        return values

    def least(self, group: Any = None) -> Any:
        """The value of least key (in ``group``), or None where there is none."""
        heap = self.heaps.get(group)
        if not heap:
            return None
        values = self.values
        while heap:
            _, _, pos, value = heap[0]
            if values.get(pos) is value:
                return value
            heapq.heappop(heap)
            self.entries -= 1
        return None

    def groups(self) -> list:
        return list(self.heaps)

    def _rebuild(self) -> None:
        key, group = self.key, self.group
        heaps: dict[Any, list] = {}
        made = self.made
        for pos, value in self.values.items():
            heaps.setdefault(group(value) if group is not None else None, []).append(
                (key(value), next(made), pos, value))
        for heap in heaps.values():
            heapq.heapify(heap)
        self.heaps, self.entries = heaps, len(self.values)


class NodePicks:
    """Per node, a pick among its GPUs (``pick(node, position)``: a value whose first items
    rank it, or None), kept per ``key`` (what the pick depends on besides the node view)
    between calls and made again only where a node's view changed; the least pick over every
    node found without looking at each (``PositionCache``)."""

    __slots__ = ("changes", "caches")

    def __init__(self) -> None:
        self.changes = ViewChanges()
        self.caches: dict[Any, PositionCache] = {}

    def cache(self, cluster: Cluster, key: Any, pick: Callable[[Any, int], Any],
              rank: Callable[[Any], Any]) -> PositionCache:
        """The picks of ``key`` brought up to date with ``cluster``'s node views."""
        nodes = cluster.nodes
        changed = self.changes.changed_in(cluster)
        if changed is None:
            self.caches = {}
        elif changed:
            for cache in self.caches.values():
                cache.stale.update(changed)
        cache = self.caches.get(key)
        if cache is None:
            cache = self.caches[key] = PositionCache(len(nodes), rank)
        cache.refresh(lambda pos: pick(nodes[pos], pos))
        return cache

    def least(self, cluster: Cluster, key: Any, pick: Callable[[Any, int], Any],
              rank: Callable[[Any], Any]) -> Any:
        """The least pick of ``key`` over every node."""
        return self.cache(cluster, key, pick, rank).least()
