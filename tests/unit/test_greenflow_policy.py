"""GreenFlow's settings, placement, decisions and the simulator's power caps."""

from __future__ import annotations

import random
from slurm_plugin.record import replace

import pytest

from slurm_plugin.errors import ConfigError
from slurm_plugin.model import Cluster, Gpu, Job, JobRequest, Node, Readings
from slurm_plugin.physics.job_cap import capped_job
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.base import Context
from slurm_plugin.policy.greenflow.observe import (OWED_G, SPENT_G, WEIGHT, account_spent_key,
                                                  account_weight_key, observe)
from slurm_plugin.policy.greenflow.place import buddy_block, place, switch_of
from slurm_plugin.policy.greenflow.settings import parse_settings
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.trace import read_trace

H = 3600.0


@pytest.mark.parametrize("values, key", [
    ({"budget_kg_per_day": "ten"}, "budget_kg_per_day"),
    ({"budget_kg_per_week": -1}, "budget_kg_per_week"),
    ({"budget_kg_per_day": 1, "budget_kg_per_week": 7}, "budget_kg_per_week"),
    ({"budget_kg": 5}, "budget_kg"),
    ({"budget_kg": 5, "budget_start_s": 0, "budget_period_s": 0}, "budget_period_s"),
    ({"zone": "DE LU"}, "zone"),
    ({"accounts": {"physics": "lots"}}, "accounts.physics"),
    ({"accounts": "physics=lots"}, "accounts.physics"),
    ({"accounts": "physics"}, "accounts"),
    ({"shiftable_partitions": ["gpu", 7]}, "shiftable_partitions"),
    ({"resize_interval_s": -1}, "resize_interval_s"),
    ({"restart_cost_s": "90"}, "restart_cost_s"),
])
def test_malformed_settings_name_the_key_and_value(values, key):
    with pytest.raises(ConfigError) as err:
        parse_settings(values)
    assert err.value.key == key and err.value.source == "greenflow"


def test_settings_periods():
    day = parse_settings({"budget_kg_per_day": 2})
    assert day.budget_g == 2000 and day.period_of(1.5 * 86400) == (86400, 2 * 86400)
    week = parse_settings({"budget_kg_per_week": 7, "zone": "GB"})
    assert week.period_s == 7 * 86400 and week.zone == "GB"
    assert parse_settings({}).budget_g is None


def test_site_config_form_of_the_settings():
    """The site config's section: 0 is no budget, partitions are comma-separated."""
    from slurm_plugin import config
    site = config.load(environ={"WATTBATCH_GREENFLOW_BUDGET_KG_PER_WEEK": "70",
                                "WATTBATCH_GREENFLOW_SHIFTABLE_PARTITIONS": "gpu, long",
                                "WATTBATCH_GREENFLOW_ACCOUNTS": "physics=20, bio=5.5"})
    s = parse_settings(site.section("greenflow"))
    assert s.budget_g == 70_000 and s.period_s == 7 * 86400
    assert s.accounts_g == {"physics": 20_000, "bio": 5_500}
    assert s.shiftable_partitions == ("gpu", "long") and not s.may_shift("debug")
    assert parse_settings(config.load(environ={}).section("greenflow")).budget_g is None


def nodes_of(rng, n_nodes, gpn, per_switch):
    out = []
    for i in range(n_nodes):
        gpus = tuple(Gpu(node=f"n{i}", index=k, exclusive_job="x" if rng.random() < 0.5 else None)
                     for k in range(gpn))
        out.append(Node(name=f"n{i}", gpus=gpus,
                        features=(f"switch=s{i // per_switch}",) if per_switch else ()))
    return tuple(out)


@pytest.mark.parametrize("case", range(60))
def test_placement_invariants_over_cluster_shapes(case):
    rng = random.Random(case)
    gpn = rng.choice([1, 2, 4, 8])
    cl = Cluster(nodes=nodes_of(rng, rng.randint(1, 12), gpn, rng.choice([0, 1, 2, 4])))
    want = rng.randint(1, gpn)
    spot = place(cl, want, 1)
    blocks = [n for n in cl.nodes if buddy_block(n, want) is not None]
    assert (spot is None) == (not blocks)
    if spot:
        (name,), idx = spot
        node = cl.node(name)
        size = 1 << (want - 1).bit_length()
        assert len(idx) == want and idx[0] % size == 0 and idx == tuple(range(idx[0], idx[0] + want))
        assert all(node.gpus[i].is_free for i in range(idx[0], idx[0] + size))
        assert len(node.free_gpus()) == min(len(n.free_gpus()) for n in blocks)   # best fit
    k = rng.randint(2, 4)
    multi = place(cl, gpn, k)
    whole = [n for n in cl.nodes if len(n.free_gpus()) == gpn]
    assert (multi is None) == (len(whole) < k)
    if multi:
        names, _ = multi
        assert len(set(names)) == k and all(cl.node(n) in whole for n in names)
        per = {}
        for n in whole:
            per.setdefault(switch_of(n), 0)
            per[switch_of(n)] += 1
        used = {switch_of(cl.node(n)) for n in names}
        if max(per.values()) >= k:
            assert len(used) == 1


def test_placement_reads_a_node_again_when_its_view_changes():
    """Rows are kept per node view: a node handed a new view (a job took its GPUs) is read
    again, the unchanged ones are not mistaken for it."""
    free = tuple(Node(name=f"n{i}", gpus=tuple(Gpu(node=f"n{i}", index=k) for k in range(4)))
                 for i in range(2))
    assert place(Cluster(nodes=free), 4, 1) == (("n0",), (0, 1, 2, 3))
    taken = replace(free[0], gpus=tuple(replace(g, exclusive_job="7") for g in free[0].gpus))
    assert place(Cluster(nodes=(taken, free[1])), 4, 1) == (("n1",), (0, 1, 2, 3))
    half = replace(free[1], gpus=tuple(replace(g, exclusive_job="8" if g.index < 2 else None)
                                       for g in free[1].gpus))
    assert place(Cluster(nodes=(taken, half)), 2, 1) == (("n1",), (2, 3))
    assert place(Cluster(nodes=free), 2, 1) == (("n0",), (0, 1))


def ctx(history=None, settings=None, ci=300.0, forecast=None, cluster=None):
    fc = forecast if forecast is not None else tuple((H * h, 300.0 - 20 * h) for h in range(1, 12))
    return Context(cluster=cluster or Cluster(nodes=()), now_s=0.0, settings=settings or {},
                   history=history or {},
                   readings=Readings(carbon_g_per_kwh=ci, carbon_forecast=fc,
                                     cluster_power_w=10_000.0))


@pytest.mark.parametrize("case", range(40))
def test_advice_stays_within_the_jobs_slack_range_and_the_boards_caps(case):
    rng = random.Random(case)
    p = get_policy("greenflow")
    slack = rng.choice([None, H, 6 * H])
    req = JobRequest(gpus=rng.choice([1, 2, 4]), slack_s=slack, time_limit_s=rng.choice([600, 7200]),
                     app=rng.choice(["vgg16", "resnet18", "alexnet", "lstm"]))
    w = rng.random()
    fc = tuple((H * h, rng.uniform(50, 500)) for h in range(1, 48))
    pl = p.advise(req, ctx({WEIGHT: w}, {"budget_kg_per_day": 100}, rng.uniform(50, 500), fc))
    assert pl.gpus == req.gpus
    assert pl.begin_s is None or 0 < pl.begin_s <= (slack or 0)
    assert pl.power_cap_w is None or 100 <= pl.power_cap_w <= 250
    # carbon never worse than running now unchanged, JCT never worse when carbon has no weight
    assert pl.predicted["co2_g"] <= pl.predicted["co2_now_g"] * (1 + 1e-9) or w < 1
    free = p.advise(req, ctx({}, {}, rng.uniform(50, 500), fc))
    assert free.begin_s is None and free.predicted["jct_s"] == pytest.approx(free.predicted["jct_now_s"])


def test_a_tight_budget_defers_to_the_clean_hours_and_missing_carbon_changes_nothing():
    p = get_policy("greenflow")
    req = JobRequest(gpus=1, slack_s=10 * H, time_limit_s=H, app="vgg16")
    pl = p.advise(req, ctx({WEIGHT: 1.0}, {"budget_kg_per_day": 1}))
    assert pl.begin_s == 10 * H and pl.power_cap_w is not None
    none = p.advise(req, ctx(ci=None, forecast=()))
    assert not none.changes_anything and "carbon data missing" in none.why[0]
    assert p.reconcile(ctx(ci=None, forecast=())) == ()


def test_observe_paces_the_budget():
    s = parse_settings({"budget_kg": 10, "budget_start_s": 0, "budget_period_s": 10 * H})
    first = observe(s, {}, Readings(carbon_g_per_kwh=500.0, cluster_power_w=1e6), 0.0, 0.0)
    assert first[SPENT_G] == 0.0 and observe(s, first, Readings(), 60.0, 0.0) is None
    # 1 MW at 500 g/kWh for an hour: 500 kg against a 1 kg pro-rata share: carbon is all
    over = observe(s, first, Readings(carbon_g_per_kwh=500.0, cluster_power_w=1e6), H, 0.0)
    assert over[SPENT_G] == pytest.approx(500_000) and over[WEIGHT] == 1.0
    under = observe(s, first, Readings(carbon_g_per_kwh=1.0, cluster_power_w=1.0), H, 0.0)
    assert under[WEIGHT] == 0.0


def test_work_owed_by_queued_and_running_jobs_counts_against_the_budget():
    """A backlog is carbon the budget will pay: with it, a budget that spending alone is well
    within binds already (else it binds only once the backlog runs, too late to act)."""
    node = Node(name="n0", gpus=(Gpu(node="n0", index=0, exclusive_job="1"),
                                 Gpu(node="n0", index=1)))
    jobs = {"1": Job(job_id="1", state="RUNNING", gpus=1, start_s=0.0, time_limit_s=10 * H),
            "2": Job(job_id="2", state="PENDING", gpus=2, num_nodes=2, time_limit_s=5 * H),
            "3": Job(job_id="3", state="COMPLETED", gpus=8, time_limit_s=50 * H)}
    cl = Cluster(nodes=(node,), jobs=jobs)
    r = Readings(carbon_g_per_kwh=500.0, cluster_power_w=1000.0,
                 carbon_forecast=((2 * H, 100.0), (3 * H, 300.0)),
                 gpus={("n0", 0): _gpu_reading("n0", 0, 200.0)})
    s = parse_settings({"budget_kg": 20, "budget_start_s": 0, "budget_period_s": 10 * H})
    first = observe(s, {}, r, 0.0, 400.0, cl)
    seen = observe(s, first, r, H, 400.0, cl)
    # spent 1 kW x 1 h x 500 g/kWh = 0.5 kg of a 2 kg pro-rata share: under pace alone
    assert seen[SPENT_G] == pytest.approx(500.0)
    # owed: 9 GPU-h left of job 1, 4 x 5 GPU-h of job 2 (the completed job owes nothing), at
    # 200 W + half the node's 400 W base per allocated GPU, at the forecast's mean 200 g/kWh
    assert seen[OWED_G] == pytest.approx(29 * 0.4 * 200.0)
    assert seen[WEIGHT] == 1.0
    alone = observe(s, first, r, H, 400.0, replace(cl, jobs={"1": jobs["1"]}))
    assert alone[OWED_G] == pytest.approx(9 * 0.4 * 200.0) and alone[WEIGHT] == 0.0
    # a daily budget: 2 GPUs can run at most 2 x 3 GPU-h before the day ends at 24 h
    day = parse_settings({"budget_kg_per_day": 20})
    late = observe(day, first, r, 21 * H, 400.0, cl)
    assert late[OWED_G] == pytest.approx(2 * 3 * 0.4 * 200.0)


def test_owed_work_is_priced_at_the_share_of_their_limits_jobs_use():
    """With ``Cluster.limit_use`` (what ended jobs used of their limits), a queued job owes
    that share of its limit, a running one that share of what is left of it; the share is
    clamped to [MIN_LIMIT_USE, 1]."""
    from slurm_plugin.policy.greenflow.observe import MIN_LIMIT_USE, owed_gpu_s
    jobs = {"q": Job(job_id="q", state="PENDING", gpus=2, time_limit_s=10 * H),
            "early": Job(job_id="early", state="RUNNING", gpus=1, start_s=0.0,
                         time_limit_s=10 * H),
            "late": Job(job_id="late", state="RUNNING", gpus=1, start_s=-6 * H,
                        time_limit_s=10 * H)}
    cl = Cluster(nodes=(), jobs=jobs)
    at = H    # early ran 1 h, late 7 h
    assert owed_gpu_s(cl, at)[0] == pytest.approx((20 + 9 + 3) * H)       # whole limits
    half = replace(cl, limit_use=0.5)
    # q: 2 x half of 10 h; early: half of its 9 h left; late: half of its 3 h left
    assert owed_gpu_s(half, at)[0] == pytest.approx((10 + 4.5 + 1.5) * H)
    assert owed_gpu_s(replace(cl, limit_use=1e-6), at)[0] == pytest.approx(
        (20 + 9 + 3) * H * MIN_LIMIT_USE)
    assert owed_gpu_s(replace(cl, limit_use=3.0), at)[0] == owed_gpu_s(cl, at)[0]


def _two_accounts_cluster():
    """n0: GPU 0 held by physics' job 1, GPU 1 shared by physics' job 2 and bio's job 3;
    n1: GPU 0 held by bio's job 4; a pending physics job 5 deferred."""
    n0 = Node(name="n0", gpus=(Gpu(node="n0", index=0, exclusive_job="1"),
                               Gpu(node="n0", index=1, shard_jobs=("2", "3"))))
    n1 = Node(name="n1", gpus=(Gpu(node="n1", index=0, exclusive_job="4"),
                               Gpu(node="n1", index=1)))
    run = dict(state="RUNNING", gpus=1, app="vgg16")
    jobs = {"1": Job(job_id="1", account="physics", **run),
            "2": Job(job_id="2", account="physics", **run),
            "3": Job(job_id="3", account="bio", **run),
            "4": Job(job_id="4", account="bio", **run),
            "5": Job(job_id="5", account="physics", state="PENDING", gpus=1, app="vgg16",
                     begin_s=9 * H, slack_s=10 * H, time_limit_s=H)}
    return Cluster(nodes=(n0, n1), jobs=jobs)


def _gpu_reading(node, index, power_w):
    from slurm_plugin.model import GpuReading
    return GpuReading(node=node, index=index, power_w=power_w, energy_j=0.0, util_pct=0.0,
                      mem_used_mib=0.0, power_limit_w=250.0, taken_s=0.0)


def test_each_account_is_charged_its_gpus_and_paced_against_its_own_budget():
    s = parse_settings({"budget_kg_per_day": 1000, "accounts": "physics=0.1,bio=1000"})
    cl = _two_accounts_cluster()
    gpus = {(n, i): _gpu_reading(n, i, w) for n, i, w in
            (("n0", 0, 200.0), ("n0", 1, 100.0), ("n1", 0, 300.0), ("n1", 1, 50.0))}
    r = Readings(carbon_g_per_kwh=500.0, cluster_power_w=2000.0, gpus=gpus)
    first = observe(s, {}, r, 0.0, 400.0, cl)
    assert first[account_spent_key("physics")] == 0.0
    seen = observe(s, first, r, H, 400.0, cl)
    # per GPU: its power plus half of the node's 400 W base (2 GPUs a node);
    # the shared GPU split evenly between physics and bio; n1's idle GPU charges no one
    physics_w = (200 + 200) + (100 + 200) / 2
    bio_w = (100 + 200) / 2 + (300 + 200)
    assert seen[account_spent_key("physics")] == pytest.approx(physics_w * 500 / 1000)
    assert seen[account_spent_key("bio")] == pytest.approx(bio_w * 500 / 1000)
    # physics spent 275 g of 100 g a day an hour in: over; bio is far under; the cluster too
    assert seen[account_weight_key("physics")] == 1.0
    assert seen[account_weight_key("bio")] == 0.0 and seen[WEIGHT] < 0.5
    # a new period starts each account from zero again
    later = observe(s, seen, r, 86400.0 + 60, 400.0, cl)
    assert later[account_spent_key("physics")] == pytest.approx(physics_w * 60 * 500 / 3.6e6)


def test_an_account_over_its_budget_is_shifted_and_capped_the_others_are_not():
    p = get_policy("greenflow")
    settings = {"budget_kg_per_day": 1000, "accounts": "physics=0.1,bio=1000"}
    history = {WEIGHT: 0.0, account_weight_key("physics"): 1.0, account_weight_key("bio"): 0.0}
    req = JobRequest(gpus=1, slack_s=10 * H, time_limit_s=H, app="vgg16")
    over = p.advise(replace(req, account="physics"), ctx(history, settings))
    under = p.advise(replace(req, account="bio"), ctx(history, settings))
    other = p.advise(replace(req, account="chem"), ctx(history, settings))
    assert over.begin_s == 10 * H and "account physics's budget" in over.why[0]
    assert under.begin_s is None and other.begin_s is None
    # reconcile half-way through the day, physics far over its budget, bio and the cluster
    # under theirs: physics' running jobs are capped harder than bio's (which take only the
    # free savings)
    now = 12 * H
    spent = {"greenflow.last_s": now - 2 * H, "greenflow.period_start_s": 0.0, SPENT_G: 0.0,
             account_spent_key("physics"): 1e6, account_spent_key("bio"): 0.0}
    c = Context(cluster=_two_accounts_cluster(), now_s=now, settings=settings, history=spent,
                readings=Readings(carbon_g_per_kwh=200.0, cluster_power_w=0.0,
                                  carbon_forecast=tuple((now + H * h, 200.0) for h in range(1, 24))))
    acts = {(a.kind, a.job_id): a for a in p.reconcile(c)}
    seen = acts[("observe", "")].predicted
    assert seen[account_weight_key("physics")] == 1.0
    assert seen[account_weight_key("bio")] == 0.0 and seen[WEIGHT] == 0.0
    cap = {j: acts[("power_cap", j)].power_cap_w if ("power_cap", j) in acts else None
           for j in "1234"}
    cap = {j: 250.0 if w is None else w for j, w in cap.items()}
    assert max(cap["1"], cap["2"]) < min(cap["3"], cap["4"])
    assert "account physics's budget" in acts[("power_cap", "1")].why


def test_reconcile_caps_running_jobs_and_moves_deferred_starts():
    p = get_policy("greenflow")
    node = Node(name="n0", gpus=(Gpu(node="n0", index=0, exclusive_job="1"),))
    jobs = {"1": Job(job_id="1", state="RUNNING", gpus=1, app="vgg16",
                     uses=()),
            "2": Job(job_id="2", state="PENDING", gpus=1, app="vgg16", begin_s=9 * H,
                     slack_s=10 * H, time_limit_s=H)}
    falling = tuple((H * h, 300.0 - 20 * h) for h in range(1, 12))
    overspent = {"greenflow.last_s": -H, SPENT_G: 1e9, "greenflow.period_start_s": 0.0}
    c = ctx(overspent, {"budget_kg_per_day": 0.001}, 300.0,
            falling, Cluster(nodes=(node,), jobs=jobs))
    kinds = {(a.kind, a.job_id): a for a in p.reconcile(c)}
    assert ("observe", "") in kinds
    assert kinds[("power_cap", "1")].power_cap_w is not None
    assert kinds[("defer", "2")].begin_s == 10 * H


def test_a_cap_that_slows_a_running_job_raises_its_time_limit_as_much():
    """Slurm kills a job at its limit: a slower run gets the rest of its limit stretched by
    the new cap's slowdown over the old one's; a cap that slows it less leaves the limit."""
    from slurm_plugin.policy.greenflow.decide import raised_limit_s
    job = Job(job_id="1", state="RUNNING", gpus=1, app="nas", start_s=0.0,
              time_limit_s=10 * H, power_cap_w=200.0)
    s200, s125 = capped_job("nas", 1, 200.0)[1], capped_job("nas", 1, 125.0)[1]
    assert s125 > s200 > 1
    assert raised_limit_s(job, 1, 125.0, 4 * H, "V100", 8) == pytest.approx(
        10 * H + 6 * H * (s125 / s200 - 1))
    assert raised_limit_s(job, 1, 225.0, 4 * H, "V100", 8) is None     # faster: kept
    assert raised_limit_s(replace(job, time_limit_s=None), 1, 125.0, 4 * H, "V100", 8) is None
    node = Node(name="n0", gpus=(Gpu(node="n0", index=0, exclusive_job="1"),))
    overspent = {"greenflow.last_s": -H, SPENT_G: 1e9, "greenflow.period_start_s": 0.0}
    c = ctx(overspent, {"budget_kg_per_day": 0.001}, 300.0, None,
            Cluster(nodes=(node,), jobs={"1": replace(job, power_cap_w=None)}))
    cap = next(a for a in get_policy("greenflow").reconcile(c) if a.kind == "power_cap")
    slow = capped_job("nas", 1, cap.power_cap_w)[1]
    assert slow > 1 and cap.time_limit_s == pytest.approx(10 * H * slow)


def test_the_engine_raises_a_running_jobs_time_limit_with_a_cap(tmp_path):
    """A job whose limit is its run: capped at 100 W after 100 s it is killed at the limit,
    unless the cap comes with the limit raised by its slowdown."""
    from slurm_plugin.model import Action
    path = tmp_path / "t.csv"
    path.write_text("job_id,submit_s,duration_s,num_gpus,app,time_limit_s\na,0,1200,1,nas,1200\n")
    jobs = read_trace(path, "canonical")
    slow = capped_job("nas", 1, 100.0)[1]

    class CapLater:
        name = "cap-later"

        def __init__(self, raise_limit):
            self.raise_limit = raise_limit

        def advise(self, request, ctx):
            from slurm_plugin.model import Placement
            return Placement(policy=self.name, gpus=request.gpus)

        def reconcile(self, ctx):
            job = ctx.cluster.jobs.get("a")
            if job is None or not job.running or job.power_cap_w is not None:
                return ()
            limit = job.time_limit_s + (1200 - ctx.now_s) * (slow - 1) if self.raise_limit \
                else None
            return (Action(kind="power_cap", job_id="a", policy=self.name, power_cap_w=100.0,
                           time_limit_s=limit),)
    spec = ClusterSpec(nodes=1, gpus_per_node=1, reconcile_interval_s=300)
    killed = Simulator(jobs, spec, CapLater(False)).run()
    kept = Simulator(jobs, spec, CapLater(True)).run()
    assert killed["jobs_timed_out"] == 1 and kept["jobs_timed_out"] == 0
    assert kept["avg_jct_s"] == pytest.approx(300 + 900 * slow)


def test_the_engine_applies_a_cap_through_the_configuration_model(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("job_id,submit_s,duration_s,num_gpus,app,time_limit_s\na,0,1000,1,vgg16,9000\n")
    jobs = read_trace(path, "canonical")

    class Capped:
        name = "capped"

        def advise(self, request, ctx):
            from slurm_plugin.model import Placement
            return Placement(policy=self.name, gpus=request.gpus, power_cap_w=125.0)

        def reconcile(self, ctx):
            return ()
    spec = ClusterSpec(nodes=1, gpus_per_node=1)
    plain = Simulator(jobs, spec, get_policy("slurm-default")).run()
    capped = Simulator(jobs, spec, Capped()).run()
    power_w, slow = capped_job("vgg16", 1, 125.0)
    assert slow > 1 and capped["avg_jct_s"] == pytest.approx(1000 * slow)
    assert capped["gpu_energy_kwh"] < plain["gpu_energy_kwh"]


def test_smaller_predicted_gpu_time_goes_first_in_the_queue():
    from slurm_plugin.policy.queue import MAX_TIER, TIER_GPU_S, queue_tier
    assert queue_tier(0.0) == queue_tier(TIER_GPU_S) == 0
    assert queue_tier(TIER_GPU_S * 1.5) == 1 and queue_tier(TIER_GPU_S * 2) == 2
    assert queue_tier(TIER_GPU_S * 1e9) == MAX_TIER
    tiers = [queue_tier(TIER_GPU_S * 2 ** (k / 3)) for k in range(60)]
    assert tiers == sorted(tiers)                               # monotonic in GPU-time
    p = get_policy("greenflow")
    short = JobRequest(gpus=1, time_limit_s=600, app="vgg16")
    long = JobRequest(gpus=8, time_limit_s=48 * H, app="vgg16")
    a, b = (p.advise(r, ctx({}, {})) for r in (short, long))
    assert a.nice is None and b.nice == queue_tier(8 * 48 * H) > 0
    # a site can turn it off
    assert p.advise(long, ctx({}, {"order_queue": False})).nice is None
    with pytest.raises(ConfigError) as err:
        parse_settings({"order_queue": "yes"})
    assert err.value.key == "order_queue"
