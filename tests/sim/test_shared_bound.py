"""The energy bound within the share limit priced with interference and the shared GPU's one
power limit (``sim/shared_bound.py``): the cap physics it relies on monotone, its least over
limits and demands exact, exact on small cases (a schedule attains it), refused where it does
not price, and never beaten by a simulated schedule (every registered policy, the stack, and a
policy that shares every job under a common cap)."""

from __future__ import annotations

import random

import pytest

from slurm_plugin.errors import InputError
from slurm_plugin.model import Placement
from slurm_plugin.physics import (cap_slowdown, class_names, group_slowdowns, node_base_power_w,
                                  shared_gpu_power_w, shared_gpu_throttle)
from slurm_plugin.physics.constants import gpu_constants
from slurm_plugin.physics.job_cap import capped_job
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.registry import builtin_policy_names
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.shared_bound import (Board, least_throttled_w, shared_energy_bound_kwh,
                                           throttled_w)
from slurm_plugin.sim.trace import TraceJob

ONE_GPU = ClusterSpec(nodes=1, gpus_per_node=1)
BASE_W = node_base_power_w()
V100 = gpu_constants("V100")
IDLE_W, MAX_W = V100["idle_power_w"], V100["max_power_w"]


def job(i, app, run_s=3600.0, gpus=1, submit_s=1000.0, **kw):
    return TraceJob(job_id=f"j{i}", submit_s=submit_s, duration_s=run_s, num_gpus=gpus, line=i,
                    app=app, time_limit_s=100 * run_s, **kw)


class Clipper:
    """Shares every job (a shard on each of its GPUs) and caps the classes of ``caps_w``: when
    every job on a GPU is capped, the GPU holds the highest of their caps and all of them slow
    as much as its throttle says."""
    name = "clipper"

    def __init__(self, caps_w: dict[str, float]) -> None:
        self.caps_w = caps_w

    def advise(self, request, ctx):
        return Placement(policy=self.name, gpus=request.gpus, share_mode="shard", shards=1,
                         power_cap_w=self.caps_w.get(request.app))

    def reconcile(self, ctx):
        return ()


def run(jobs, spec, policy, seed=0):
    return Simulator(jobs, spec, policy, seed=seed, settings={"allow_share": True}).run()


def dynamic_w(app):
    return capped_job(app, 1, None, "V100", 1)[0] - IDLE_W


@pytest.mark.parametrize("model", ["V100", "A40", "L40S"])
def test_capped_power_rises_and_slowdown_falls_with_the_cap(model):
    """What the bound's cap bands rest on, at every half watt of the settable range."""
    c = gpu_constants(model)
    caps = [c["min_power_cap_w"] + 0.5 * i
            for i in range(int((c["max_power_w"] - c["min_power_cap_w"]) / 0.5) + 1)]
    for app in class_names():
        for gpus in (1, 2, 4, 8):
            got = [capped_job(app, gpus, cap, model, 8) for cap in caps]
            got.append(capped_job(app, gpus, None, model, 8))
            for (w0, s0), (w1, s1) in zip(got, got[1:]):
                assert w1 >= w0 - 1e-9 and s1 <= s0 + 1e-9, (app, gpus)


def test_the_priced_part_is_the_simulators_physics():
    """``throttled_w`` at a demand and limit: the job's part of ``shared_gpu_power_w`` and of
    the base power over its speed under ``shared_gpu_throttle``."""
    dyn, rates = [dynamic_w("nas"), dynamic_w("vgg16")], [0.6, 0.7]
    for limit_w in (100.0, 180.0, MAX_W):
        load_w = IDLE_W + sum(d * r for d, r in zip(dyn, rates))
        power_w = shared_gpu_power_w(dyn, rates, limit_w, "V100")
        share_w = (IDLE_W / 2 + dyn[0] * rates[0]) / load_w * power_w + BASE_W / 2
        want = share_w * shared_gpu_throttle(dyn, rates, limit_w, "V100") / rates[0]
        board = Board(IDLE_W, V100["min_power_cap_w"], MAX_W, V100["cap_beta"], BASE_W)
        got = throttled_w(IDLE_W / 2 + dyn[0] * rates[0], BASE_W / 2, rates[0], rates[0],
                          load_w, limit_w, board)
        assert got == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("case", range(60))
def test_the_least_over_limits_and_demands_is_exact(case):
    """No limit and demand on a fine grid (refined around its best) beats the closed form, on
    boards, rates and powers drawn at random (throttle exponents both sides of 1)."""
    rng = random.Random(case)
    idle_w = rng.uniform(20, 80)
    lo_w = idle_w + rng.uniform(5, 150)
    board = Board(idle_w, lo_w, lo_w + rng.uniform(0, 400),
                  rng.choice([0.45, 0.84, 0.98, 1.3, rng.uniform(0.2, 1.5)]),
                  rng.choice([0.0, 50.0, 400.0]))
    k, r = rng.randint(1, 4), rng.uniform(0.3, 1)
    q = r * rng.choice([1.0, rng.uniform(0.2, 1)])
    load_w = idle_w + rng.uniform(0, 300) * q
    top_w = load_w + rng.choice([0.0, rng.uniform(0, 800)])
    a_w, c_w = idle_w / k + (load_w - idle_w), board.static_w / k
    got = least_throttled_w(a_w, c_w, q, r, load_w, top_w, board)
    box = [load_w, top_w, board.min_cap_w, board.max_w]
    for _ in range(6):
        n = 40
        value, d, lim = min((throttled_w(a_w, c_w, q, r, d, lim, board), d, lim)
                            for d in (box[0] + (box[1] - box[0]) * i / n for i in range(n + 1))
                            for lim in (box[2] + (box[3] - box[2]) * i / n for i in range(n + 1)))
        assert got <= value * (1 + 1e-12)
        dd, dl = (box[1] - box[0]) / n * 2, (box[3] - box[2]) / n * 2
        box = [max(load_w, d - dd), min(top_w, d + dd),
               max(board.min_cap_w, lim - dl), min(board.max_w, lim + dl)]


def test_one_job_alone_needs_its_energy_at_its_best_cap():
    """No co-runner exists: the job alone, its GPU and its node's base power, at its best cap
    (to the width of a cap band, from below)."""
    light = shared_energy_bound_kwh([job(1, "alexnet")], ONE_GPU) * 3.6e6
    assert light == pytest.approx(3600 * (capped_job("alexnet", 1, None, "V100", 1)[0] + BASE_W),
                                  rel=1e-12)     # below the least cap: caps change nothing
    caps = [None] + [100 + 0.1 * i for i in range(1501)]     # V100: 100 W to its 250 W top
    tried = 3600 * min(slow * (min(w, MAX_W) + BASE_W)        # nas draws 254 W: clipped
                       for w, slow in (capped_job("nas", 1, cap, "V100", 1) for cap in caps))
    heavy = shared_energy_bound_kwh([job(1, "nas")], ONE_GPU, cap_step_w=0.05) * 3.6e6
    assert tried * (1 - 1e-3) <= heavy <= tried * (1 + 1e-12)
    assert tried < 3600 * (MAX_W + BASE_W)            # a cap saves energy there


def test_two_jobs_sharing_a_gpu_match_a_hand_computation_and_the_simulator():
    """Two light jobs of one class: sharing halves the static power at a small slowdown (their
    demand stays under every limit), and a schedule that shares them from the start needs just
    that."""
    jobs = [job(1, "alexnet"), job(2, "alexnet")]
    slow = group_slowdowns(["alexnet", "alexnet"])[0]
    assert IDLE_W + 2 * dynamic_w("alexnet") / slow < V100["min_power_cap_w"]
    hand_j = 2 * 3600 * (dynamic_w("alexnet") + slow * (IDLE_W + BASE_W) / 2)
    got = shared_energy_bound_kwh(jobs, ONE_GPU)
    assert got * 3.6e6 == pytest.approx(hand_j, rel=1e-12)
    assert run(jobs, ONE_GPU, Clipper({}))["energy_kwh"] == pytest.approx(got, rel=1e-6)


def pair_j(load_w, limit_w, slow, base_w):
    """Two jobs of one class sharing one GPU all along, at demand ``load_w`` under
    ``limit_w``: the GPU's power and the base power over both runs, throttled."""
    return (min(load_w, limit_w) + base_w) * 3600 * slow * cap_slowdown(load_w, limit_w, "V100")


def test_a_pair_past_the_boards_limit_needs_its_throttled_energy():
    """Two heavy jobs of one class on one GPU demand more than the board gives: with a node's
    base power the GPU is best left at its top (the pair's energy uncapped, throttled); with a
    small one, capped where the power share's fall meets the throttle's rise, by hand. The
    simulator attains both with those caps."""
    slow = group_slowdowns(["nas", "nas"])[0]
    load_w = IDLE_W + 2 * dynamic_w("nas") / slow
    assert load_w > MAX_W
    jobs = [job(1, "nas"), job(2, "nas")]
    top_j = pair_j(load_w, MAX_W, slow, BASE_W)
    assert shared_energy_bound_kwh(jobs, ONE_GPU) * 3.6e6 == pytest.approx(top_j, rel=1e-12)
    assert run(jobs, ONE_GPU, Clipper({}))["energy_kwh"] * 3.6e6 == pytest.approx(top_j, rel=1e-6)

    small = ClusterSpec(nodes=1, gpus_per_node=1, node_base_power_w=50.0)
    a_w = IDLE_W / 2 + dynamic_w("nas") / slow         # each one's part, were nothing clipped
    beta = V100["cap_beta"]
    best_w = (a_w * IDLE_W + beta * 25.0 * load_w) / (a_w * (1 - beta))
    assert V100["min_power_cap_w"] < best_w < MAX_W
    hand_j = pair_j(load_w, best_w, slow, 50.0)
    assert hand_j < pair_j(load_w, MAX_W, slow, 50.0)
    assert shared_energy_bound_kwh(jobs, small) * 3.6e6 == pytest.approx(hand_j, rel=1e-12)
    capped = run(jobs, small, Clipper({"nas": best_w}))
    assert capped["energy_kwh"] * 3.6e6 == pytest.approx(hand_j, rel=1e-6)


def test_a_share_limit_of_one_prices_every_job_alone():
    jobs = [job(i, "alexnet") for i in range(3)]
    assert shared_energy_bound_kwh(jobs, ONE_GPU, max_jobs_per_gpu=1) == pytest.approx(
        3 * shared_energy_bound_kwh(jobs[:1], ONE_GPU), rel=1e-12)


def test_mig_clusters_and_batch_traces_are_refused():
    with pytest.raises(InputError, match="MIG"):
        shared_energy_bound_kwh([job(1, "vgg16")], ClusterSpec(nodes=1, gpu_type="A100-SXM4-40GB"))
    with pytest.raises(InputError, match="batch sizes"):
        shared_energy_bound_kwh([job(1, "vgg16", batch_size=64)], ONE_GPU)


SHAPES = [ClusterSpec(nodes=1, gpus_per_node=1), ClusterSpec(nodes=2, gpus_per_node=2),
          ClusterSpec(nodes=3, gpus_per_node=4, suspend_time_s=600.0),
          ClusterSpec(gpus_per_node=2, groups=(("V100", 1), ("A40", 1)))]


def random_jobs(rng: random.Random, gpus: int) -> list[TraceJob]:
    """20 to 60 jobs, a fifth elastic, arriving from seconds to an hour apart (idle to
    overloaded), with time limits no run reaches."""
    out, t = [], 1_700_000_000.0
    for i in range(rng.randint(20, 60)):
        t += rng.expovariate(1 / rng.choice([20, 300, 3600]))
        n = min(rng.choice([1, 1, 1, 1, 2, 4]), gpus)
        span = {"min_gpus": 1, "max_gpus": min(gpus, 2 * n)} if rng.random() < 0.2 else {}
        out.append(job(i, rng.choice(class_names() + ("",)), float(rng.randint(60, 3 * 3600)),
                       n, t, **span))
    return out


@pytest.mark.parametrize("case", range(8))
def test_no_schedule_beats_the_bound(case):
    rng = random.Random(9_000 + case)
    spec = SHAPES[case % len(SHAPES)]
    jobs = random_jobs(rng, spec.gpus_per_node * spec.largest_model_nodes)
    bound = shared_energy_bound_kwh(jobs, spec, seed=case)
    names = [n for n in builtin_policy_names() if n not in ("oracle-bound", "baseline")]
    policies = [get_policy(n) for n in (*names, "pal+eaco+greenflow+elastic")]
    policies += [Clipper({c: cap_w for c in class_names()}) for cap_w in (100.0, 150.0)]
    policies.append(Clipper({}))
    for p in policies:
        r = run(jobs, spec, p, seed=case)
        assert r["jobs_timed_out"] == 0 and r["jobs_finished"] == len(jobs), p.name
        assert r["energy_kwh"] >= bound * (1 - 1e-9), p.name
