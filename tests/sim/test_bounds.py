"""The lower bounds on makespan and average JCT (``sim/bounds.py``): exact on small cases, and
never above what a policy that gives jobs whole GPUs reaches in the simulator."""

from __future__ import annotations

import random
import statistics

import pytest

from slurm_plugin.physics.variability import load_profile
from slurm_plugin.policy import get_policy
from slurm_plugin.sim.bounds import batch_jct_bound, lower_bounds
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.trace import TraceJob, read_trace


def job(i, submit_s, run_s, gpus, lo=None, hi=None, speedup=None):
    return TraceJob(job_id=str(i), submit_s=submit_s, duration_s=run_s, num_gpus=gpus, line=i,
                    min_gpus=lo, max_gpus=hi, speedup=speedup)


def test_one_job_alone_at_its_fastest_count():
    sp = (1.0, 1.8, 2.4, 2.0)           # four GPUs are slower than three
    b = lower_bounds([job(1, 50.0, 1800.0, 2, 1, 4, sp)], gpus=8)
    assert b.makespan_s == pytest.approx(1800.0 * 1.8 / 2.4)
    assert b.avg_jct_s == pytest.approx(1800.0 * 1.8 / 2.4)
    assert b.geomean_jct_s == pytest.approx(1800.0 * 1.8 / 2.4)


def test_geomean_bound_is_the_geometric_mean_of_each_jobs_own():
    b = lower_bounds([job(1, 0.0, 100.0, 1), job(2, 0.0, 10_000.0, 1)], gpus=2)
    assert b.geomean_jct_s == pytest.approx(1000.0) and b.avg_jct_s == pytest.approx(5050.0)


def test_the_fastest_gpu_shortens_the_bounds():
    jobs = [job(i, 0.0, 100.0, 1) for i in range(10)]
    b = lower_bounds(jobs, gpus=2, time_factor=0.9)
    assert b.makespan_s == pytest.approx(450.0) and b.avg_jct_s == pytest.approx(90.0)


def test_area_bound_spreads_the_work_over_every_gpu():
    # ten 1-GPU jobs of 100 s at once on 2 GPUs: 500 s at least, though each alone takes 100
    b = lower_bounds([job(i, 0.0, 100.0, 1) for i in range(10)], gpus=2)
    assert b.makespan_s == pytest.approx(500.0) and b.avg_jct_s == pytest.approx(100.0)
    # a late burst counts from its own submission
    late = [job(i, 1000.0, 100.0, 1) for i in range(4)]
    assert lower_bounds([job(99, 0.0, 10.0, 1), *late], gpus=2).makespan_s == \
        pytest.approx(1000.0 + 200.0)


def test_a_range_buys_the_least_gpu_time_for_the_area_and_the_fastest_for_the_job():
    sp = (1.0, 1.5, 1.8, 2.0)           # sublinear: one GPU is the most efficient
    jobs = [job(i, 0.0, 1000.0, 4, 1, 4, sp) for i in range(8)]
    b = lower_bounds(jobs, gpus=4)
    least_gpu_s = 1000.0 * 2.0          # on one GPU
    assert b.makespan_s == pytest.approx(8 * least_gpu_s / 4)
    assert b.avg_jct_s == pytest.approx(1000.0)


@pytest.mark.parametrize("case", range(8))
def test_no_policy_beats_the_bounds(tmp_path, case, make_trace):
    rng = random.Random(case)
    spec = ClusterSpec(nodes=rng.randint(1, 4), gpus_per_node=rng.choice([2, 4, 8]))
    jobs = read_trace(make_trace(tmp_path / "t.csv", rng, rng.randint(5, 60), spec.gpu_count),
                      "canonical")
    b = lower_bounds(jobs, spec.gpu_count)
    for policy in ("slurm-default", "slurm-powersave", "elastic", "elastic-restart", "tiresias",
                   "pal", "packed-sticky"):
        r = Simulator(jobs, spec, get_policy(policy), seed=case).run()
        assert r["makespan_s"] >= b.makespan_s - 1e-6, policy
        assert r["avg_jct_s"] >= b.avg_jct_s - 1e-6, policy
        assert r["geomean_jct_s"] >= b.geomean_jct_s * (1 - 1e-9), policy
    # on GPUs that vary (PAL's profile spread over the cluster): bounded by the fastest one
    prof = load_profile()
    var = prof.factors(spec.gpu_count, case)
    fastest = min(f for g in var for f in g.values())
    b = lower_bounds(jobs, spec.gpu_count, time_factor=fastest)
    for policy in ("pal", "packed-sticky"):
        r = Simulator(jobs, spec, get_policy(policy), seed=case, variability=var).run()
        assert r["makespan_s"] >= b.makespan_s - 1e-6, policy
        assert r["avg_jct_s"] >= b.avg_jct_s - 1e-6, policy
        assert r["geomean_jct_s"] >= b.geomean_jct_s * (1 - 1e-9), policy


def test_elastic_jobs_with_measured_scaling_stay_above_the_bounds(tmp_path):
    """Pollux rows: elastic between 1 and their profile's maximum, measured speedups."""
    from slurm_plugin.physics.pollux import pollux_apps
    rng = random.Random(7)
    apps = sorted(pollux_apps())
    rows = ["name,time,application,num_replicas,batch_size"]
    for i in range(40):
        gpus = rng.choice([1, 2, 4, 8])
        rows.append(f"j{i},{rng.randint(0, 20000)},{rng.choice(apps)},{gpus},"
                    f"{gpus * rng.choice([32, 64, 128])}")
    path = tmp_path / "w.csv"
    path.write_text("\n".join(rows) + "\n")
    jobs = read_trace(path, "pollux")
    spec = ClusterSpec(nodes=4, gpus_per_node=4, reconcile_interval_s=60.0)
    b = lower_bounds(jobs, spec.gpu_count)
    assert 0 < b.avg_jct_s < b.makespan_s
    for policy in ("slurm-default", "elastic", "elastic-restart"):
        r = Simulator(jobs, spec, get_policy(policy), seed=0).run()
        assert r["makespan_s"] >= b.makespan_s - 1e-6, policy
        assert r["avg_jct_s"] >= b.avg_jct_s - 1e-6, policy


def _pollux_rows(tmp_path, n_jobs, seed):
    from slurm_plugin.physics.pollux import pollux_apps
    from slurm_plugin.physics.pollux_batch import measured_batch_range
    rng = random.Random(seed)
    rows = ["name,time,application,num_replicas,batch_size"]
    for i in range(n_jobs):
        app = rng.choice(sorted(pollux_apps()))
        gpus = rng.choice([1, 2, 4])
        lo, hi = measured_batch_range(app)
        batch = max(gpus, int(lo * (hi / lo) ** rng.random()))
        rows.append(f"j{i},{rng.randint(0, 4000)},{app},{gpus},{batch}")
    path = tmp_path / f"w{seed}.csv"
    path.write_text("\n".join(rows) + "\n")
    return read_trace(path, "pollux")


def test_batch_bound_of_one_job_is_its_fastest_count_and_batch(tmp_path):
    from slurm_plugin.physics.pollux_batch import batch_bounds, progress_rate
    for j in _pollux_rows(tmp_path, 6, 3):
        bound = batch_jct_bound([j], 16)
        assert 0 < bound <= j.duration_s * (1 + 1e-9)      # its request is one choice
        # on whole GPUs at the trace's batch per GPU, then a finer search by brute force
        best = lower_bounds([j], 16).avg_jct_s
        for n in range(j.min_gpus or j.num_gpus, min(j.max_gpus or j.num_gpus, 16) + 1):
            b = batch_bounds(j.app, n, j.min_batch_size, j.max_batch_size)
            if b:
                for k in range(2001):
                    batch = b[0] * (b[1] / b[0]) ** (k / 2000)
                    best = min(best, 1.0 / progress_rate(j.app, n, batch, True, j.batch_size))
        assert bound == pytest.approx(best, rel=1e-3), j


def test_no_policy_choosing_counts_and_batches_beats_the_batch_bound(tmp_path):
    """The bound ``bench_ones.py`` prints against tiresias: ones, elastic, tiresias and
    slurm-default all stay above it, with statistical efficiency on and off."""
    jobs = _pollux_rows(tmp_path, 30, 11)
    spec = ClusterSpec(nodes=4, gpus_per_node=4, reconcile_interval_s=60.0)
    for stat_eff in (True, False):
        bound = batch_jct_bound(jobs, spec.gpu_count, stat_eff)
        assert 0 < bound < statistics.fmean(j.duration_s for j in jobs)
        for policy in ("ones", "elastic", "tiresias", "slurm-default"):
            settings = {"statistical_efficiency": int(stat_eff)} if policy == "ones" else None
            r = Simulator(jobs, spec, get_policy(policy), seed=0, settings=settings,
                          statistical_efficiency=stat_eff).run()
            assert r["avg_jct_s"] >= bound * (1 - 1e-3), (policy, stat_eff)


class _Hourly:
    """An intensity series by hour (gCO2/kWh), with the simulator's ``integral_h``."""

    def __init__(self, values):
        self.values = values

    def integral_h(self, t0_s: float, t1_s: float) -> float:
        total, t = 0.0, t0_s
        while t < t1_s - 1e-9:
            h = int(t // 3600)
            end = min(t1_s, (h + 1) * 3600.0)
            total += self.values[h % len(self.values)] * (end - t) / 3600.0
            t = end
        return total


def test_shift_ceiling_moves_each_job_to_its_cleanest_window_within_reach():
    from slurm_plugin.sim.bounds import shift_ceiling
    series = _Hourly([400.0, 400.0, 100.0, 100.0] + [400.0] * 20)
    one_h = TraceJob(job_id="a", submit_s=0.0, duration_s=3600.0, num_gpus=1, line=2)
    assert shift_ceiling([one_h], series, 0.0) == 1.0
    assert shift_ceiling([one_h], series, 3600.0) == 1.0          # hour 1 is as dirty
    assert shift_ceiling([one_h], series, 2 * 3600.0) == pytest.approx(0.25)
    # weighted by GPUs: 1 GPU moved to 100 g, 3 GPUs submitted at 5 h: 400 g within reach
    late = TraceJob(job_id="b", submit_s=5 * 3600.0, duration_s=3600.0, num_gpus=3, line=3)
    both = shift_ceiling([one_h, late], series, 2 * 3600.0)
    assert both == pytest.approx((100 + 3 * 400) / (400 + 3 * 400))
    assert shift_ceiling([one_h], _Hourly([250.0]), 86400.0) == 1.0     # a flat series


def test_carbon_floor_fills_the_cleanest_hours_the_capacity_and_submissions_allow():
    from slurm_plugin.sim.bounds import carbon_floor
    series = _Hourly([400.0, 100.0, 400.0, 400.0, 50.0] + [400.0] * 20)
    two_h = TraceJob(job_id="a", submit_s=0.0, duration_s=7200.0, num_gpus=1, line=2)
    # as soon as possible on one GPU: hours 0 and 1 (400 + 100); no later end: the same
    assert carbon_floor([two_h], series, 1, 0.0) == pytest.approx(1.0)
    # three hours later: hours 1 and 4 (100 + 50)
    assert carbon_floor([two_h], series, 1, 3 * 3600.0) == pytest.approx(150.0 / 500.0)
    # on two GPUs it is done in hour 0 (2 x 400); an hour later it may all run in hour 1
    assert carbon_floor([two_h], series, 2, 3600.0) == pytest.approx(200.0 / 800.0)
    # work cannot run before its submission: a job submitted at 2 h has hours 2-3, then 4
    late = TraceJob(job_id="b", submit_s=2 * 3600.0, duration_s=3600.0, num_gpus=1, line=3)
    assert carbon_floor([late], series, 1, 0.0) == pytest.approx(1.0)
    assert carbon_floor([late], series, 1, 2 * 3600.0) == pytest.approx(50.0 / 400.0)
    assert carbon_floor([], series, 1, 0.0) is None


def _best_integer_carbon(released: list[int], cap: int, prices: list[float]) -> float:
    """The least carbon by enumeration: units of work per hour, at most ``cap``, none before
    it is released, all of it done within the hours priced."""
    best = [float("inf")]

    def go(h: int, backlog: int, spent: float) -> None:
        if h == len(prices):
            if backlog == 0:
                best[0] = min(best[0], spent)
            return
        backlog += released[h] if h < len(released) else 0
        for x in range(min(cap, backlog) + 1):
            go(h + 1, backlog - x, spent + x * prices[h])
    go(0, 0, 0.0)
    return best[0]


def test_carbon_floor_is_the_optimum_of_its_relaxation_on_small_random_cases():
    from slurm_plugin.sim.bounds import carbon_floor
    rng = random.Random(7)
    for case in range(200):
        cap = rng.randint(1, 3)
        released = [rng.randint(0, 3) for _ in range(rng.randint(1, 4))]
        if not any(released):
            continue
        jobs = [TraceJob(job_id=f"{h}-{k}", submit_s=h * 3600.0, duration_s=3600.0,
                         num_gpus=1, line=2) for h, n in enumerate(released) for k in range(n)]
        prices = [float(rng.randint(1, 9)) for _ in range(12)]
        series = _Hourly(prices)
        t0_h = min(h for h, n in enumerate(released) if n)
        t1_h = max(h for h, n in enumerate(released) if n)
        rel = released[t0_h:t1_h + 1]
        asap_h, backlog, asap_cost = 0, 0, 0.0
        while asap_h < len(rel) or backlog:
            backlog += rel[asap_h] if asap_h < len(rel) else 0
            done = min(cap, backlog)
            asap_cost += done * prices[(t0_h + asap_h) % len(prices)]
            backlog -= done
            asap_h += 1
        extra = rng.randint(0, 3)
        horizon = [prices[(t0_h + h) % len(prices)] for h in range(asap_h + extra)]
        want = _best_integer_carbon(rel, cap, horizon) / asap_cost
        got = carbon_floor(jobs, series, cap, extra * 3600.0)
        assert got == pytest.approx(want), (case, released, cap, extra, prices)
