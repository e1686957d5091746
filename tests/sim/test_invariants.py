"""Invariants over many cluster shapes, policies and seeds."""

from __future__ import annotations

import random

import pytest

from slurm_plugin.physics.classes import class_mix
from slurm_plugin.policy import get_policy
from slurm_plugin.record import replace
from slurm_plugin.sim.carbon import load_carbon
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.trace import read_trace
from slurm_plugin.sim.state import RUNNING

POLICIES = ("slurm-default", "fifo-packed", "gandiva", "slurm-powersave", "carbon-threshold",
            "greenflow", "pal", "packed-sticky", "oracle-bound")


class CheckedSimulator(Simulator):
    """Asserts capacity and timing at every start; integrates each job's work."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.done_work: dict[str, float] = {}
        self.finished: list = []
        self.timed_out: set[str] = set()

    def _start(self, j, gpus):
        assert self.now >= j.t.submit_s - 1e-6 and self.now >= j.begin_s - 1e-6
        super()._start(j, gpus)
        for g in gpus:
            if g.exclusive:
                assert len(g.jobs) == 1
            assert 0 <= g.shards_used <= self.spec.shards_per_gpu
            assert g.node.free == sum(1 for x in g.node.gpus if not x.jobs)
        assert 0 <= self.free_total <= self.spec.gpu_count
        assert self.nodes_at_least == [sum(1 for n in self.nodes if n.free >= k)
                                       for k in range(self.spec.gpus_per_node + 1)]
        assert self.gpus_by_room == [sum(1 for n in self.nodes for x in n.gpus
                                         if self._gpu_room(x) == r)
                                     for r in range(self.spec.shards_per_gpu + 1)]
        assert len({id(g) for g in gpus}) == len(gpus) == j.total_gpus

    def _settle(self, j):
        if j.state == RUNNING and j.rate:
            self.done_work[j.id] = self.done_work.get(j.id, 0.0) + j.rate / j.scale * (self.now - j.last_s)
        super()._settle(j)

    def _finish(self, j, timed_out=False):
        super()._finish(j, timed_out)
        if timed_out:
            self.timed_out.add(j.id)
        self.finished.append(j)


@pytest.mark.parametrize("case", range(24))
def test_invariants_hold(tmp_path, case, make_trace):
    rng = random.Random(case)
    spec = ClusterSpec(nodes=rng.randint(1, 6), gpus_per_node=rng.choice([1, 2, 4, 8]),
                       shards_per_gpu=rng.choice([0, 2, 4]), backfill_depth=rng.choice([1, 5, 100]),
                       reconcile_interval_s=rng.choice([60.0, 600.0]),
                       suspend_time_s=rng.choice([None, 0.0, 600.0]),
                       keep_idle_nodes=rng.choice([0, 0, 1, 2]))
    trace = make_trace(tmp_path / "t.csv", rng, rng.randint(1, 60), spec.gpu_count)
    jobs = read_trace(trace, "canonical")
    policy = get_policy(rng.choice(POLICIES[:-1]))
    rows = []
    sim = CheckedSimulator(jobs, spec, policy, seed=case, timeline=rows.append,
                           carbon=load_carbon(None, "GB", jobs[0].submit_s),
                           variability=None)
    r = sim.run()
    assert r["jobs_finished"] == len(jobs) and r["unfinished_jobs"] == 0
    for j in sim.finished:
        assert j.end_s >= j.first_start_s >= j.t.submit_s
        if j.end_s - j.run_start_s < j.limit_s - 1e-6:
            assert sim.done_work[j.id] == pytest.approx(j.t.duration_s, rel=1e-6)
        else:       # killed at its time limit (a slowed shared job)
            assert sim.done_work[j.id] <= j.t.duration_s * (1 + 1e-6)
    energy_j = sum(row["power_w"] * row["duration_s"] for row in rows)
    assert r["energy_kwh"] >= 0 and r["gpu_energy_kwh"] >= 0 and r["carbon_kg"] >= 0
    assert r["energy_kwh"] * 3.6e6 == pytest.approx(energy_j, rel=1e-9)
    assert r["gpu_energy_kwh"] <= r["energy_kwh"] + 1e-9
    assert all(row["power_w"] >= 0 and row["busy_gpus"] <= spec.gpu_count for row in rows)
    for f in ("gpu_alloc_of_powered", "gpu_alloc_of_installed", "sm_util_of_powered"):
        assert 0 <= r[f] <= 1 + 1e-9, f
    assert r["gpu_alloc_of_installed"] <= r["gpu_alloc_of_powered"] + 1e-9
    assert r["jobs_per_busy_gpu"] == 0 or r["jobs_per_busy_gpu"] >= 1 - 1e-9
    busy_s = sum(row["busy_gpus"] * row["duration_s"] for row in rows)
    powered_s = sum(row["nodes_on"] * row["duration_s"] for row in rows) * spec.gpus_per_node
    assert r["gpu_alloc_of_powered"] == pytest.approx(busy_s / powered_s if powered_s else 0)
    assert r["avg_nodes_on"] <= spec.nodes + 1e-9
    assert rows[-1]["time_s"] + rows[-1]["duration_s"] <= max(j.end_s for j in sim.finished) + 1e-6
    if policy.name in ("slurm-default", "slurm-powersave"):
        assert r["avg_runtime_stretch"] == pytest.approx(1.0)


def test_same_inputs_same_numbers(tmp_path, make_trace):
    trace = make_trace(tmp_path / "t.csv", random.Random(5), 80, 8)
    jobs = read_trace(trace, "canonical")
    out = []
    for _ in range(2):
        r = Simulator(jobs, ClusterSpec(nodes=2, gpus_per_node=4), get_policy("gandiva"), seed=3).run()
        r.pop("sim_wall_s")
        out.append(r)
    assert out[0] == out[1]


def test_powersave_suspends_idle_nodes_and_delays_starts_by_the_boot(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("job_id,submit_s,duration_s,num_gpus,app\n"
                    "a,0,100,1,lstm\nb,5000,100,1,lstm\n")
    jobs = read_trace(path, "canonical")
    spec = ClusterSpec(nodes=2, gpus_per_node=2)
    on = Simulator(jobs, spec, get_policy("slurm-default")).run()
    save = Simulator(jobs, spec, get_policy("slurm-powersave")).run()
    assert save["node_suspends"] >= 2
    assert save["energy_kwh"] < on["energy_kwh"]
    # job b found its node suspended: it waits for the boot before running
    assert save["avg_jct_s"] == pytest.approx(100 + 300 / 2)
    assert on["avg_jct_s"] == pytest.approx(100)
    # a booting node's GPU is powered but not busy: b's GPU is busy 100 s of its 400 s on
    busy = 100 + 100
    assert save["gpu_alloc_of_installed"] * 4 * save["makespan_s"] == pytest.approx(busy)
    assert on["gpu_alloc_of_installed"] * 4 * on["makespan_s"] == pytest.approx(busy)


@pytest.mark.parametrize("keep", [1, 2, 3])
def test_kept_idle_nodes_stay_powered_and_start_jobs_without_a_boot(tmp_path, keep):
    """``keep_idle_nodes`` (Slurm's ``SuspendExcNodes=<nodes>:N``): N idle nodes never power
    down, the others still do; a job that finds a kept node idle starts at once."""
    path = tmp_path / "t.csv"
    path.write_text("job_id,submit_s,duration_s,num_gpus,app\n"
                    "a,0,100,1,lstm\nb,5000,100,1,lstm\n")
    jobs = read_trace(path, "canonical")
    spec = ClusterSpec(nodes=3, gpus_per_node=2, keep_idle_nodes=keep)
    r = Simulator(jobs, spec, get_policy("slurm-powersave")).run()
    assert r["node_suspends"] == max(0, 3 - keep)
    assert r["avg_jct_s"] == pytest.approx(100)


def test_colocated_jobs_run_at_their_slowed_rate(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("job_id,submit_s,duration_s,num_gpus,app,time_limit_s\n"
                    "a,0,1000,1,vgg16,10000\nb,0,1000,1,vgg16,10000\n")
    jobs = read_trace(path, "canonical")
    r = Simulator(jobs, ClusterSpec(nodes=1, gpus_per_node=1), get_policy("fifo-packed")).run()
    from slurm_plugin.physics import colocated_slowdown
    slow = colocated_slowdown("vgg16", "vgg16")[0]
    assert r["avg_jct_s"] == pytest.approx(1000 * slow)
    assert r["avg_runtime_stretch"] == pytest.approx(slow)
    # one GPU powered and busy all along, holding two jobs
    assert r["gpu_alloc_of_powered"] == pytest.approx(1.0)
    assert r["jobs_per_busy_gpu"] == pytest.approx(2.0)
    assert r["sharing_factor"] == pytest.approx(2.0)
    from slurm_plugin.physics import job_class
    want = min(100.0, 2 * job_class("vgg16").util_at(1) / slow) / 100
    assert r["sm_util_of_powered"] == pytest.approx(want)


def _starts(path, rows, spec, policy="slurm-default"):
    path.write_text("job_id,submit_s,duration_s,num_gpus,app,time_limit_s\n" + rows)
    sim = CheckedSimulator(read_trace(path, "canonical"), spec, get_policy(policy))
    r = sim.run()
    return {j.id: j.first_start_s for j in sim.finished}, sim, r


def test_easy_backfill_decides_on_time_limits_at_bf_interval_ticks(tmp_path):
    spec = ClusterSpec(nodes=1, gpus_per_node=2, bf_interval_s=30, sched_interval_s=60)
    start, _, _ = _starts(tmp_path / "t.csv", "long,0,1000,1,lstm,1080\nwide,1,100,2,lstm,120\n"
                          "edge,2,500,1,lstm,1020\nlate,3,5000,1,lstm,6000\n"
                          "liar,4,100,1,lstm,1200\n", spec)
    # the shadow is the long job's limit (1080), not its end (1000): edge's limit ends at 1050
    assert start["edge"] == 30          # backfilled at the first bf_interval tick, not at once
    assert start["wide"] == 1000        # the main scheduler starts it when long ends
    assert start["liar"] == 1100        # runs 100 s but asks for 1,200: not backfilled
    assert start["late"] == 1100


def test_main_scheduler_stops_at_the_first_job_that_cannot_start(tmp_path):
    # b (2 GPUs) is blocked behind a; c fits now but only the backfill pass may start it
    spec = ClusterSpec(nodes=1, gpus_per_node=2, bf_interval_s=30)
    start, _, _ = _starts(tmp_path / "t.csv", "a,0,1000,1,lstm,1020\nb,1,100,2,lstm,120\n"
                          "c,2,10,1,lstm,60\n", spec)
    assert start["a"] == 0 and start["c"] == 30 and start["b"] == 1000


def test_a_job_is_killed_at_its_time_limit(tmp_path):
    start, sim, r = _starts(tmp_path / "t.csv", "a,0,1000,1,lstm,600\nb,0,100,1,lstm,\n",
                            ClusterSpec(nodes=1, gpus_per_node=1))
    assert r["jobs_timed_out"] == 1 and start["b"] == 600
    a = next(j for j in sim.finished if j.id == "a")
    assert a.end_s == 600 and sim.timed_out == {"a"}


def test_scheduler_defaults_are_the_local_cluster_slurm_conf():
    import re
    from pathlib import Path
    from slurm_plugin.sim.cluster import SCHED_DEFAULTS
    conf = (Path(__file__).parents[2] / "slurm_plugin/localcluster/slurm.conf.j2").read_text()
    params = dict(kv.split("=") for kv in
                  re.search(r"^SchedulerParameters=(\S+)", conf, re.M).group(1).split(","))
    assert float(params["bf_interval"]) == SCHED_DEFAULTS["bf_interval_s"]
    assert float(params["sched_interval"]) == SCHED_DEFAULTS["sched_interval_s"]


class _Apps:
    """slurm-default, recording the class each job was given."""

    def __init__(self) -> None:
        self.inner = get_policy("slurm-default")
        self.name, self.apps = self.inner.name, []

    def advise(self, request, ctx):
        self.apps.append(request.app)
        return self.inner.advise(request, ctx)

    def reconcile(self, ctx):
        return self.inner.reconcile(ctx)


def test_jobs_without_an_app_draw_from_the_class_mix(tmp_path):
    from slurm_plugin.physics.classes import class_mix
    path = tmp_path / "t.csv"
    path.write_text("job_id,submit_s,duration_s,num_gpus,app\n" +
                    "".join(f"{i},{i},100,1,\n" for i in range(60)) + "named,61,100,1,lstm\n")
    jobs = read_trace(path, "canonical")
    mix = class_mix("eaco-paper")
    policy = _Apps()
    r = Simulator(jobs, ClusterSpec(nodes=2, gpus_per_node=4), policy, class_mix=mix).run()
    assert r["class_mix"] == "eaco-paper" and r["jobs_finished"] == 61
    assert set(policy.apps[:-1]) == set(mix.classes)
    assert policy.apps[-1] == "lstm"        # a trace's own app is kept


@pytest.mark.parametrize("case", range(6))
def test_eaco_with_the_paper_mix_shares_within_capacity(tmp_path, case):
    from slurm_plugin.physics.classes import class_mix
    rng = random.Random(100 + case)
    path = tmp_path / "t.csv"
    t, rows = 0.0, []
    for i in range(rng.randint(20, 80)):
        t += rng.expovariate(1 / 60)
        rows.append(f"j{i},{t:.0f},{rng.randint(60, 4 * 3600)},{rng.choice([1, 1, 1, 2, 4])}")
    path.write_text("job_id,submit_s,duration_s,num_gpus\n" + "\n".join(rows) + "\n")
    jobs = read_trace(path, "canonical")
    spec = ClusterSpec(nodes=rng.randint(1, 4), gpus_per_node=4, suspend_time_s=600.0)
    sim = CheckedSimulator(jobs, spec, get_policy("eaco"), seed=case,
                           class_mix=class_mix("eaco-paper"))
    r = sim.run()
    assert r["jobs_finished"] == len(jobs) and r["unfinished_jobs"] == 0
    assert r["policy_fallbacks"] == 0
    for j in sim.finished:
        assert j.cls.name in ("alexnet", "resnet18", "vgg16")
        if j.end_s - j.run_start_s < j.limit_s - 1e-6:
            assert sim.done_work[j.id] == pytest.approx(j.t.duration_s, rel=1e-6)
        else:       # killed at its time limit (a slowed shared job)
            assert sim.done_work[j.id] <= j.t.duration_s * (1 + 1e-6)
    assert r["avg_runtime_stretch"] >= 1 - 1e-9


class _NoMemoEaco:
    """EaCO as the live path calls it: a fresh policy object for every call (no memo)."""

    name = "eaco"
    slurm_settings = get_policy("eaco").slurm_settings

    def advise(self, request, ctx):
        return get_policy("eaco").advise(request, ctx)

    def reconcile(self, ctx):
        return get_policy("eaco").reconcile(ctx)


class _MemoWithoutLog:
    """EaCO kept between calls, handed a Context without one of the simulator's change logs
    (as the live path, which keeps none)."""

    name = "eaco"
    slurm_settings = get_policy("eaco").slurm_settings

    def __init__(self, log: str) -> None:
        self._policy = get_policy("eaco")
        self._log = log

    def _without(self, ctx):
        if self._log == "history":
            return replace(ctx, history_log=None)
        return replace(ctx, cluster=replace(ctx.cluster, nodes_log=None))

    def advise(self, request, ctx):
        return self._policy.advise(request, self._without(ctx))

    def reconcile(self, ctx):
        return self._policy.reconcile(self._without(ctx))


@pytest.mark.parametrize("seed", range(6))
def test_eaco_observe_memo_changes_no_decision(tmp_path, seed, make_trace):
    """The memo, with or without the history and node logs, decides as fresh passes, over
    random cluster shapes."""
    rng = random.Random(100 + seed)
    nodes, gpn = rng.choice([(1, 8), (2, 4), (3, 2), (4, 4), (6, 8)])
    jobs = read_trace(make_trace(tmp_path / "t.csv", rng, 150 + 50 * seed, min(gpn, 4)),
                      "canonical")
    spec = ClusterSpec(nodes=nodes, gpus_per_node=gpn,
                       reconcile_interval_s=rng.choice([30.0, 60.0, 300.0]))
    mix = class_mix("eaco-paper")
    a = Simulator(jobs, spec, get_policy("eaco"), seed=seed, class_mix=mix).run()
    b = Simulator(jobs, spec, _NoMemoEaco(), seed=seed, class_mix=mix).run()
    c = Simulator(jobs, spec, _MemoWithoutLog("history"), seed=seed, class_mix=mix).run()
    d = Simulator(jobs, spec, _MemoWithoutLog("nodes"), seed=seed, class_mix=mix).run()
    for r in (a, b, c, d):
        r.pop("sim_wall_s")
    assert a["actions"].get("observe", 0) > 0      # groups were judged
    assert a == b == c == d


class _FreshPasses(Simulator):
    """Every backfill pass from the head of the queue (nothing resumed)."""

    def _backfill(self):
        self.bf_resume = None
        super()._backfill()


@pytest.mark.parametrize("case", range(8))
def test_resumed_backfill_passes_decide_as_fresh_ones(tmp_path, case, make_trace):
    rng = random.Random(1000 + case)
    spec = ClusterSpec(nodes=rng.randint(1, 4), gpus_per_node=rng.choice([2, 4, 8]),
                       bf_interval_s=rng.choice([2.0, 30.0]),
                       suspend_time_s=rng.choice([None, 600.0]))
    jobs = read_trace(make_trace(tmp_path / "t.csv", rng, 120, spec.gpu_count), "canonical")
    name = ("slurm-default", "fifo-packed", "gandiva", "eaco")[case % 4]
    a = Simulator(jobs, spec, get_policy(name), seed=case).run()
    b = _FreshPasses(jobs, spec, get_policy(name), seed=case).run()
    a.pop("sim_wall_s"), b.pop("sim_wall_s")
    assert a == b


class _HardSoftChanges(Simulator):
    """Every soft change (a hold renewal, a stale --begin event) counts as a state change, so
    no backfill pass resumes after one."""

    def _soft_change(self):
        self.state_version += 1


@pytest.mark.parametrize("case", range(8))
def test_passes_resumed_after_soft_changes_decide_as_fresh_ones(tmp_path, case, make_trace):
    rng = random.Random(2000 + case)
    spec = ClusterSpec(nodes=rng.randint(1, 4), gpus_per_node=rng.choice([2, 4, 8]),
                       bf_interval_s=rng.choice([2.0, 30.0]),
                       reconcile_interval_s=rng.choice([30.0, 60.0, 300.0]),
                       suspend_time_s=rng.choice([None, 600.0]))
    jobs = read_trace(make_trace(tmp_path / "t.csv", rng, 150, spec.gpu_count), "canonical")
    name = ("tiresias", "greenflow", "elastic", "gandiva")[case % 4]
    carbon = load_carbon(None, "GB", jobs[0].submit_s)
    a = Simulator(jobs, spec, get_policy(name), seed=case, carbon=carbon).run()
    b = _HardSoftChanges(jobs, spec, get_policy(name), seed=case, carbon=carbon).run()
    a.pop("sim_wall_s"), b.pop("sim_wall_s")
    assert a == b


@pytest.mark.parametrize("case", range(30))
def test_every_policy_keeps_capacity_and_finishes_every_job_with_elastic_jobs(tmp_path, case,
                                                                              make_trace):
    """Every built-in policy (the resizing ones too) on random shapes, with none, half or all
    of the jobs elastic: no GPU over capacity, no start before submission or ``--begin``
    (``CheckedSimulator``), every job finished."""
    from slurm_plugin.policy.registry import builtin_policy_names
    from slurm_plugin.sim.elastic_share import make_elastic
    names = [n for n in builtin_policy_names() if n not in ("oracle-bound", "baseline")]
    rng = random.Random(50_000 + case)
    spec = ClusterSpec(nodes=rng.randint(1, 6), gpus_per_node=rng.choice([1, 2, 4, 8]),
                       shards_per_gpu=rng.choice([0, 2, 4]), backfill_depth=rng.choice([1, 5, 100]),
                       reconcile_interval_s=rng.choice([30.0, 60.0, 600.0]),
                       suspend_time_s=rng.choice([None, 0.0, 600.0]),
                       restart_cost_s=rng.choice([0.0, 90.0]))
    jobs = read_trace(make_trace(tmp_path / "t.csv", rng, rng.randint(1, 60), spec.gpu_count),
                      "canonical")
    jobs = make_elastic(jobs, rng.choice([0.0, 0.5, 1.0]), case)
    name = names[case % len(names)]
    sim = CheckedSimulator(jobs, spec, get_policy(name), seed=case,
                           carbon=load_carbon(None, "GB", jobs[0].submit_s))
    r = sim.run()
    assert r["jobs_finished"] == len(jobs) and r["unfinished_jobs"] == 0, name
    assert all(j.end_s >= j.first_start_s >= j.t.submit_s for j in sim.finished)


@pytest.mark.parametrize("case", range(12))
def test_resizing_policies_keep_capacity_with_batch_sizes(tmp_path, case):
    """Pollux rows (a batch model: ``ones`` changes batch sizes) on random shapes, statistical
    efficiency on or off: capacity kept, every job finished."""
    from slurm_plugin.physics.pollux import pollux_apps
    from slurm_plugin.physics.pollux_batch import measured_batch_range
    rng = random.Random(70_000 + case)
    rows = ["name,time,application,num_replicas,batch_size"]
    for i in range(rng.randint(1, 40)):
        app = rng.choice(sorted(pollux_apps()))
        gpus = rng.choice([1, 2, 3, 4, 6, 8])
        lo, hi = measured_batch_range(app)
        rows.append(f"j{i},{rng.randint(0, 3000)},{app},{gpus},"
                    f"{max(gpus, int(lo * (hi / lo) ** rng.random()))}")
    path = tmp_path / "w.csv"
    path.write_text("\n".join(rows) + "\n")
    jobs = read_trace(path, "pollux")
    gpn = rng.choice([2, 4, 8])
    spec = ClusterSpec(nodes=rng.randint(-(-8 // gpn), 6), gpus_per_node=gpn,
                       reconcile_interval_s=rng.choice([30.0, 60.0, 300.0]),
                       restart_cost_s=rng.choice([0.0, 90.0]))
    name = ("ones", "elastic", "tiresias", "elastic-restart", "slurm-default", "pal")[case % 6]
    stat_eff = rng.random() < 0.5
    settings = {"statistical_efficiency": int(stat_eff), "seed": case} if name == "ones" else None
    sim = CheckedSimulator(jobs, spec, get_policy(name), seed=case, settings=settings,
                           statistical_efficiency=stat_eff)
    r = sim.run()
    assert r["jobs_finished"] == len(jobs) and r["unfinished_jobs"] == 0, name
