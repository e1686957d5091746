"""PAL and packed-sticky: invariants over many cluster shapes, settings errors, the profile."""

from __future__ import annotations

import random
from types import MappingProxyType

import pytest

from slurm_plugin.errors import ConfigError
from slurm_plugin.model import Cluster, Gpu, JobRequest, Node
from slurm_plugin.physics import class_names, job_class
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.base import Context
from slurm_plugin.policy.pal.settings import parse_settings

APPS = class_names()


def _cluster(rng: random.Random, nodes: int, gpn: int, busy: float) -> Cluster:
    out = []
    for i in range(nodes):
        gpus = tuple(Gpu(node=f"n{i}", index=k,
                         exclusive_job=f"j{i}-{k}" if rng.random() < busy else None)
                     for k in range(gpn))
        state = "down" if rng.random() < 0.05 else "mixed"
        out.append(Node(name=f"n{i}", state=state, gpus=gpus))
    return Cluster(nodes=tuple(out))


def _factors(rng: random.Random, cluster: Cluster, share: float = 1.0):
    f = {}
    for n in cluster.nodes:
        for g in n.gpus:
            if rng.random() < share:
                f[(n.name, g.index)] = tuple(rng.choice((0.97, 1.0, 1.0, 1.04, 1.12))
                                             for _ in range(4))
    return MappingProxyType(f)


def _request(rng: random.Random, gpn: int, nodes: int) -> JobRequest:
    n = 1 if rng.random() < 0.8 else rng.randint(2, max(2, nodes))
    per = rng.randint(1, gpn) if n == 1 else gpn
    return JobRequest(gpus=per, num_nodes=n, app=rng.choice(APPS), job_id="x")


SHAPES = [(nodes, gpn, busy) for nodes in (1, 2, 5, 16) for gpn in (1, 4, 8)
          for busy in (0.0, 0.4, 0.9)]


@pytest.mark.parametrize("policy", ["pal", "packed-sticky"])
@pytest.mark.parametrize("nodes,gpn,busy", SHAPES)
def test_placements_respect_free_gpus_and_the_request(policy, nodes, gpn, busy):
    rng = random.Random(f"{policy}{nodes}{gpn}{busy}")
    for trial in range(20):
        cluster = _cluster(rng, nodes, gpn, busy)
        settings = MappingProxyType({"profile_factors": _factors(rng, cluster, 0.7)})
        req = _request(rng, gpn, nodes)
        ctx = Context(cluster=cluster, settings=settings)
        pl = get_policy(policy).advise(req, ctx)
        assert pl.gpus == req.gpus                            # never more (or fewer) GPUs
        if not pl.nodes:
            continue                                          # Slurm places it in its turn
        assert len(pl.nodes) == req.num_nodes == len(set(pl.nodes))
        for name in pl.nodes:
            node = cluster.node(name)
            assert node.available
            assert len(node.free_gpus()) >= req.gpus
        if pl.gpu_indexes:
            assert len(pl.nodes) == 1 and len(pl.gpu_indexes) == req.gpus
            node = cluster.node(pl.nodes[0])
            assert all(node.gpus[i].is_free for i in pl.gpu_indexes)   # never a busy GPU
        # deterministic: the same answer again, and from a fresh policy object
        assert get_policy(policy).advise(req, ctx) == pl
        assert get_policy(policy).advise(req, Context(cluster=cluster, settings=settings)) == pl


def test_pal_takes_the_fastest_free_set_and_says_why():
    gpus = tuple(Gpu(node="n0", index=k) for k in range(4))
    gpus2 = tuple(Gpu(node="n1", index=k) for k in range(4))
    cluster = Cluster(nodes=(Node(name="n0", gpus=gpus), Node(name="n1", gpus=gpus2)))
    slow = {("n0", k): (1.2, 1.2, 1.2, 1.2) for k in range(4)}
    slow[("n1", 2)] = (1.1, 1.0, 1.0, 1.0)
    ctx = Context(cluster=cluster, settings=MappingProxyType({"profile_factors": slow}))
    req = JobRequest(gpus=2, app="resnet18", job_id="1")
    assert job_class("resnet18").variability_class == "A"
    pl = get_policy("pal").advise(req, ctx)
    assert pl.nodes == ("n1",) and pl.gpu_indexes == (0, 1)
    assert "n1:0" in pl.why[0] and "class A" in pl.why[0] and "slowdown 1.000" in pl.why[0]
    assert pl.predicted["slowdown"] == 1.0


def test_gpus_without_a_profile_count_as_median():
    rng = random.Random(7)
    for trial in range(50):
        cluster = _cluster(rng, 4, 4, 0.3)
        partial = _factors(rng, cluster, 0.5)
        full = dict(partial)
        for n in cluster.nodes:
            for g in n.gpus:
                full.setdefault((n.name, g.index), (1.0, 1.0, 1.0, 1.0))
        req = _request(rng, 4, 4)
        a = get_policy("pal").advise(req, Context(cluster=cluster, settings=MappingProxyType(
            {"profile_factors": partial})))
        b = get_policy("pal").advise(req, Context(cluster=cluster, settings=MappingProxyType(
            {"profile_factors": MappingProxyType(full)})))
        assert (a.nodes, a.gpu_indexes, a.predicted.get("slowdown")) == \
            (b.nodes, b.gpu_indexes, b.predicted.get("slowdown"))


def test_pal_reads_the_site_profile_file_keyed_by_node_and_index(tmp_path):
    p = tmp_path / "prof.csv"
    p.write_text("node,gpu_index,uuid,PerfVar_classA,PerfVar_classB,PerfVar_classC,"
                 "PerfVar_classD\nn0,0,u0,1.3,1,1,1\nn0,1,u1,1.0,1,1,1\n")
    cluster = Cluster(nodes=(Node(name="n0", gpus=(Gpu(node="n0", index=0),
                                                   Gpu(node="n0", index=1))),))
    ctx = Context(cluster=cluster, settings=MappingProxyType({"profile": str(p)}))
    pl = get_policy("pal").advise(JobRequest(gpus=1, app="resnet18"), ctx)
    assert pl.gpu_indexes == (1,)
    missing = Context(cluster=cluster, settings=MappingProxyType({"profile": str(tmp_path / "no")}))
    with pytest.raises(ConfigError, match=r"pal: profile = .*cannot read"):
        get_policy("pal").advise(JobRequest(gpus=1, app="resnet18"), missing)


@pytest.mark.parametrize("key,value", [("locality_penalty_a", 0.5), ("locality_penalty_d", "x"),
                                       ("default_class", "Z"), ("order_queue", "yes"),
                                       ("size_tiers", 1), ("slowdown_tolerance", -1),
                                       ("profile", 3), ("tier_age_s", -1),
                                       ("tier_age_s", float("nan"))])
def test_bad_settings_name_pal_the_key_and_the_value(key, value):
    with pytest.raises(ConfigError) as exc:
        parse_settings(MappingProxyType({key: value}))
    assert str(exc.value).startswith(f"config: pal: {key} = {value!r}")


def test_defaults_are_pals_penalties():
    s = parse_settings(MappingProxyType({}))
    assert [s.penalty(c) for c in "ABCD"] == [1.16, 1.0, 1.0, 1.10]


def test_queue_tiers_follow_sensitivity_and_vanish_without_a_profile():
    cluster = Cluster(nodes=(Node(name="n0", gpus=(Gpu(node="n0", index=0),
                                                   Gpu(node="n0", index=1))),))
    f = MappingProxyType({("n0", 0): (1.2, 1.0, 1.0, 1.05), ("n0", 1): (1.0, 1.0, 1.0, 1.0)})
    pal = get_policy("pal")
    tiers = {app: pal.advise(JobRequest(gpus=1, app=app), Context(
        cluster=cluster, settings=MappingProxyType({"profile_factors": f}))).nice
        for app in ("resnet18", "transformer")}
    from slurm_plugin.policy.queue import MAX_TIER, queue_tier
    step = MAX_TIER + 1         # the size tiers within a class's
    assert tiers == {"resnet18": 0, "transformer": 2 * step}  # A most sensitive, then D, B/C
    none = pal.advise(JobRequest(gpus=1, app="transformer"), Context(cluster=cluster))
    assert none.nice == 0
    # within a class, the smaller GPU-time asked first; the class's rank comes first
    ctx = Context(cluster=cluster, settings=MappingProxyType({"profile_factors": f}))
    big = JobRequest(gpus=2, app="transformer", time_limit_s=24 * 3600.0)
    small_a = JobRequest(gpus=1, app="resnet18", time_limit_s=1800.0)
    big_a = JobRequest(gpus=2, app="resnet18", time_limit_s=24 * 3600.0)
    assert pal.advise(big, ctx).nice == 2 * step + queue_tier(2 * 24 * 3600.0) == 2 * step + 6
    assert pal.advise(small_a, ctx).nice == 0 < pal.advise(big_a, ctx).nice == 6 < 2 * step
    off = Context(cluster=cluster, settings=MappingProxyType({"profile_factors": f,
                                                             "size_tiers": False}))
    assert pal.advise(big, off).nice == 2 * step and pal.advise(big_a, off).nice == 0
    neither = Context(cluster=cluster, settings=MappingProxyType(
        {"profile_factors": f, "size_tiers": False, "order_queue": False}))
    assert pal.advise(big, neither).nice is None


def test_reconcile_ages_the_queue_tiers_only_where_a_site_asks_for_it():
    """``tier_age_s`` (off by default): a waiting job moves one tier earlier per that long
    waited, by a resize at its own size, recorded as ``pal:tier:<job>``; a job on shares of a
    GPU (no tier at submission) is never moved; a pass where nothing is due does nothing."""
    from slurm_plugin.model import Job
    from slurm_plugin.policy.queue import MAX_TIER
    now = 100_000.0
    f = MappingProxyType({("n0", 0): (1.2, 1.0, 1.0, 1.05), ("n0", 1): (1.0, 1.0, 1.0, 1.0)})
    nodes = (Node(name="n0", gpus=(Gpu(node="n0", index=0), Gpu(node="n0", index=1))),)
    jobs = {"t": Job(job_id="t", state="PENDING", gpus=2, app="transformer",
                     time_limit_s=24 * 3600.0, submit_s=now - 3 * 900 - 1),      # tier 26 + 6
            "s": Job(job_id="s", state="PENDING", gpus=0, shards=1, app="transformer",
                     time_limit_s=24 * 3600.0, submit_s=now - 9 * 900)}
    cluster = Cluster(nodes=nodes, jobs=jobs, taken_s=now)

    def moves(settings, history=None):
        ctx = Context(cluster=cluster, now_s=now, history=history or {},
                      settings=MappingProxyType({"profile_factors": f, **settings}))
        return get_policy("pal").reconcile(ctx)
    assert moves({}) == ()
    out = moves({"tier_age_s": 900.0})
    tier = 2 * (MAX_TIER + 1) + 6 - 3
    assert [(a.kind, a.job_id, a.gpus, a.nice) for a in out[:-1]] == [("resize", "t", 2, tier)]
    assert out[-1].kind == "observe" and out[-1].predicted == {"pal:tier:t": float(tier)}
    assert moves({"tier_age_s": 900.0}, {"pal:tier:t": float(tier)}) == ()
