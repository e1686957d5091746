"""Policies on clusters that mix GPU models: each node's own model for caps, memory and share
weights; EaCO co-locates within one model; several nodes of one job are of one model."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from slurm_plugin.model import Cluster, Gpu, Job, JobRequest, Node, Readings
from slurm_plugin.physics.constants import gpu_constants
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.base import Context
from slurm_plugin.policy.eaco.settings import EacoSettings
from slurm_plugin.policy.eaco.shards import memory_cap_mib, share_weights
from slurm_plugin.policy.greenflow.observe import SPENT_G, owed_gpu_w
from slurm_plugin.policy.greenflow.place import place
from slurm_plugin.policy.greenflow.settings import model_caps_w
from slurm_plugin.policy.model_groups import (by_model, cluster_models, largest_model_gpus,
                                              model_key)

H = 3600.0
NOW = 1_700_000_000.0


def _node(name: str, model: str, gpus: int = 1, shards: int = 8, busy: bool = False) -> Node:
    mem = gpu_constants(model)["memory_mib"]
    return Node(name=name, state="allocated" if busy else "idle",
                gpus=tuple(Gpu(node=name, index=i, model=model, memory_mib=mem,
                               shards_total=shards, exclusive_job="x" if busy else None)
                           for i in range(gpus)))


def _ctx(nodes, jobs=None, settings=None, history=None, carbon=None) -> Context:
    readings = Readings() if carbon is None else Readings(
        carbon_g_per_kwh=carbon, carbon_forecast=tuple((NOW + H * h, carbon) for h in range(1, 12)),
        cluster_power_w=10_000.0)
    return Context(cluster=Cluster(nodes=tuple(nodes), jobs=MappingProxyType(jobs or {}),
                                   taken_s=NOW),
                   readings=readings, now_s=NOW, settings=MappingProxyType(settings or {}),
                   history=MappingProxyType(history or {}))


def _request(app: str, gpus: int = 1, num_nodes: int = 1, **kw) -> JobRequest:
    return JobRequest(name="j", user="u", gpus=gpus, num_nodes=num_nodes, app=app,
                      time_limit_s=H, submit_s=NOW, job_id="n", **kw)


def _weight(model: str, app: str, shards: int = 8) -> int:
    return share_weights(shards, gpu_constants(model)["memory_mib"], EacoSettings(), {}, model,
                         1).get(app, 0)


# ---- the helpers ------------------------------------------------------------------------------
def test_models_are_compared_by_catalogue_entry():
    assert model_key("V100") == model_key("Tesla V100-SXM2-32GB") == "V100-SXM2-32GB"
    assert model_key("g0") == "G0"          # not catalogued: its own model
    nodes = (_node("a", "V100"), _node("b", "H100", 2), _node("c", "v100-sxm2-32gb", 4))
    cluster = Cluster(nodes=nodes)
    assert cluster_models(cluster) == ("V100", "H100")
    assert largest_model_gpus(cluster) == 5
    assert [[n.name for n in g] for g in by_model(nodes, lambda n: n)] == [["a", "c"], ["b"]]


# ---- EaCO -----------------------------------------------------------------------------------
def test_the_share_tables_differ_per_model():
    # wavenet (31 GB) shares an 80 GB GPU but no V100; resnet18 takes more shards on an A100
    assert _weight("V100", "wavenet") == 0 < _weight("H100", "wavenet")
    assert _weight("V100", "resnet18") < _weight("A100", "resnet18")


def test_eaco_shares_a_class_only_on_the_model_that_takes_it():
    eaco = get_policy("eaco")
    ctx = _ctx([_node("a", "V100"), _node("b", "H100")])
    pl = eaco.advise(_request("wavenet"), ctx)
    assert pl.share_mode == "shard" and pl.nodes == ("b",)
    assert pl.shards == _weight("H100", "wavenet")


def test_eaco_pins_the_weight_of_the_gpu_it_chose():
    eaco = get_policy("eaco")
    for model in ("V100", "A100"):
        pl = eaco.advise(_request("resnet18"), _ctx([_node("a", model)]))
        assert pl.nodes == ("a",) and pl.shards == _weight(model, "resnet18")


def test_eaco_unpinned_shards_fit_every_models_table():
    """No free GPU: shards on whichever GPU Slurm finds. Their count is the largest of the job's
    weights on the models (jobs that fit on one GPU fit under its own table too), their memory
    cap the least of the models'."""
    eaco = get_policy("eaco")
    busy = [_node("a", "V100", busy=True), _node("b", "A100", busy=True)]
    pl = eaco.advise(_request("resnet18"), _ctx(busy))
    assert not pl.nodes and pl.share_mode == "shard"
    w = max(_weight("V100", "resnet18"), _weight("A100", "resnet18"))
    s = EacoSettings()
    assert pl.shards == w
    assert pl.gpu_memory_cap_mib == min(memory_cap_mib(gpu_constants(m)["memory_mib"], w, 8, s)
                                        for m in ("V100", "A100"))
    # wavenet takes no share of a V100: unpinned shards might land there, so whole GPUs
    pl = eaco.advise(_request("wavenet"), _ctx(busy))
    assert pl.share_mode == "exclusive" and "where its class does not share" in pl.why[0]


def test_eaco_never_joins_residents_on_another_model():
    """A V100 GPU already shared and a free H100: a job of a class that takes no share of a
    V100 goes alone on the H100, never next to the V100's residents."""
    eaco = get_policy("eaco")
    mem = gpu_constants("V100")["memory_mib"]
    shared = Node(name="a", state="mixed", gpus=(Gpu(node="a", index=0, model="V100",
                                                     memory_mib=mem, shards_total=8, shards_used=2,
                                                     shard_jobs=("r",)),))
    jobs = {"r": Job(job_id="r", state="RUNNING", gpus=1, shards=2, app="alexnet",
                     start_s=NOW - 60, time_limit_s=4 * H, nodes=("a",))}
    pl = eaco.advise(_request("wavenet"), _ctx([shared, _node("b", "H100")], jobs))
    assert pl.nodes == ("b",)


# ---- GreenFlow ----------------------------------------------------------------------------------
def test_greenflow_places_a_job_on_one_model_with_that_models_cap():
    gf = get_policy("greenflow")
    nodes = [_node("a", "V100", 4), _node("b", "A100", 4), _node("c", "H100", 4)]
    for app in ("vgg16", "resnet18", "lstm"):
        pl = gf.advise(_request(app, 2), _ctx(nodes, settings={"budget_kg_per_day": 0.001},
                                              history={"greenflow.weight": 1.0}, carbon=400.0))
        assert len(pl.nodes) == 1, pl
        model = {"a": "V100", "b": "A100", "c": "H100"}[pl.nodes[0]]
        assert pl.power_cap_w in model_caps_w(model), (model, pl)


def test_greenflow_packs_a_multi_node_job_on_nodes_of_one_model():
    nodes = [_node("a", "V100", 2), _node("b", "A100", 2), _node("c", "A100", 2),
             _node("d", "H100", 2)]
    assert place(Cluster(nodes=tuple(nodes)), 2, 2) == (("b", "c"), ())
    assert place(Cluster(nodes=tuple(nodes)), 2, 3) is None
    assert place(Cluster(nodes=tuple(nodes)), 2, 1, "H100") == (("d",), (0, 1))


def test_greenflow_caps_a_running_job_from_its_nodes_model():
    gf = get_policy("greenflow")
    nodes = [Node(name="a", gpus=(Gpu(node="a", index=0, model="V100", exclusive_job="1"),)),
             Node(name="b", gpus=(Gpu(node="b", index=0, model="H100", exclusive_job="2"),))]
    # a cap of 1 W is no model's: reconcile sets each job's own (None: uncapped is best)
    jobs = {jid: Job(job_id=jid, state="RUNNING", gpus=1, app="vgg16", nodes=(node,),
                     start_s=NOW - H, time_limit_s=10 * H, power_cap_w=1.0)
            for jid, node in (("1", "a"), ("2", "b"))}
    overspent = {"greenflow.last_s": NOW - 2 * H, SPENT_G: 1e12,
                 "greenflow.period_start_s": NOW - H}
    acts = {a.job_id: a for a in gf.reconcile(_ctx(nodes, jobs, {"budget_kg_per_day": 0.001},
                                                   overspent, carbon=400.0))
            if a.kind == "power_cap"}
    assert set(acts) == {"1", "2"}
    assert acts["1"].power_cap_w in model_caps_w("V100")[1:]        # capped on a V100
    assert acts["2"].power_cap_w in model_caps_w("H100")


def test_owed_work_is_priced_at_the_mean_top_limit_of_the_clusters_gpus():
    nodes = (_node("a", "V100", 2), _node("b", "H100", 2))
    assert owed_gpu_w(Cluster(nodes=nodes)) == pytest.approx(
        (gpu_constants("V100")["max_power_w"] + gpu_constants("H100")["max_power_w"]) / 2)
    assert owed_gpu_w(Cluster(nodes=nodes[:1])) == gpu_constants("V100")["max_power_w"]


# ---- placements over several nodes --------------------------------------------------------------
@pytest.mark.parametrize("policy", ["packed-sticky", "pal"])
def test_several_nodes_of_one_job_are_of_one_model(policy):
    # the best fits (fewest free GPUs) are a and d, of two models: the job takes b and c
    nodes = [_node("a", "V100", 2), _node("b", "A100", 4), _node("c", "A100", 4),
             _node("d", "H100", 2)]
    pl = get_policy(policy).advise(_request("vgg16", 2, 2), _ctx(nodes))
    assert sorted(pl.nodes) == ["b", "c"]
    pl = get_policy(policy).advise(_request("vgg16", 2, 3), _ctx(nodes))
    assert pl.nodes == () and "of one GPU model" in pl.why[0]


def test_oracle_caps_for_the_model_the_job_may_get():
    oracle = get_policy("oracle-bound")
    one = oracle.advise(_request("vgg16"), _ctx([_node("a", "H100")]))
    asked = oracle.advise(_request("vgg16", gpu_model="h100"), _ctx([_node("a", "V100")]))
    assert one.power_cap_w == asked.power_cap_w
    mixed = oracle.advise(_request("vgg16"), _ctx([_node("a", "V100"), _node("b", "H100")]))
    v100 = oracle.advise(_request("vgg16"), _ctx([_node("a", "V100")]))
    if v100.power_cap_w != one.power_cap_w:
        assert mixed.power_cap_w is None and "differs between the GPU models" in mixed.why[0]
    odd = oracle.advise(_request("vgg16"), _ctx([Node(name="a", gpus=(Gpu("a", 0, "g0"),))]))
    assert odd.power_cap_w is None and "'g0' is not a catalogued GPU model" in odd.why[0]
