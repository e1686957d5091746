"""Shards per job class, chosen so that any jobs whose shards fit on one GPU may share it.

Slurm (and the simulator, which honours placements as Slurm does) puts a shard job on the
first GPU with enough free shards. If every class ``c`` asks for ``w(c)`` shards of a GPU's
``T``, the groups that can ever meet on one GPU are exactly the multisets of classes with
``sum(w) <= T``. ``share_weights`` picks the weights that pack the most (least total weight)
such that every such group is within EaCO's limits: at most ``max_jobs_per_gpu`` jobs, summed
solo utilisation under the threshold, every job's predicted slowdown (history, else physics)
under ``max_slowdown``, and the objective better than exclusive GPUs for every member. A job's
GPU memory cap is its weight's share of the memory threshold, so the caps of any group that
fits add up to at most the threshold. A class whose weight would be ``T`` cannot share.

So a job may be handed to Slurm as shards without naming a GPU (when the queue is long, the GPU
is chosen when it starts) and still only meet jobs it was predicted to share well with.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from functools import lru_cache

from ...physics import class_names, node_base_power_w
from .predict import group_key, group_slowdowns, known_class, objective
from .settings import EacoSettings

# Above this many shards per GPU (MPS offers 100), weights are searched in units of
# ceil(total / MAX_SEARCH_SHARDS) shards: the same groups fit, and the search stays fast.
MAX_SEARCH_SHARDS = 8


def memory_cap_mib(gpu_memory_mib: int, weight: int, shards_total: int, s: EacoSettings) -> int:
    """A job's GPU memory cap: its shards' share of the memory threshold."""
    return int(gpu_memory_mib * s.mem_threshold_pct / 100 * weight / shards_total)


def _candidates(total: int, memory_mib: int, s: EacoSettings) -> tuple[str, ...]:
    """Classes that could share at all: under the utilisation threshold, memory within the
    cap of ``total - 1`` shards."""
    out = []
    for name in class_names():
        c = known_class(name)
        if c is None or c.util_at(1) > s.util_threshold_pct:
            continue
        if c.memory_mib <= memory_cap_mib(memory_mib, total - 1, total, s):
            out.append(name)
    return tuple(out)


def _groups(names: Sequence[str], total: int) -> list[tuple[str, ...]]:
    """Multisets of 2..total classes (weights are at least 1)."""
    return [g for k in range(2, total + 1)
            for g in itertools.combinations_with_replacement(names, k)]


@lru_cache(maxsize=64)
def probe_keys(total: int, memory_mib: int, s: EacoSettings) -> tuple[str, ...]:
    """The history keys the weights depend on."""
    names = _candidates(total, memory_mib, s)
    keys = {group_key(g) for g in _groups(names, total)}
    return tuple(sorted(keys))


def _group_ok(group: tuple[str, ...], s: EacoSettings, history: Mapping[str, float],
              static_w: float, model: str) -> bool:
    if len(group) > s.max_jobs_per_gpu:
        return False
    classes = [known_class(a) for a in group]
    if sum(c.util_at(1) for c in classes) > s.util_threshold_pct:  # type: ignore[union-attr]
        return False
    slow, _ = group_slowdowns(group, history, model=model, share_gres=s.share_gres)
    if max(slow) > s.max_slowdown:
        return False
    dyn = [c.dynamic_power_at(1, model) for c in classes]  # type: ignore[union-attr]
    for i in range(len(group)):      # every member, joining the others, must be worth it
        rest = group[:i] + group[i + 1:]
        old, _ = group_slowdowns(rest, history, model=model, share_gres=s.share_gres)
        gain = objective([(dyn[:i] + dyn[i + 1:], old, slow[:i] + slow[i + 1:])], dyn[i],
                         slow[i], static_w, s.alpha, model)
        if gain.cost >= 1.0:
            return False
    return True


def _minimal_bad(names: Sequence[str], total: int, s: EacoSettings,
                 history: Mapping[str, float], static_w: float,
                 model: str) -> list[tuple[str, ...]]:
    """The groups over a limit none of whose smaller groups is: if none of them fits on a
    GPU, no group over a limit fits (a group's subgroups fit whenever it does)."""
    covered: set[tuple[str, ...]] = set()
    bad = []
    for g in _groups(names, total):          # by size, smallest first
        if len(g) > 2 and any(g[:i] + g[i + 1:] in covered for i in range(len(g))):
            covered.add(g)
        elif not _group_ok(g, s, history, static_w, model):
            covered.add(g)
            bad.append(g)
    return bad


@lru_cache(maxsize=64)
def _weights(total: int, memory_mib: int, s: EacoSettings, seen: tuple[tuple[str, float], ...],
             model: str, static_w: float) -> tuple[tuple[str, int], ...]:
    history = dict(seen)
    names = _candidates(total, memory_mib, s)
    least = {}
    for n in names:          # the memory cap sets a floor on each class's weight
        need = known_class(n).memory_mib  # type: ignore[union-attr]
        least[n] = next(w for w in range(1, total + 1)
                        if need <= memory_cap_mib(memory_mib, w, total, s))
    bad = _minimal_bad(names, total, s, history, static_w, model)
    # depth-first over the classes in name order; a bad group is checked as soon as all of its
    # classes have a weight; a class that fits in no group of two costs ``total`` (alone)
    best: list = [None]
    order = {n: i for i, n in enumerate(names)}
    rest = [sum(least[n] for n in names[i:]) for i in range(len(names) + 1)]
    checks = [[g for g in bad if max(order[a] for a in g) == i] for i in range(len(names))]

    def cost(w: dict[str, int]) -> tuple[int, tuple[int, ...]]:
        low = min(w.values())
        ws = tuple(w[n] if w[n] + low <= total else total for n in names)
        return sum(ws), ws

    def walk(i: int, w: dict[str, int]) -> None:
        if i == len(names):
            c = cost(w)
            if best[0] is None or c < best[0]:
                best[0] = c
            return
        n = names[i]
        for weight in range(least[n], total + 1):
            w[n] = weight
            if best[0] is not None and sum(w.values()) + rest[i + 1] > best[0][0]:
                break
            if not any(sum(w[a] for a in g) <= total for g in checks[i]):
                walk(i + 1, w)
        del w[n]

    if names:
        walk(0, {})
    if best[0] is None:
        return ()
    return tuple((n, w) for n, w in zip(names, best[0][1]) if w < total)


def share_weights(total: int, memory_mib: int, s: EacoSettings, history: Mapping[str, float],
                  model: str = "V100", gpus_per_node: int = 8) -> dict[str, int]:
    """Shards per job of every class that can share a GPU of ``total`` shards (absent: it
    cannot share). Cached on the settings and the history figures it depends on."""
    if total < 2:
        return {}
    scale = -(-total // MAX_SEARCH_SHARDS)      # weights in units of ``scale`` shards
    base = total // scale
    seen = tuple((k, float(history[k])) for k in probe_keys(base, memory_mib, s) if k in history)
    static_w = node_base_power_w() / max(1, gpus_per_node)
    return {n: w * scale for n, w in _weights(base, memory_mib, s, seen, model, static_w)}
