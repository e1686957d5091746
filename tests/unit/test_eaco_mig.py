"""EaCO with MIG (``share_modes`` with "mig"): MIG where time-slicing breaks the slowdown limit,
never on a model without MIG, never by default, and the limits over random clusters."""

from __future__ import annotations

import random
from types import MappingProxyType

import pytest
import test_eaco_shapes as shapes

from slurm_plugin.errors import ConfigError
from slurm_plugin.model import Cluster, Gpu, JobRequest, Node
from slurm_plugin.physics import job_class
from slurm_plugin.physics.mig import layout_valid, mig_profile, mig_rate, smallest_profile
from slurm_plugin.policy.eaco.decide import Eaco
from slurm_plugin.policy.eaco.predict import group_slowdowns
from slurm_plugin.policy.eaco.settings import EacoSettings

MIG = {"share_modes": ["shard", "mig"]}
MEM = {"A100": 81068, "V100": 32510, "H200": 142882}


def _gpu(model: str, i: int, jobs: tuple[str, ...] = (), profiles: tuple[str, ...] = (),
         exclusive: str | None = None) -> Gpu:
    return Gpu("a", i, model=model, gres_type=f"g{i}", memory_mib=MEM[model], shards_total=4,
               shards_used=4 if profiles else len(jobs), exclusive_job=exclusive,
               shard_jobs=jobs, mig_profiles=profiles)


def _cluster(model: str, gpus: list[Gpu], apps: dict[str, str]) -> Cluster:
    jobs = {jid: shapes.running(jid, app, [("a", 0)], shards=1) for jid, app in apps.items()}
    return Cluster(nodes=(Node("a", "mixed", tuple(gpus)),), jobs=MappingProxyType(jobs),
                   taken_s=shapes.NOW)


def _request(app: str, **kw) -> JobRequest:
    return JobRequest(name="r", user="u", gpus=1, app=app, time_limit_s=3600.0,
                      submit_s=shapes.NOW, repeat_key=f"u:{app}", allow_share=True, **kw)


def test_mig_where_time_slicing_breaks_the_slowdown_limit():
    """aps beside a vgg16: time-sliced far over 1.1x (the pair is never shared), in a MIG
    instance beside the vgg16's 4g.40gb its 3g.40gb runs at 0.97 of its speed."""
    assert max(group_slowdowns(["vgg16", "aps"], {})[0]) > 1.1
    cluster = _cluster("A100", [_gpu("A100", 0, ("v",), ("4g.40gb",)), _gpu("A100", 1, ("w",))],
                       {"v": "vgg16", "w": "alexnet"})
    sliced = Eaco().advise(_request("aps"), shapes.context(cluster))
    assert sliced.share_mode == "exclusive"
    pl = Eaco().advise(_request("aps"), shapes.context(cluster, MIG))
    assert (pl.share_mode, pl.mig_profile, pl.nodes, pl.gpu_indexes) == \
        ("mig", "3g.40gb", ("a",), (0,))
    assert pl.gpus == 1 and pl.shards == 0
    rate = mig_rate(mig_profile("A100", "3g.40gb"), job_class("aps").util_at(1))
    assert pl.predicted["slowdown"] == pytest.approx(1 / rate) and 1 / rate <= 1.1
    assert pl.predicted["cost"] < 1 and pl.predicted["energy_saving_pct"] > 0
    assert "MIG instance 3g.40gb of GPU a:0 beside v (vgg16 4g.40gb)" in pl.why[0]
    assert any(w.startswith("instead of the time-sliced answer: eaco: exclusive GPUs")
               for w in pl.why)


def test_a_class_that_cannot_time_slice_starts_a_mig_gpu_alone():
    cluster = _cluster("A100", [_gpu("A100", 0, ("w",)), _gpu("A100", 1)], {"w": "alexnet"})
    pl = Eaco().advise(_request("transformer"), shapes.context(cluster, MIG))
    assert (pl.share_mode, pl.mig_profile, pl.gpu_indexes) == ("mig", "3g.40gb", (1,))
    assert "alone on free GPU a:1" in pl.why[0] and "4 compute slices left" in pl.why[0]


@pytest.mark.parametrize("model", ["V100"])
def test_never_mig_on_a_model_without_it(model):
    cluster = _cluster(model, [_gpu(model, 0, ("v",)), _gpu(model, 1)], {"v": "vgg16"})
    for app in ("aps", "transformer", "alexnet", "vgg16"):
        pl = Eaco().advise(_request(app), shapes.context(cluster, MIG))
        assert pl.share_mode != "mig" and not pl.mig_profile
        assert pl == Eaco().advise(_request(app), shapes.context(cluster))


def test_default_share_modes_never_mig_and_as_before():
    cluster = _cluster("A100", [_gpu("A100", 0, ("v",), ("4g.40gb",)), _gpu("A100", 1)],
                       {"v": "vgg16"})
    for app in ("aps", "transformer", "alexnet", "vgg16", "lstm"):
        a = Eaco().advise(_request(app), shapes.context(cluster))
        b = Eaco().advise(_request(app), shapes.context(cluster, {"share_modes": ["shard"]}))
        assert a == b and a.share_mode != "mig"


def test_a_time_sliced_join_beats_a_mig_gpu_alone():
    """alexnet beside an alexnet, time-sliced (1.004x, below 1 on the objective), rather than
    alone on a free GPU in MIG mode (1.0 on the objective)."""
    cluster = _cluster("A100", [_gpu("A100", 0, ("w",)), _gpu("A100", 1)], {"w": "alexnet"})
    pl = Eaco().advise(_request("alexnet"), shapes.context(cluster, MIG))
    assert pl.share_mode == "shard" and pl.gpu_indexes == (0,)


def test_mig_only_takes_a_free_gpu_in_mig_mode_for_a_small_job():
    cluster = _cluster("A100", [_gpu("A100", 0, ("w",)), _gpu("A100", 1)], {"w": "alexnet"})
    pl = Eaco().advise(_request("alexnet"), shapes.context(cluster, {"share_modes": "mig"}))
    assert (pl.share_mode, pl.mig_profile, pl.gpu_indexes) == ("mig", "1g.10gb", (1,))


def test_a_full_mig_gpu_or_a_time_sliced_or_whole_one_is_never_joined():
    gpus = [_gpu("A100", 0, ("v", "p"), ("4g.40gb", "3g.40gb")),
            _gpu("A100", 1, ("w",)), _gpu("A100", 2, exclusive="x")]
    cluster = _cluster("A100", gpus, {"v": "vgg16", "p": "aps", "w": "alexnet", "x": "lstm"})
    pl = Eaco().advise(_request("aps"), shapes.context(cluster, MIG))
    assert pl.share_mode == "exclusive" and not pl.nodes


def test_a_mig_join_must_meet_the_deadline():
    cluster = _cluster("A100", [_gpu("A100", 0, ("v",), ("4g.40gb",))], {"v": "vgg16"})
    late = _request("aps", deadline_s=shapes.NOW + 3600.0)       # 3600 s alone, 3 % slower
    assert Eaco().advise(late, shapes.context(cluster, MIG)).share_mode != "mig"
    ok = _request("aps", deadline_s=shapes.NOW + 3800.0)
    assert Eaco().advise(ok, shapes.context(cluster, MIG)).share_mode == "mig"


def test_unknown_share_mode_names_key_and_value():
    with pytest.raises(ConfigError) as err:
        EacoSettings.from_mapping({"share_modes": ["shard", "slices"]})
    assert err.value.key == "share_modes" and err.value.value == ["shard", "slices"]


def _random_cluster(rng: random.Random, model: str) -> Cluster:
    """1-4 nodes of 1-8 GPUs of ``model``: free, whole, time-sliced or in MIG mode (a random
    valid layout), a few pending jobs."""
    nodes, jobs = [], {}
    for n in range(rng.randint(1, 4)):
        name = f"n{n}"
        gpus = []
        for i in range(rng.randint(1, 8)):
            kind, ids, profiles, excl = rng.random(), [], [], None
            if kind < 0.2:
                excl = f"x{len(jobs)}"
                jobs[excl] = shapes.running(excl, rng.choice(shapes.APPS), [(name, i)], shards=0)
            elif kind < 0.45:
                for _ in range(rng.randint(1, 3)):
                    jid = f"s{len(jobs)}"
                    jobs[jid] = shapes.running(jid, shapes.pick_app(rng), [(name, i)], shards=1)
                    ids.append(jid)
            elif kind < 0.8 and model != "V100":
                for _ in range(rng.randint(1, 4)):
                    app = rng.choice(shapes.APPS)
                    c = job_class(app)
                    p = smallest_profile(model, c.util_at(1), c.memory_mib, 1.1, 90.0)
                    if p is None or not layout_valid(
                            [mig_profile(model, q) for q in profiles] + [p]):
                        break
                    jid = f"m{len(jobs)}"
                    jobs[jid] = shapes.running(jid, app, [(name, i)], shards=0)
                    ids.append(jid)
                    profiles.append(p.name)
            gpus.append(Gpu(name, i, model=model, gres_type=f"g{i}", memory_mib=MEM[model],
                            shards_total=4, shards_used=4 if profiles else len(ids),
                            exclusive_job=excl, shard_jobs=tuple(ids),
                            mig_profiles=tuple(profiles)))
        nodes.append(Node(name, "mixed", tuple(gpus)))
    for k in range(rng.choice([0, 1, 3, 100])):
        jobs[f"p{k}"] = shapes.Job(job_id=f"p{k}", state="PENDING", app="alexnet", gpus=1)
    return Cluster(nodes=tuple(nodes), jobs=MappingProxyType(jobs), taken_s=shapes.NOW)


@pytest.mark.parametrize("model", ["A100", "H200", "V100"])
def test_mig_placements_keep_the_limits(model):
    rng = random.Random(model)
    seen = 0
    for _ in range(250):
        cluster = _random_cluster(rng, model)
        request = shapes.random_request(rng)
        settings = {**shapes.random_settings(rng), **MIG}
        ctx = shapes.context(cluster, settings)
        pl = Eaco().advise(request, ctx)
        if pl.share_mode != "mig":
            continue
        seen += 1
        s = EacoSettings.from_mapping(settings)
        assert model != "V100" and request.gpus == 1 and request.num_nodes == 1
        assert request.allow_share is not False and "share" not in request.opt_out
        assert cluster.pending_at_least(100) < 100
        g = cluster.node(pl.nodes[0]).gpus[pl.gpu_indexes[0]]
        assert g.exclusive_job is None and (g.is_free or (g.mig_profiles and
                                                          "" not in g.mig_profiles))
        c = job_class(request.app)
        need = request.memory_per_gpu_mib or c.memory_mib
        p = mig_profile(model, pl.mig_profile)
        assert p == smallest_profile(model, c.util_at(1), need, s.max_slowdown,
                                     s.mem_threshold_pct)
        assert layout_valid([mig_profile(model, q) for q in g.mig_profiles] + [p])
        assert pl.predicted["slowdown"] <= s.max_slowdown + 1e-9
        assert need <= p.memory_mib * s.mem_threshold_pct / 100
        if g.mig_profiles:
            assert pl.predicted["cost"] < 1
    assert (seen > 0) == (model != "V100")
