"""The energy bound at an average-JCT limit (``sim/energy_bound.py``): the oracle's energy where
the limit does not bind, above it where it does, below the best choice of caps found by trying
every one on small cases, and never beaten by a policy that keeps to the limit."""

from __future__ import annotations

import itertools
import random

import pytest

from slurm_plugin.physics.classes import class_mix
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.oracle import cap_options
from slurm_plugin.sim.carbon import load_carbon
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.energy_bound import energy_within_jct
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.run import oracle_metrics
from slurm_plugin.sim.trace import TraceJob, read_trace

SPEC = ClusterSpec(nodes=2, gpus_per_node=4)


def job(i, run_s, gpus, app):
    return TraceJob(job_id=str(i), submit_s=10.0 * i, duration_s=run_s, num_gpus=gpus, line=i,
                    app=app)


JOBS = [job(1, 3600.0, 1, "vgg16"), job(2, 1800.0, 2, "resnet18"), job(3, 7200.0, 4, "alexnet")]


def test_a_limit_the_oracle_keeps_to_gives_the_oracles_energy():
    spec = SPEC.resolved()
    oracle = oracle_metrics(JOBS, spec, load_carbon(None, "GB", 0.0), 0)
    assert energy_within_jct(JOBS, spec, 1e9) == pytest.approx(oracle["energy_kwh"], rel=1e-12)


def _best_by_trying_every_cap(jobs, spec, limit_s):
    opts = [cap_options(j.app, j.num_gpus, spec.gpu_type, spec.gpus_per_node,
                        spec.node_base_power_w, None) for j in jobs]
    best = None
    for pick in itertools.product(*opts):
        run_s = sum(slow * j.duration_s for (_, _, slow, _), j in zip(pick, jobs))
        if run_s <= len(jobs) * limit_s:
            e = sum(w * slow * j.duration_s for (w, _, slow, _), j in zip(pick, jobs)) / 3.6e6
            best = e if best is None else min(best, e)
    return best


@pytest.mark.parametrize("stretch", [1.0, 1.02, 1.1, 1.3])
def test_below_the_best_caps_found_by_trying_every_one_and_above_the_oracle(stretch):
    spec = SPEC.resolved()
    uncapped_avg_s = sum(j.duration_s for j in JOBS) / len(JOBS)
    limit_s = uncapped_avg_s * stretch
    got = energy_within_jct(JOBS, spec, limit_s)
    tried = _best_by_trying_every_cap(JOBS, spec, limit_s)
    unlimited = energy_within_jct(JOBS, spec, 1e9)
    assert got <= tried * (1 + 1e-9)
    assert got >= unlimited * (1 - 1e-12)
    if stretch == 1.0:      # no time to spend: only the caps that cost none, as uncapped runs
        assert got > unlimited * 1.001
        assert got == pytest.approx(tried, rel=0.02)


def test_no_schedule_meets_a_limit_below_the_fastest_runs():
    assert energy_within_jct(JOBS, SPEC, 100.0) is None


@pytest.mark.parametrize("case", range(6))
def test_no_policy_beats_the_bound_at_its_own_average_jct(tmp_path, case, make_trace):
    rng = random.Random(900 + case)
    spec = ClusterSpec(nodes=rng.randint(1, 3), gpus_per_node=rng.choice([2, 4]))
    jobs = read_trace(make_trace(tmp_path / "t.csv", rng, rng.randint(5, 40), spec.gpu_count),
                      "canonical")
    mix = class_mix("all")
    for policy in ("slurm-default", "slurm-powersave", "greenflow", "pal", "elastic"):
        r = Simulator(jobs, spec, get_policy(policy), seed=case,
                      carbon=load_carbon(None, "GB", jobs[0].submit_s)).run()
        bound = energy_within_jct(jobs, spec, r["avg_jct_s"], seed=case, mix=mix)
        assert bound is not None and r["energy_kwh"] >= bound * (1 - 1e-9), policy
