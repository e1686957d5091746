"""EaCO advise: invariants over many random cluster shapes, and history over physics."""

from __future__ import annotations

import dataclasses
import random
import tomllib
from types import MappingProxyType

import pytest
import test_eaco_shapes as shapes

from slurm_plugin.model import Cluster, Gpu, GpuReading, JobRequest, Node, Readings
from slurm_plugin.physics import job_class
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.base import Context
from slurm_plugin.policy.eaco.decide import QUEUE_DEPTH, Eaco
from slurm_plugin.policy.eaco.predict import group_slowdowns
from slurm_plugin.record import fields
from slurm_plugin.policy.eaco.settings import EacoSettings
from slurm_plugin.policy.eaco.shards import memory_cap_mib, share_weights
from slurm_plugin.resources import site_dir

SHAPES = 300


def _check(request: JobRequest, ctx, pl) -> None:
    s = EacoSettings.from_mapping(ctx.settings)
    may_share = (request.allow_share is not False and "share" not in request.opt_out
                 and (request.allow_share or s.allow_share))
    if pl.share_mode == "exclusive":
        return
    assert may_share, pl.why
    assert pl.share_mode == s.share_gres
    assert request.num_nodes == 1 and pl.gpus == request.gpus
    assert pl.shards >= 1 and pl.gpu_memory_cap_mib
    need = request.memory_per_gpu_mib or job_class(request.app).memory_mib
    assert need <= pl.gpu_memory_cap_mib
    if not pl.gpu_indexes:              # shards on whichever GPU Slurm finds first
        assert request.gpus == 1 and request.deadline_s is None and not pl.nodes
        return
    assert len(pl.nodes) == 1 and len(set(pl.gpu_indexes)) == request.gpus
    node = ctx.cluster.node(pl.nodes[0])
    assert node.available
    jobs = ctx.cluster.jobs
    for i in pl.gpu_indexes:
        g = node.gpus[i]
        assert g.exclusive_job is None                               # never an exclusive GPU
        assert len(g.shard_jobs) + 1 <= s.max_jobs_per_gpu           # never over the job count
        assert g.shards_used + pl.shards <= g.shards_total
        apps = [jobs[j].app for j in g.shard_jobs]
        mem = sum(job_class(a).memory_mib for a in apps) + need
        assert mem <= g.memory_mib * s.mem_threshold_pct / 100      # never over memory
        util = sum(job_class(a).util_at(1) for a in apps) + job_class(request.app).util_at(pl.gpus)
        assert util <= s.util_threshold_pct + 1e-9
        slow, _ = group_slowdowns(apps + [request.app], ctx.history)
        assert max(slow) <= s.max_slowdown + 1e-9
    p = pl.predicted
    if "slowdown" in p and p.get("resident_slowdown_max") is not None:
        assert p["slowdown"] <= s.max_slowdown and p["resident_slowdown_max"] <= s.max_slowdown
        assert p["cost"] < 1
    if "finish_s" in p and "deadline_s" in p:                      # deadlines by the numbers
        assert p["finish_s"] <= p["deadline_s"]
    if "resident_slack_s" in p:
        assert p["resident_slack_s"] >= 0


def test_invariants_over_cluster_shapes() -> None:
    modes = {"pinned": 0, "unpinned": 0, "exclusive": 0}
    for seed in range(SHAPES):
        rng = random.Random(seed)
        cluster = shapes.random_cluster(rng)
        request = shapes.random_request(rng)
        ctx = shapes.context(cluster, shapes.random_settings(rng))
        policy = Eaco()
        pl = policy.advise(request, ctx)
        try:
            _check(request, ctx, pl)
        except AssertionError:
            pytest.fail(f"seed {seed}: {request} -> {pl}")
        assert policy.advise(request, ctx) == pl, seed             # deterministic
        assert pl.why and pl.why[0].startswith("eaco: ")
        modes["exclusive" if pl.share_mode == "exclusive" else
              "pinned" if pl.gpu_indexes else "unpinned"] += 1
    # the invariants must not hold only because nothing is ever shared
    assert all(n >= 5 for n in modes.values()), modes


def test_opted_out_or_site_off_never_shares() -> None:
    cluster = shapes.one_gpu({"1": "resnet18"})
    base = JobRequest(gpus=1, app="alexnet", submit_s=shapes.NOW, time_limit_s=600)
    for req, settings in [(JobRequest(**{**_kw(base), "allow_share": False}), {}),
                          (JobRequest(**{**_kw(base), "opt_out": frozenset({"share"})}), {}),
                          (base, {"allow_share": False})]:
        pl = Eaco().advise(req, shapes.context(cluster, settings))
        assert pl.share_mode == "exclusive" and not pl.gpu_indexes and not pl.nodes
        assert "exclusive" in pl.why[0]
    opted_in = JobRequest(**{**_kw(base), "allow_share": True})
    pl = Eaco().advise(opted_in, shapes.context(cluster, {"allow_share": False}))
    assert pl.gpu_indexes == (0,)


def _kw(req: JobRequest) -> dict:
    return {name: getattr(req, name) for name in fields(req)}


def test_packs_onto_compatible_resident_and_explains() -> None:
    pl = Eaco().advise(JobRequest(gpus=1, app="alexnet", submit_s=shapes.NOW, time_limit_s=600),
                       shapes.context(shapes.one_gpu({"7": "resnet18"})))
    assert (pl.nodes, pl.gpu_indexes, pl.share_mode) == (("a",), (0,), "shard")
    assert "7 (resnet18)" in pl.why[0] and "predicted slowdown" in pl.why[1]
    assert pl.predicted["energy_saving_pct"] > 20 and pl.predicted["slowdown"] < 1.01


def test_history_overrides_physics() -> None:
    req = JobRequest(gpus=1, app="alexnet", submit_s=shapes.NOW, time_limit_s=600)
    cluster = shapes.one_gpu({"7": "resnet18"})
    bad = Eaco().advise(req, shapes.context(cluster, history={"pair:alexnet+resnet18": 1.6}))
    assert bad.gpu_indexes != (0,)                  # physics says 1.004; history said 1.6
    req = JobRequest(gpus=1, app="vgg16", submit_s=shapes.NOW, time_limit_s=600)
    cluster = shapes.one_gpu({"7": "vgg16"})
    assert Eaco().advise(req, shapes.context(cluster)).gpu_indexes != (0,)   # physics: 2.78
    good = Eaco().advise(req, shapes.context(cluster, history={"pair:vgg16+vgg16": 1.02}))
    assert good.gpu_indexes == (0,) and "history" in good.why[1]


def test_deadline_blocks_sharing() -> None:
    cluster = shapes.one_gpu({"7": "vgg16"}, free_gpus=0)    # alexnet next to it: 1.063x

    def ask(deadline_in_s: float):
        req = JobRequest(gpus=1, app="alexnet", submit_s=shapes.NOW, time_limit_s=1000,
                         deadline_s=shapes.NOW + deadline_in_s)
        return Eaco().advise(req, shapes.context(cluster))

    assert ask(1070).gpu_indexes == (0,)
    late = ask(1050)
    assert late.share_mode == "exclusive" and "miss its deadline" in late.why[0]


def test_long_queue_hands_the_gpu_choice_to_slurm() -> None:
    cluster = shapes.one_gpu({"7": "resnet18"})
    jobs = dict(cluster.jobs)
    jobs.update({f"q{i}": cluster.jobs["7"].__class__(job_id=f"q{i}", state="PENDING")
                 for i in range(QUEUE_DEPTH)})
    busy = Cluster(cluster.nodes, MappingProxyType(jobs), shapes.NOW)
    pl = Eaco().advise(JobRequest(gpus=1, app="alexnet", submit_s=shapes.NOW), shapes.context(busy))
    assert pl.share_mode == "shard" and not pl.gpu_indexes and pl.shards >= 1
    pl = Eaco().advise(JobRequest(gpus=1, app="lstm", submit_s=shapes.NOW), shapes.context(busy))
    assert pl.share_mode == "exclusive"           # lstm shares well with no class


def test_shard_weights_make_every_fitting_group_safe() -> None:
    for s in (EacoSettings(), EacoSettings(max_jobs_per_gpu=2), EacoSettings(max_slowdown=1.2)):
        for total in (2, 4, 8, 100):
            w = share_weights(total, 32510, s, {})
            names = sorted(w)
            for a in names:
                assert job_class(a).memory_mib <= memory_cap_mib(32510, w[a], total, s)
            for x in names:          # every pair and triple that fits
                for y in names:
                    for z in [None] + names:
                        group = [x, y] + ([z] if z else [])
                        if sum(w[c] for c in group) <= total:
                            assert len(group) <= s.max_jobs_per_gpu
                            assert max(group_slowdowns(group, {})[0]) <= s.max_slowdown


def _node(name: str, resident: tuple[str, str, float] | None, free: int,
          exclusive: bool = False) -> tuple[Node, dict]:
    """GPU 0 holds ``resident`` (job id, app, seconds it has left) or is free; then ``free``
    free GPUs."""
    jobs, gpus = {}, []
    if resident is not None:
        jid, app, left_s = resident
        jobs[jid] = shapes.running(jid, app, [(name, 0)], shards=0 if exclusive else 1,
                                   time_limit_s=100 + left_s)
        gpus.append(Gpu(name, 0, memory_mib=32510, shards_total=4,
                        shards_used=0 if exclusive else 1,
                        exclusive_job=jid if exclusive else None,
                        shard_jobs=() if exclusive else (jid,)))
    else:
        gpus.append(Gpu(name, 0, memory_mib=32510, shards_total=4))
    gpus += [Gpu(name, i, memory_mib=32510, shards_total=4) for i in range(1, free + 1)]
    return Node(name, "mixed" if resident else "idle", tuple(gpus)), jobs


def _cluster(*nodes: tuple[Node, dict]) -> Cluster:
    jobs = {k: v for _, j in nodes for k, v in j.items()}
    return Cluster(nodes=tuple(n for n, _ in nodes), jobs=MappingProxyType(jobs),
                   taken_s=shapes.NOW)


def _ask(cluster: Cluster, run_s: float = 5000, readings: Readings | None = None):
    ctx = shapes.context(cluster)
    if readings is not None:
        ctx = Context(cluster=ctx.cluster, readings=readings, now_s=ctx.now_s,
                      settings=ctx.settings, history=ctx.history)
    return Eaco().advise(JobRequest(gpus=1, app="alexnet", submit_s=shapes.NOW,
                                    time_limit_s=run_s), ctx)


def test_shares_where_it_adds_no_node_time_before_the_busier_gpu() -> None:
    # node a ends in 1,000 s (its vgg16 is the more utilised partner), node b in 10,000 s
    pl = _ask(_cluster(_node("a", ("va", "vgg16", 1000), 1),
                       _node("b", ("rb", "resnet18", 10_000), 1)))
    assert (pl.nodes, pl.gpu_indexes, pl.share_mode) == (("b",), (0,), "shard")
    # with both nodes outliving the job, the least utilised partner (least slowdown) first
    pl = _ask(_cluster(_node("a", ("va", "vgg16", 9000), 1),
                       _node("b", ("rb", "resnet18", 10_000), 1)))
    assert pl.nodes == ("b",) and pl.predicted["slowdown"] < 1.01


def test_alone_on_a_node_that_stays_on_beats_sharing_on_one_it_would_keep_on() -> None:
    pl = _ask(_cluster(_node("a", ("ra", "resnet18", 1000), 0),
                       _node("b", ("xb", "lstm", 10_000), 1, exclusive=True)))
    assert (pl.nodes, pl.gpu_indexes) == (("b",), (1,))
    assert "alone" in pl.why[0] and pl.predicted["node_extend_s"] == 0
    # the job would outlive every node: the one it extends least
    pl = _ask(_cluster(_node("a", ("ra", "resnet18", 1000), 0),
                       _node("b", ("xb", "lstm", 3000), 1, exclusive=True)), run_s=20_000)
    assert pl.nodes == ("b",) and pl.predicted["node_extend_s"] == pytest.approx(17_000)


def test_empty_powered_node_before_a_suspended_one() -> None:
    cluster = _cluster(_node("a", None, 1), _node("b", None, 1))

    def reading(node: str, i: int, power_w: float) -> GpuReading:
        return GpuReading(node, i, power_w, 0.0, 0.0, 0.0, 250.0, shapes.NOW)
    gpus = {(n, i): reading(n, i, 0.0 if n == "a" else 41.0) for n in "ab" for i in (0, 1)}
    pl = _ask(cluster, readings=Readings(gpus=MappingProxyType(gpus)))
    assert pl.nodes == ("b",) and "alone" in pl.why[0]
    assert _ask(cluster).nodes == ("a",)        # no readings: name order


def test_a_free_gpu_jobs_queued_earlier_take_first_is_not_pinned() -> None:
    """Jobs queued before this one (not yet started) take the free GPUs Slurm's first fit
    gives them, lowest index first, node by node: a pin to one of those would leave the job
    waiting while other GPUs are idle, so the next GPUs are taken; pinned, held or deferred
    jobs and multi-node jobs claim nothing."""
    from slurm_plugin.model import Job
    from slurm_plugin.policy.eaco.decide import claimed_by_queue
    a, b = _node("a", None, 3), _node("b", None, 3)           # 4 free GPUs each

    def queued(*jobs: Job) -> Cluster:
        return Cluster(nodes=(a[0], b[0]), taken_s=shapes.NOW, pending_count=len(jobs),
                       jobs=MappingProxyType({j.job_id: j for j in jobs}))
    early = [Job(job_id=f"q{i}", state="PENDING", gpus=1, submit_s=shapes.NOW - 10 + i)
             for i in range(4)]
    assert claimed_by_queue(queued(*early), shapes.NOW) == {("a", i) for i in range(4)}
    pl = _ask(queued(*early))     # the empty node tried (the first) is claimed: Slurm picks
    assert (pl.nodes, pl.gpu_indexes, pl.share_mode) == ((), (), "shard"), pl.why
    assert "whichever GPU Slurm finds first" in pl.why[0]
    assert "1 with a free GPU a job queued earlier takes first" in pl.why[0]
    # a node that stays on anyway (its job has 10,000 s left) comes first, but the two jobs
    # queued earlier take its two free GPUs: the job goes alone on the empty node instead
    busy_a = _node("a", ("xa", "lstm", 10_000), 2, exclusive=True)
    two = {j.job_id: j for j in early[:2]}
    ask = Cluster(nodes=(busy_a[0], b[0]), taken_s=shapes.NOW, pending_count=2,
                  jobs=MappingProxyType({**busy_a[1], **two}))
    assert claimed_by_queue(ask, shapes.NOW) == {("a", 1), ("a", 2)}
    pl = _ask(ask)
    assert (pl.nodes, pl.gpu_indexes) == (("b",), (3,)), pl.why
    unqueued = Cluster(nodes=ask.nodes, taken_s=shapes.NOW, jobs=MappingProxyType(busy_a[1]))
    assert (_ask(unqueued).nodes, _ask(unqueued).gpu_indexes) == (("a",), (2,))
    assert _ask(queued()).nodes == ("a",)                       # nothing queued: node a
    others = [Job(job_id="p", state="PENDING", gpus=1, submit_s=1.0, pinned=(("a", "g0", 0),)),
              Job(job_id="h", state="PENDING", gpus=1, submit_s=2.0, reason="JobHeldUser"),
              Job(job_id="d", state="PENDING", gpus=1, submit_s=3.0, begin_s=shapes.NOW + 60),
              Job(job_id="m", state="PENDING", gpus=2, num_nodes=2, submit_s=4.0),
              Job(job_id="big", state="PENDING", gpus=4, submit_s=5.0)]
    assert claimed_by_queue(queued(*others), shapes.NOW) == {("a", i) for i in range(4)}
    assert claimed_by_queue(queued(*others[:4]), shapes.NOW) == frozenset()


def test_no_free_gpu_and_no_shards_is_plain_exclusive() -> None:
    cluster = Cluster(nodes=(Node("a", "idle"),), taken_s=shapes.NOW)
    pl = Eaco().advise(JobRequest(gpus=1, app="alexnet", submit_s=shapes.NOW),
                       shapes.context(cluster))
    assert pl.share_mode == "exclusive" and not pl.changes_anything


def test_defaults_match_site_defaults_and_registry() -> None:
    site = tomllib.loads((site_dir() / "defaults.toml").read_text())
    flat = {f"{sec}.{k}": v for sec, body in site.items() for k, v in body.items()}
    # the [eaco] keys plus the site's sharing facts, as the wrapper hands them over
    settings = {**site["eaco"], "allow_share": flat["policy.allow_share"],
                "share_gres": flat["slurm.share_gres"]}
    defaults = EacoSettings()
    for f in dataclasses.fields(EacoSettings):
        if f.name in site["eaco"]:
            want = site["eaco"][f.name]
            assert getattr(defaults, f.name) == (tuple(want) if isinstance(want, list) else want), \
                f.name
    assert EacoSettings.from_mapping(settings).share_gres == flat["slurm.share_gres"]
    assert isinstance(get_policy("eaco"), Eaco)
