"""The warm server's snapshot cache (wrapper.snapshot_cache): what a cached decision sees."""

from __future__ import annotations

import pickle
import time
from types import MappingProxyType, SimpleNamespace

import pytest

from slurm_plugin import config
from slurm_plugin.model import (Cluster, Gpu, GpuReading, GpuUse, Job, JobRequest, Node,
                                Placement, Readings, Resident)
from slurm_plugin.holders import attach_jobs
from slurm_plugin.record import replace
from wrapper import snapshot_cache as sc


def _cluster(taken_s: float = 100.0) -> Cluster:
    gpus = tuple(Gpu(node="n1", index=i, gres_type=f"g{i}", shards_total=4) for i in range(2))
    running = Job(job_id="10", state="RUNNING", shards=2, uses=(GpuUse("n1", 0, 2),))
    nodes = attach_jobs((Node(name="n1", gpus=gpus),), [running])
    return Cluster(nodes=nodes, jobs=MappingProxyType({"10": running}), taken_s=taken_s)


def _outcome(share_mode: str = "shard", shards: int = 1, indexes=(0,)) -> SimpleNamespace:
    return SimpleNamespace(
        policy="eaco", placement=Placement(policy="eaco", gpus=1, nodes=("n1",), gpu_indexes=indexes,
                            share_mode=share_mode, shards=shards),
        request=JobRequest(name="j", user="u", gpus=1, app="resnet18"))


def test_a_snapshot_and_readings_survive_the_trip_to_the_server():
    readings = Readings(gpus=MappingProxyType({("n1", 0): GpuReading(
        node="n1", index=0, power_w=120.0, energy_j=1e6, util_pct=40.0, mem_used_mib=1000,
        power_limit_w=300.0, taken_s=5.0, residents=(Resident("10", 2, 40.0, "vgg16"),))}),
        taken_s=5.0)
    cluster, back = pickle.loads(pickle.dumps((_cluster(), readings)))
    assert cluster == _cluster() and back == readings
    assert isinstance(cluster.jobs, MappingProxyType)


@pytest.mark.parametrize("stdout,job_id", [
    ("Submitted batch job 123\n", "123"), ("Submitted batch job 7 on cluster c\n", "7"),
    ("456\n", "456"), ("456;other\n", "456"), ("sbatch: note\nSubmitted batch job 9\n", "9"),
    ("", None), ("Submitted batch job\n", None), ("error\n", None)])
def test_the_job_id_is_read_from_what_sbatch_printed(stdout, job_id):
    assert sc.submitted_job_id(stdout) == job_id


def test_a_placed_shard_job_holds_its_shards_until_the_next_snapshot_shows_it():
    cluster = _cluster()
    job = sc.placed_job(_outcome(shards=1), cluster, "11", 101.0)
    assert job.pending and job.pinned == (("n1", "g0", 1),)
    seen = sc.with_jobs(cluster, [job])
    gpu0 = seen.nodes[0].gpus[0]
    assert gpu0.shards_used == 3 and set(gpu0.shard_jobs) == {"10", "11"}
    assert seen.nodes[0].gpus[1] == cluster.nodes[0].gpus[1]
    assert sc.with_jobs(seen, [job]) is seen            # a job shown already is not added twice


def test_a_placed_whole_gpu_job_holds_the_gpu():
    job = sc.placed_job(_outcome("exclusive", 0, (1,)), _cluster(), "12", 101.0)
    assert job.gpus == 1 and job.pinned == (("n1", "g1", 0),)
    assert sc.with_jobs(_cluster(), [job]).nodes[0].gpus[1].exclusive_job == "12"


def test_the_server_keeps_placed_jobs_until_a_snapshot_taken_after_them():
    shared = sc.Shared()
    shared.take(("cache", "k", 100.0, b"old"))
    shared.take(("placed", "k", 101.0, b"a"))
    shared.take(("placed", "k", 103.0, b"b"))
    shared.take(("placed", "other", 101.0, b"c"))
    shared.take(("call", "k", 101.5, b""))
    shared.take(("cache", "k", 102.0, b"new"))     # read after a, before b
    assert shared.snapshots["k"] == (102.0, b"new")
    assert [p[2] for p in shared.placed] == [b"b", b"c"]
    shared.take(("cache", "k", 99.0, b"older"))    # an older snapshot arriving late is ignored
    assert shared.snapshots["k"] == (102.0, b"new")
    for bad in (None, ("cache",), ("cache", 1, 2.0, b""), ("x", "k", 1.0, b"")):
        shared.take(bad)
    shared.prune(now_s=1000.0, keep_s=900.0)
    assert shared.snapshots == {"k": (102.0, b"new")} and len(shared.placed) == 2
    assert shared.last_call_s == {"k": 101.5}
    shared.prune(now_s=2000.0, keep_s=900.0)
    assert shared.snapshots == {} and shared.placed == [] and shared.last_call_s == {}


def test_messages_are_read_whole_and_garbage_is_refused():
    buffer = bytearray(sc.frame(("placed", "k", 1.0, b"x")) + sc.frame(("cache", "k", 2.0, b"y")))
    tail = buffer[-3:]
    del buffer[-3:]
    assert sc.unframe(buffer) == [("placed", "k", 1.0, b"x")]
    buffer += tail
    assert sc.unframe(buffer) == [("cache", "k", 2.0, b"y")] and buffer == bytearray()
    with pytest.raises(ValueError):
        sc.unframe(bytearray((sc.MAX_MESSAGE_BYTES + 1).to_bytes(4, "big")))


class _Live:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster, self.calls = cluster, []

    def snapshot(self, cfg):
        self.calls.append("snapshot")
        return self.cluster

    def readings(self, cfg, cluster, now_s, carbon=True):
        self.calls.append("readings")
        return Readings(taken_s=now_s)


def _cfg(cache_s: float) -> config.SiteConfig:
    return config.load(environ={"WATTBATCH_WRAPPER_SNAPSHOT_CACHE_S": str(cache_s)})


def test_a_call_decides_on_a_fresh_cached_snapshot_with_the_jobs_placed_since(monkeypatch):
    cfg = _cfg(5)
    key = sc.cache_key(cfg, __import__("os").environ)
    now = time.time()
    shared = sc.Shared()
    shared.take(("cache", key, now - 3.0, pickle.dumps((_cluster(now - 3.0), Readings(), None))))
    placed = sc.placed_job(_outcome(), _cluster(), "11", now - 0.5)
    shared.take(("placed", key, now - 0.5, pickle.dumps(placed)))
    shared.take(("call", key, now - 0.6, b""))
    live, sent = _Live(_cluster()), []
    cache = sc.CachedProviders(shared, live, sent.append)
    cluster = cache.snapshot(cfg)
    assert live.calls == [] and "11" in cluster.jobs
    assert cluster.nodes[0].gpus[0].shards_used == 3
    assert cache.readings(cfg, cluster, now) == Readings()
    cache.submitted(_outcome(indexes=(1,)), "Submitted batch job 12\n")
    assert sent[0][:2] == ("call", key)
    kind, k, _, blob = sent[1]
    assert (kind, k) == ("placed", key) and pickle.loads(blob).pinned == (("n1", "g1", 1),)
    cache.refresh()
    assert live.calls == ["snapshot", "readings"] and sent[2][0] == "cache"
    assert pickle.loads(sent[2][3])[2][:1] == ("eaco",)         # the decision, to make again


@pytest.mark.parametrize("age_s,cache_s,other_key", [(6.0, 5, False), (1.0, 0, False),
                                                      (1.0, 5, True)])
def test_a_stale_or_foreign_or_disabled_cache_is_not_used(age_s, cache_s, other_key):
    cfg = _cfg(cache_s)
    key = "someone else's" if other_key else sc.cache_key(cfg, __import__("os").environ)
    shared = sc.Shared()
    shared.take(("cache", key, time.time() - age_s, pickle.dumps((_cluster(), Readings(), None))))
    shared.take(("call", key, time.time() - 1.0, b""))
    live, sent = _Live(_cluster()), []
    cache = sc.CachedProviders(shared, live, sent.append)
    cache.readings(cfg, cache.snapshot(cfg), time.time())
    assert live.calls == ["snapshot", "readings"]
    cache.refresh()
    assert [m[0] for m in sent] == ([] if cache_s == 0 else ["call"] if other_key  # no burst
                                    else ["call", "cache"])


def test_a_lone_call_reads_slurm_once():
    cfg = _cfg(5)
    key = sc.cache_key(cfg, __import__("os").environ)
    shared = sc.Shared()
    shared.take(("call", key, time.time() - 60.0, b""))      # the previous call, long ago
    live, sent = _Live(_cluster()), []
    cache = sc.CachedProviders(shared, live, sent.append)
    cache.snapshot(cfg)
    cache.refresh()
    assert live.calls == ["snapshot"] and [m[0] for m in sent] == ["call"]
    shared.take(sent[0])
    follower = sc.CachedProviders(shared, live, sent.append)
    follower.snapshot(cfg)
    follower.refresh()                                      # a burst has begun
    assert sent[-1][0] == "cache"


def test_the_key_follows_the_site_config_and_slurm_conf():
    a = sc.cache_key(_cfg(5), {"SLURM_CONF": "/a"})
    assert a == sc.cache_key(_cfg(5), {"SLURM_CONF": "/a"})
    assert a != sc.cache_key(_cfg(5), {"SLURM_CONF": "/b"})
    assert a != sc.cache_key(_cfg(4), {"SLURM_CONF": "/a"})


def test_readings_asked_before_the_snapshot_come_from_the_cache_too():
    """The wrapper fetches both at once, in threads: either may ask first."""
    cfg = _cfg(5)
    key = sc.cache_key(cfg, __import__("os").environ)
    shared = sc.Shared()
    shared.take(("cache", key, time.time() - 1.0, pickle.dumps((_cluster(), Readings(), None))))
    live = _Live(_cluster())
    cache = sc.CachedProviders(shared, live, [].append)
    assert cache.readings(cfg, None, time.time()) == Readings()
    assert cache.snapshot(cfg) == _cluster() and live.calls == []


def test_the_server_makes_the_last_decision_again_to_warm_the_policy(tmp_path):
    """EaCO's shard weights of a GPU kind are computed once per process: made in the server,
    every forked call finds them."""
    from slurm_plugin.policy.eaco import shards as eaco_shards
    cfg = _cfg(5)
    from slurm_plugin.config import policy_settings
    request = JobRequest(name="j", user="u", gpus=1, app="resnet18", allow_share=True)
    gpus = tuple(Gpu(node="n1", index=i, gres_type=f"g{i}", shards_total=12,
                     memory_mib=40960) for i in range(4))
    cluster = Cluster(nodes=(Node(name="n1", gpus=gpus),))
    replay = ("eaco", dict(policy_settings(cfg, "eaco")), request, str(tmp_path))
    eaco_shards._weights.cache_clear()
    sc.warm(pickle.dumps((cluster, Readings(), replay)))
    assert eaco_shards._weights.cache_info().currsize == 1
    sc.warm(pickle.dumps((cluster, Readings(), None)))        # nothing to make again
    shared = sc.Shared()
    assert shared.warm_due("k", 100.0) and not shared.warm_due("k", 130.0)
    assert shared.warm_due("k", 161.0) and shared.warm_due("other", 161.0)


def test_a_burst_reads_slurm_again_only_once_its_snapshot_is_half_the_window_old():
    cfg = _cfg(5)
    key = sc.cache_key(cfg, __import__("os").environ)
    for age_s, refreshed in ((1.0, False), (3.0, True)):
        shared = sc.Shared()
        shared.take(("call", key, time.time() - 0.5, b""))
        shared.take(("cache", key, time.time() - age_s,
                     pickle.dumps((_cluster(), Readings(), None))))
        live, sent = _Live(_cluster()), []
        cache = sc.CachedProviders(shared, live, sent.append)
        cache.snapshot(cfg)
        cache.refresh()
        assert (live.calls == ["snapshot", "readings"]) is refreshed


def test_a_call_that_decided_from_the_view_has_the_server_keep_it_not_a_copy(tmp_path):
    """With a cluster view the server keeps the view decoded (``keep_view``): a call sends its
    path and its decision, never a snapshot to cache, and reads nothing again."""
    cfg = _cfg(5)
    key = sc.cache_key(cfg, __import__("os").environ)
    shared = sc.Shared()
    shared.take(("call", key, time.time() - 0.5, b""))      # in a burst
    live, sent = _Live(replace(_cluster(), source="view /v/cluster.json")), []
    cache = sc.CachedProviders(shared, live, sent.append)
    cache.snapshot(cfg)
    cache.decided(_outcome())                               # a dry run's decision counts too
    cache.refresh()
    assert live.calls == ["snapshot"] and [m[0] for m in sent] == ["call", "view"]
    path, replay = pickle.loads(sent[1][3])
    assert path == "/v/cluster.json" and replay[0] == "eaco"
    shared.take(sent[1])
    assert shared.views[key][1] == sent[1][3]
    shared.prune(time.time() + 2 * 3600, 3600)
    assert shared.views == {}
    off = config.load(environ={"WATTBATCH_VIEW_KEEP_IN_SERVER": "false"})
    sent = []
    cache = sc.CachedProviders(sc.Shared(), live, sent.append)
    cache.snapshot(off)
    cache.refresh()
    assert [m[0] for m in sent if m[0] != "call"] == []      # the site keeps none


def test_the_server_keeps_the_view_and_decides_on_it_once_per_policy(tmp_path, monkeypatch):
    from slurm_plugin import cluster_view
    from slurm_plugin.config import policy_settings
    from slurm_plugin.policy import registry
    cfg = _cfg(5)
    folder = tmp_path / "view"
    folder.mkdir(mode=0o755)
    path = str(folder / "cluster.json")
    cluster_view.publish(path, {"cluster.name": "c", "view.hide_job_owners": False},
                         replace(_cluster(), taken_s=time.time()), None)
    decided = []
    monkeypatch.setattr(sc, "decide_again", lambda c, r, replay: decided.append((c, replay)))
    request = JobRequest(name="j", user="u", gpus=1, app="resnet18", allow_share=True)
    replay = ("eaco", dict(policy_settings(cfg, "eaco")), request, str(tmp_path))
    for _ in range(2):
        sc.keep_view(pickle.dumps((path, replay)))
    assert len(decided) == 1 and decided[0][0] is cluster_view.kept(path)[0]
    sc.keep_view(pickle.dumps((path, ("pal",) + replay[1:])))
    assert [r[0] for _, r in decided] == ["eaco", "pal"]
    cluster_view.publish(path, {"cluster.name": "c", "view.hide_job_owners": False},
                         replace(_cluster(), taken_s=time.time()), None)   # the next pass
    sc.keep_view(pickle.dumps((path, replay)))
    assert len(decided) == 3 and decided[2][0] is cluster_view.kept(path)[0]
    assert registry.kept_policy("eaco") is registry.kept_policy("eaco")


def test_pending_jobs_added_keep_the_count():
    cluster = replace(_cluster(), pending_count=0)
    job = sc.placed_job(_outcome(shards=1), cluster, "11", 101.0)
    assert sc.with_jobs(cluster, [job]).pending_count == 1
    assert sc.with_jobs(_cluster(), [job]).pending_count is None     # not counted before


def test_a_server_keeps_its_sites_view_from_the_start(tmp_path, monkeypatch):
    from slurm_plugin import cluster_view
    from wrapper import server
    folder = tmp_path / "view"
    folder.mkdir(mode=0o755)
    path = str(folder / "cluster.json")
    cluster_view.publish(path, {"cluster.name": "c", "view.hide_job_owners": False},
                         replace(_cluster(), taken_s=time.time(), name="at start"), None)
    monkeypatch.setenv("WATTBATCH_VIEW_PATH", path)
    shared = sc.Shared()
    server._keep_site_view(shared)
    assert cluster_view.kept(path)[0].name == "at start" and list(shared.views) == [""]
    monkeypatch.setenv("WATTBATCH_VIEW_KEEP_IN_SERVER", "false")
    shared = sc.Shared()
    server._keep_site_view(shared)
    assert shared.views == {}
