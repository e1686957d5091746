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

from collections.abc import Callable, Sequence
from typing import Any

from ..model import Cluster

MAX_LOG_STEPS = 8   # more versions than this since the last look: comparing every view is cheaper


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
        if not 0 < steps <= MAX_LOG_STEPS:
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


def refreshed(entry: list, make: Callable[[int], Any]) -> dict[int, Any]:
    """A per-position cache ``entry`` (``[value by position, stale positions]``) brought up to
    date: each stale position's value made again (``make(pos)``; None: none there)."""
    got, stale = entry
    for pos in stale:
        value = make(pos)
        if value is None:
            got.pop(pos, None)
        else:
            got[pos] = value
    stale.clear()
    return got
