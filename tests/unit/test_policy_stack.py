"""A stack of policies (``policy/stages.py``): which policy runs each kind of stage, the fields
each stage may set, the one mutating action per job of a pass, errors at config load, and the
real stack over many cluster shapes."""

from __future__ import annotations

import random

import pytest
from test_eaco_shapes import NOW, random_cluster, random_request

from slurm_plugin import config
from slurm_plugin.errors import ConfigError
from slurm_plugin.model import Action, Cluster, Gpu, JobRequest, Node, Placement, Readings
from slurm_plugin.policy.base import Context
from slurm_plugin.policy import registry
from slurm_plugin.policy.registry import check_stack, get_policy, register, stage_kinds
from slurm_plugin.record import replace
from slurm_plugin.policy.stages import FIELDS, KINDS, Stack, StackError, plan

OFFERS = {n: stage_kinds(n) for n in ("pal", "eaco", "greenflow", "elastic", "packed-sticky",
                                      "carbon-threshold", "ones", "slurm-default", "tiresias")}


@pytest.mark.parametrize("names", [("pal", "eaco", "greenflow", "elastic"),
                                   ("elastic", "greenflow", "eaco", "pal"),
                                   ("greenflow", "pal", "elastic", "eaco")])
def test_each_kind_goes_to_the_policy_that_offers_fewest(names):
    assert plan(names, OFFERS) == {"sizing": "elastic", "timing": "greenflow",
                                   "sharing": "eaco", "placement": "pal"}


def test_greenflow_alone_beside_eaco_keeps_its_three_kinds():
    assert plan(("eaco", "greenflow"), OFFERS) == {"sizing": "greenflow", "timing": "greenflow",
                                                   "sharing": "eaco", "placement": "eaco"}


@pytest.mark.parametrize("names, says", [
    (("pal", "packed-sticky"), "pal and packed-sticky both offer the placement stage"),
    (("pal", "pal"), "pal named twice"),
    (("greenflow", "elastic", "pal", "carbon-threshold"), "greenflow would run no stage"),
    (("slurm-default", "pal"), "slurm-default would run no stage"),
])
def test_stacks_that_cannot_run_are_refused(names, says):
    with pytest.raises(StackError, match=says):
        plan(names, OFFERS)


def test_a_bad_stack_is_an_error_at_config_load_naming_key_and_value():
    with pytest.raises(ConfigError) as exc:
        config.load(site_file="/dev/null", environ={"WATTBATCH_POLICY_STAGES": "pal,packed-sticky"})
    assert exc.value.key == "policy.stages" and exc.value.value == ["pal", "packed-sticky"]
    assert "both offer the placement stage" in str(exc.value)
    with pytest.raises(ConfigError, match="policy.name = 'paal': unknown policy"):
        config.load(site_file="/dev/null", environ={"WATTBATCH_POLICY_NAME": "paal"})
    with pytest.raises(ConfigError, match=r"unknown policy 'eco'"):
        check_stack("pal+eco", "--policy", "policy")


def test_the_site_stack_replaces_the_name_and_its_settings_hold_each_stage():
    cfg = config.load(site_file="/dev/null", environ={
        "WATTBATCH_POLICY_STAGES": "pal,eaco", "WATTBATCH_POLICY_ALLOW_SHARE": "true"})
    name, _, key = config.site_policy(cfg)
    assert (name, key) == ("pal+eaco", "policy.stages")
    s = config.policy_settings(cfg, name)
    eaco = s["stage_settings"]["eaco"]
    assert eaco["allow_share"] is True and eaco["share_gres"] == cfg["slurm.share_gres"]
    assert eaco["max_jobs_per_gpu"] == cfg["eaco.max_jobs_per_gpu"]
    assert s["stage_settings"]["pal"]["order_queue"] == cfg["pal.order_queue"]


def test_a_stack_of_one_is_that_policy():
    cfg = config.load(site_file="/dev/null", environ={"WATTBATCH_POLICY_STAGES": "eaco"})
    name, _, key = config.site_policy(cfg)
    assert (name, key) == ("eaco", "policy.stages")
    assert type(get_policy(name)).__name__ == "Eaco"


def test_one_settings_builder_for_every_shell():
    """The wrapper, the reconciler and the simulator see the same settings for one config:
    the [policy] keys, the site's sharing facts, the policy's own section (hyphens as _)."""
    cfg = config.load(site_file="/dev/null", environ={})
    s = config.policy_settings(cfg, "carbon-threshold")
    assert s["allow_share"] is False and s["shards_per_gpu"] == cfg["slurm.shards_per_gpu"]
    assert {k for k in cfg.section("carbon_threshold")} <= set(s)
    assert config.policy_settings(cfg, "eaco", shards_per_gpu=8)["shards_per_gpu"] == 8


# --- fake stages --------------------------------------------------------------------------

class Fake:
    """A policy that answers with ``fields`` and records the request it saw."""

    def __init__(self, name, fields=None, actions=(), fail=False):
        self.name, self.fields, self.actions, self.fail = name, fields or {}, actions, fail
        self.seen: list[JobRequest] = []

    def advise(self, request, ctx):
        self.seen.append(request)
        if self.fail:
            raise RuntimeError("boom")
        return Placement(**{"policy": self.name, "gpus": request.gpus,
                            "why": (f"{self.name} said",), **self.fields})

    def reconcile(self, ctx):
        return tuple(self.actions)


def _stack(**by_kind) -> Stack:
    policies = {p.name: p for p in by_kind.values()}
    kinds = {k: p.name for k, p in by_kind.items()}
    offers = {p.name: tuple(k for k, q in by_kind.items() if q is p) for p in policies.values()}
    return Stack("+".join(policies), policies, kinds, offers)


def _cluster(busy: bool = False) -> Cluster:
    gpus = tuple(Gpu("n0", i, shards_total=4, shard_jobs=("9",) if busy and i == 1 else ())
                 for i in range(4))
    return Cluster(nodes=(Node("n0", "mixed", gpus=gpus), Node("n1", "idle", gpus=gpus)))


def test_a_stage_sets_only_its_fields_and_the_next_sees_its_count():
    size = Fake("size", {"gpus": 4, "begin_s": NOW + 99, "nodes": ("n1",)})
    time_ = Fake("time", {"power_cap_w": 150.0, "gpus": 1, "nice": 2})
    place = Fake("place", {"nodes": ("n0",), "gpu_indexes": (0, 1, 2, 3), "power_cap_w": 99.0})
    p = _stack(sizing=size, timing=time_, placement=place).advise(
        JobRequest(gpus=1, min_gpus=1, max_gpus=8), Context(cluster=_cluster(), now_s=NOW))
    assert (p.gpus, p.begin_s, p.power_cap_w, p.nice) == (4, None, 150.0, 2)
    assert (p.nodes, p.gpu_indexes) == (("n0",), (0, 1, 2, 3))
    assert time_.seen[0].gpus == 4 and time_.seen[0].max_gpus is None
    assert p.why == ("sizing (size): size said", "timing (time): time said",
                     "placement (place): place said")


def test_a_job_that_starts_later_is_placed_by_slurm_then():
    place = Fake("place", {"nodes": ("n0",)})
    p = _stack(timing=Fake("time", {"begin_s": NOW + 600}), placement=place).advise(
        JobRequest(gpus=1), Context(cluster=_cluster(), now_s=NOW))
    assert p.begin_s == NOW + 600 and p.nodes == () and place.seen == []
    assert "placement (place): skipped: the job starts later" in p.why[-1]


def test_a_share_with_a_running_job_fixes_where_the_job_goes():
    share = Fake("share", {"share_mode": "shard", "shards": 1, "nodes": ("n0",),
                           "gpu_indexes": (1,)})
    place = Fake("place", {"nodes": ("n1",), "gpu_indexes": (0,)})
    st = _stack(sharing=share, placement=place)
    p = st.advise(JobRequest(gpus=1), Context(cluster=_cluster(busy=True), now_s=NOW))
    assert (p.share_mode, p.nodes, p.gpu_indexes) == ("shard", ("n0",), (1,)) and not place.seen
    # alone on a free GPU held as shards: the placement stage chooses the GPU
    p = st.advise(JobRequest(gpus=1), Context(cluster=_cluster(busy=False), now_s=NOW))
    assert (p.share_mode, p.nodes, p.gpu_indexes) == ("shard", ("n1",), (0,))


def test_an_elastic_job_is_not_shared():
    share = Fake("share", {"share_mode": "shard", "shards": 1})
    p = _stack(sharing=share, placement=Fake("place", {"nodes": ("n1",)})).advise(
        JobRequest(gpus=1, min_gpus=1, max_gpus=4), Context(cluster=_cluster(), now_s=NOW))
    assert (p.share_mode, p.nodes, share.seen) == ("exclusive", ("n1",), [])
    assert "sharing (share): skipped: an elastic job (1-4 GPUs)" in p.why[0]


def test_a_stage_that_raises_leaves_what_the_stages_before_it_decided():
    p = _stack(sizing=Fake("size", {"gpus": 2}), timing=Fake("time", fail=True),
               placement=Fake("place", {"nodes": ("n0",)})).advise(
        JobRequest(gpus=1), Context(cluster=_cluster(), now_s=NOW))
    assert (p.gpus, p.nodes) == (2, ())
    assert "timing (time): failed (RuntimeError: boom)" in p.why[-1]


def test_a_stage_failure_is_counted_and_each_stage_sees_the_kinds_it_runs():
    seen = {}

    class Kinds(Fake):
        def advise(self, request, ctx):
            seen[self.name] = ctx.stage_kinds
            return super().advise(request, ctx)

    both = Kinds("both")
    stack = _stack(sizing=both, timing=both, placement=Kinds("place"))
    stack.advise(JobRequest(gpus=1), Context(cluster=_cluster(), now_s=NOW))
    assert seen == {"both": ("sizing", "timing"), "place": ("placement",)}
    assert stack.stage_failures == 0
    failing = _stack(timing=Fake("time", fail=True), placement=Fake("place"))
    for _ in range(2):
        failing.advise(JobRequest(gpus=1), Context(cluster=_cluster(), now_s=NOW))
    assert failing.stage_failures == 2


def test_reconcile_keeps_one_mutating_action_per_job_by_stage_order():
    def act(kind, job, policy, **kw):
        return Action(kind, job, policy, **kw)
    size = Fake("size", actions=[act("observe", "", "size"), act("resize", "1", "size", gpus=2),
                                 act("defer", "3", "size", begin_s=NOW)])
    multi = Fake("multi", actions=[act("power_cap", "1", "multi", power_cap_w=150.0),
                                   act("resize", "2", "multi", gpus=4),
                                   act("power_cap", "2", "multi", power_cap_w=150.0)])
    st = Stack("size+multi", {"size": size, "multi": multi},
               {"sizing": "size", "timing": "multi"},
               {"size": ("sizing",), "multi": ("sizing", "timing")})
    got = [(a.kind, a.job_id, a.policy) for a in st.reconcile(Context(cluster=Cluster(nodes=()),
                                                                      now_s=NOW))]
    # observe passes; job 1: the sizing stage's resize before the timing stage's cap; multi's
    # resize of job 2 is dropped (size runs sizing); size's hold of job 3 by defer (a kind it
    # does not offer) counts as its sizing
    assert got == [("observe", "", "size"), ("resize", "1", "size"), ("defer", "3", "size"),
                   ("power_cap", "2", "multi")]


# --- the real stack ---------------------------------------------------------------------

STACK = "pal+eaco+greenflow+elastic"


@pytest.mark.parametrize("seed", range(60))
def test_the_full_stack_over_many_cluster_shapes(seed):
    rng = random.Random(seed)
    cluster, request = random_cluster(rng), random_request(rng)
    if rng.random() < 0.5:                      # an elastic job
        request = replace(request, min_gpus=1, max_gpus=4, app=request.app or "resnet18")
    stack = get_policy(STACK)
    cfg = config.load(site_file="/dev/null", environ={"WATTBATCH_POLICY_ALLOW_SHARE": "true"})
    ctx = Context(cluster=cluster, readings=Readings(), now_s=NOW,
                  settings=config.policy_settings(cfg, STACK))
    p = stack.advise(request, ctx)
    names = {n.name for n in cluster.nodes}
    assert p.gpus >= 1 and set(p.nodes) <= names
    assert p.begin_s is None or p.begin_s >= NOW - 1
    assert p.share_mode in ("exclusive", "shard", "mps", "mig")
    assert not any("failed (" in w for w in p.why), p.why
    assert all(w.split(" (")[0] in KINDS for w in p.why), p.why
    if p.begin_s is not None and p.begin_s > NOW:
        assert p.nodes == ()
    for a in stack.reconcile(ctx):
        assert a.kind in ("observe", "note") or a.job_id in cluster.jobs


def test_every_field_of_a_placement_is_owned_by_one_kind():
    owned = [f for kind in KINDS for f in FIELDS[kind]]
    assert len(owned) == len(set(owned))
    free = {"policy", "why", "predicted"}
    assert set(Placement.__record_fields__) - free == set(owned)


def test_a_registered_policy_offers_the_kinds_it_is_given(monkeypatch):
    monkeypatch.setattr(registry, "_POLICIES", dict(registry._POLICIES))
    monkeypatch.setattr(registry, "_KINDS", dict(registry._KINDS))
    register("test-timing", lambda: Fake("test-timing", {"begin_s": NOW + 5}), ("timing",))
    st = get_policy("pal+test-timing")
    assert st.stages() == [("timing", "test-timing"), ("placement", "pal")]


def test_the_simulators_profile_reaches_every_stage_and_no_strict_section_refuses_it():
    """The engine adds ``profile_factors`` beside a policy's settings: pal plans with it in a
    stack too, and elastic, which reads a strict section, passes over it (it used to refuse
    it on every call, falling back to Slurm's placement)."""
    from slurm_plugin.policy.elastic.settings import parse_settings
    factors = {("n0", 0): (1.0, 1.0, 1.0, 1.0)}
    cfg = config.load(site_file="/dev/null", environ={})
    settings = {**config.policy_settings(cfg, "pal+elastic"), "profile_factors": factors}
    st = get_policy("pal+elastic")
    assert st._ctx("pal", Context(cluster=_cluster(), settings=settings)).settings[
        "profile_factors"] is factors
    parse_settings({**config.policy_settings(cfg, "elastic"), "profile_factors": factors})
