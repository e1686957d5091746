"""``ViewChanges``: the node positions whose view changed, from the node log or by comparing
every view; and the caches built on it decide as without the log."""

from __future__ import annotations

import random
from types import MappingProxyType

from slurm_plugin.model import Cluster, Gpu, Node, Readings
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.base import Context
from slurm_plugin.policy.view_changes import MAX_LOG_STEPS, ViewChanges


def _node(i: int, busy: bool = False) -> Node:
    return Node(f"n{i}", "mixed" if busy else "idle",
                tuple(Gpu(f"n{i}", k, exclusive_job="x" if busy and k == 0 else None)
                      for k in range(4)))


def test_logged_changes_are_the_views_that_differ():
    rng = random.Random(5)
    nodes = [_node(i) for i in range(10)]
    log: dict[int, tuple[str, ...]] = {}
    logged, scanned = ViewChanges(), ViewChanges()
    assert logged.changed(tuple(nodes), MappingProxyType(log), 0) is None   # all new
    scanned.changed(tuple(nodes))
    view, version = MappingProxyType(log), 0
    for _ in range(300):
        for _ in range(rng.randint(1, MAX_LOG_STEPS + 2)):   # past the log's reach too
            picked = rng.sample(range(10), rng.randint(0, 3))
            for i in picked:
                nodes[i] = _node(i, rng.random() < 0.5)
            version += 1
            log[version] = tuple(f"n{i}" for i in picked)
        now = tuple(nodes)
        got = logged.changed(now, view, version if rng.random() < 0.9 else None)
        assert sorted(got) == scanned.changed(now)
        assert logged.views == list(now)


def test_a_version_missing_from_the_log_or_another_log_compares_every_view():
    nodes = tuple(_node(i) for i in range(4))
    vc = ViewChanges()
    vc.changed(nodes, MappingProxyType({1: ("n0",)}), 1)
    moved = (nodes[0], _node(1, True), nodes[2], nodes[3])
    assert vc.changed(moved, MappingProxyType({1: ("n0",)}), 3) == [1]     # 2, 3 missing
    assert vc.changed(moved, MappingProxyType({}), 3) == []                 # another log
    assert vc.changed(moved[:3]) is None                                    # another count


def _contexts(seed: int, with_log: bool):
    """Snapshots where a few node views change at a time, with or without the node log."""
    rng = random.Random(seed)
    nodes = [_node(i, rng.random() < 0.5) for i in range(8)]
    log: dict[int, tuple[str, ...]] = {}
    view = MappingProxyType(log)
    forecast = tuple((3600.0 * h, 100.0 + 10 * (h % 5)) for h in range(1, 48))
    for step in range(40):
        picked = rng.sample(range(8), rng.randint(0, 2))
        for i in picked:
            nodes[i] = _node(i, rng.random() < 0.5)
        log[step + 1] = tuple(f"n{i}" for i in picked)
        cluster = Cluster(nodes=tuple(nodes), pending_count=0,
                          nodes_version=step + 1 if with_log else None,
                          nodes_log=view if with_log else None)
        yield Context(cluster=cluster, now_s=60.0 * step, settings={"allow_share": True},
                      readings=Readings(carbon_g_per_kwh=200.0, carbon_forecast=forecast,
                                        cluster_power_w=1e4))


def test_the_stack_advises_the_same_with_and_without_the_node_log():
    """A kept stack reading the node log against a fresh one per call without it."""
    from slurm_plugin.model import JobRequest
    for seed in range(6):
        req = JobRequest(gpus=1 + seed % 2, app="resnet18", time_limit_s=3600.0)
        kept = get_policy("pal+eaco+greenflow+elastic")
        logged = [kept.advise(req, ctx) for ctx in _contexts(seed, True)]
        assert logged == [get_policy("pal+eaco+greenflow+elastic").advise(req, ctx)
                          for ctx in _contexts(seed, False)]


def test_on_a_large_cluster_the_log_reaches_further_back_and_still_tells_true():
    """Past MAX_LOG_STEPS versions, one per LOG_STEPS_PER_NODE nodes is read from the log (a
    large cluster changes many views between two looks); the answer is the scan's."""
    from slurm_plugin.policy.view_changes import LOG_STEPS_PER_NODE
    rng = random.Random(9)
    count = 40 * LOG_STEPS_PER_NODE
    nodes = [_node(i) for i in range(count)]
    log: dict[int, tuple[str, ...]] = {}
    logged, scanned = ViewChanges(), ViewChanges()
    logged.changed(tuple(nodes), MappingProxyType(log), 0)
    scanned.changed(tuple(nodes))
    version = 0
    for _ in range(20):
        for _ in range(rng.randint(1, 50)):     # up to 50 steps: read from the log (<= 40)
            picked = rng.sample(range(count), 2)   # or compared (> 40)
            for i in picked:
                nodes[i] = _node(i, rng.random() < 0.5)
            version += 1
            log[version] = tuple(f"n{i}" for i in picked)
        now = tuple(nodes)
        assert sorted(logged.changed(now, MappingProxyType(log), version)) == \
            scanned.changed(now)


def _full(i: int, free: int) -> Node:
    return Node(f"n{i}", "mixed", tuple(Gpu(f"n{i}", k, exclusive_job=None if k < free
                                            else f"j{i}") for k in range(4)))


def test_free_gpus_and_the_elastic_tracker_follow_the_log_as_a_scan():
    """``any_free`` and ``free_map`` kept on the log, and the elastic tracker's changed nodes,
    against a scan of every node, on a cluster that fills up and empties."""
    from slurm_plugin.policy.elastic.track import Tracker
    from slurm_plugin.policy.free_gpus import any_free, free_map, node_facts
    rng = random.Random(4)
    nodes = [_full(i, 0) for i in range(6)]
    log: dict[int, tuple[str, ...]] = {}
    tracker, last, seen = Tracker(), None, set()
    for version in range(1, 200):
        picked = rng.sample(range(6), rng.randint(0, 2))
        for i in picked:
            nodes[i] = _full(i, rng.choice([0, 0, 0, 1, 4]))
        log[version] = tuple(f"n{i}" for i in picked)
        cluster = Cluster(nodes=tuple(nodes), nodes_version=version,
                          nodes_log=MappingProxyType(log))
        scan = {n.name: node_facts(n)[0] for n in cluster.nodes if n.available}
        assert free_map(cluster) == scan
        assert any_free(cluster) == any(scan.values())
        seen.add(any_free(cluster))
        got = tracker._changed(cluster)
        if last is not None:
            assert [n.name for n in got] == [n.name for n, o in zip(cluster.nodes, last)
                                             if n is not o]
        last = cluster.nodes
    assert seen == {True, False}
