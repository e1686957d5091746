"""The GPU model of each node as policies see it (``Gpu.model`` of its GPUs), for clusters that
mix models: a job runs on GPUs of one model, so a policy that names several nodes for one job
names nodes of one model, and a cap or a memory fit is the model's of the nodes the job gets.

Two names are one model when the catalogue gives them one entry ("V100" and
"Tesla V100-SXM2-32GB"); a name it does not know (a site's GRES type such as ``g0``) is its own
model, compared in the catalogue's spelling.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import TypeVar

from ..errors import ConfigError
from ..model import Cluster, Node
from ..physics.gpu_models import DERIVED_CACHES, lookup, normalise

T = TypeVar("T")


@lru_cache(maxsize=256)
def model_key(model: str) -> str:
    """What a model name is compared by: its catalogue entry, else its normalised name."""
    try:
        return lookup(model).name
    except ConfigError:
        return normalise(model)


DERIVED_CACHES.append(model_key)     # a site's own entries may name more models


def node_model(node: Node) -> str:
    """The model of a node's GPUs as its views name it ("" for a node without GPUs)."""
    return node.gpus[0].model if node.gpus else ""


def cluster_models(cluster: Cluster) -> tuple[str, ...]:
    """The models of the cluster's nodes with GPUs, each once (by ``model_key``, as first
    named), in node order."""
    seen: dict[str, str] = {}
    for name in dict.fromkeys([n.gpus[0].model for n in cluster.nodes if n.gpus]):
        seen.setdefault(model_key(name), name)
    return tuple(seen.values())


def by_model(items: Iterable[T], node_of: Callable[[T], Node]) -> list[list[T]]:
    """``items`` grouped by the model of their node, each group in the items' order, the
    groups in the order of their first item."""
    groups: dict[str, list[T]] = {}
    for item in items:
        groups.setdefault(model_key(node_model(node_of(item))), []).append(item)
    return list(groups.values())


def largest_model_gpus(cluster: Cluster) -> int:
    """The most GPUs of one model: the most one job can hold."""
    per_model: dict[str, int] = {}
    for node in cluster.nodes:
        if node.gpus:
            key = model_key(node.gpus[0].model)
            per_model[key] = per_model.get(key, 0) + len(node.gpus)
    return max(per_model.values(), default=0)
