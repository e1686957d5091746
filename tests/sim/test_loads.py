"""Policies at three loads beside their bounds (``sim/loads.py``, ``simulate --loads``): the
loads are found where the wait says, the range minimum and the carbon floor are exact on small
cases, and no policy beats a bound at any load."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_plugin.cli import group
from slurm_plugin.physics.classes import class_mix
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.registry import builtin_policy_names
from slurm_plugin.sim.carbon import load_carbon
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.loads import (HOUR_S, IDLE_WAIT_S, bounds_at, captured, carbon_floor_kg,
                                    choose_loads)
from slurm_plugin.sim.shared_bound import shared_energy_bound_kwh
from slurm_plugin.sim.trace import TraceJob, read_trace


def test_loads_follow_a_steady_wait():
    def wait_at(n):                    # 400 h at 2 nodes, halving with every 4 more
        return 400 * HOUR_S * 0.5 ** ((n - 2) / 4) if n < 60 else 0.0
    loads, missing = choose_loads(wait_at, 2, 8)
    got = {ld.name: ld for ld in loads}
    assert missing == []
    assert got["idle"].wait_s <= IDLE_WAIT_S and wait_at(got["idle"].nodes - 1) > IDLE_WAIT_S
    assert 2 * HOUR_S <= got["busy"].wait_s <= 5 * HOUR_S
    assert 24 * HOUR_S <= got["overloaded"].wait_s <= 60 * HOUR_S


def test_a_wait_that_jumps_about_still_gives_loads_in_their_bands():
    rng = random.Random(3)
    table = {n: (0.0 if n >= 40 else rng.choice([0.5, 2.5, 7, 30, 90, 300]) * HOUR_S)
             for n in range(1, 200)}
    loads, _ = choose_loads(table.__getitem__, 1, 16)
    for ld in loads:
        if ld.name == "busy":
            assert HOUR_S <= ld.wait_s <= 8 * HOUR_S
        if ld.name == "overloaded":
            assert ld.wait_s >= 24 * HOUR_S


def test_a_light_trace_says_which_load_it_cannot_make():
    loads, missing = choose_loads(lambda n: 0.0 if n > 3 else 0.5 * HOUR_S, 2, 8)
    assert [ld.name for ld in loads] == ["idle"]
    assert len(missing) == 2 and missing[0].startswith("busy: no cluster of 2 to 4 nodes")


def test_captured_share():
    assert captured(100.0, 60.0, 20.0) == pytest.approx(0.5)
    assert captured(100.0, 120.0, 20.0) == pytest.approx(-0.25)
    assert captured(100.0, 90.0, 100.0) is None


@pytest.mark.parametrize("case", range(10))
def test_no_policy_beats_a_bound_at_any_load(tmp_path, case, make_trace):
    """Every registered policy and the full stack: capped (greenflow), shared (eaco, gandiva),
    placed (pal) and resized (elastic, ones) schedules all stay above each bound; the carbon
    floor at the end of the latest schedule of the load."""
    rng = random.Random(4_000 + case)
    spec = ClusterSpec(nodes=rng.randint(1, 3), gpus_per_node=rng.choice([2, 4]))
    jobs = read_trace(make_trace(tmp_path / "t.csv", rng, rng.randint(5, 40), spec.gpu_count),
                      "canonical")
    carbon = load_carbon(None, "GB", jobs[0].submit_s)
    mix = class_mix("all")
    b = bounds_at(jobs, spec, carbon, seed=case, mix=mix, max_jobs_per_gpu=4)
    names = [n for n in builtin_policy_names() if n not in ("oracle-bound", "baseline")]
    runs = [Simulator(jobs, spec, get_policy(p), seed=case, carbon=carbon,
                      settings={"allow_share": True}).run()
            for p in [*names, "pal+eaco+greenflow+elastic"]]
    end_s = jobs[0].submit_s + max(r["makespan_s"] for r in runs)
    floor = carbon_floor_kg(jobs, b["least_kwh"], carbon, end_s, spec.gpu_count, 4)
    for r in runs:
        name = r["policy"]
        assert r["energy_kwh"] >= b["energy_kwh"] * (1 - 1e-9), name
        assert r["carbon_kg"] >= floor * (1 - 1e-9), name
        if r["jobs_timed_out"]:
            continue            # a job killed at its limit ends sooner than its run could
        for m in ("avg_jct_s", "p99_jct_s", "makespan_s"):
            assert r[m] >= b[m] - 1e-6, (name, m)
        assert r["geomean_jct_s"] >= b["geomean_jct_s"] * (1 - 1e-9), name


class _Hours:
    hourly = [300.0, 100.0, 200.0]
    origin_s = 0.0


def _job(name, submit_s, run_s):
    return TraceJob(job_id=name, submit_s=submit_s, duration_s=run_s, num_gpus=1, line=1)


def test_the_energy_bound_prices_interference_and_says_where_it_cannot():
    jobs = [_job("a", 0.0, HOUR_S), _job("b", 60.0, HOUR_S)]
    spec = ClusterSpec(nodes=1, gpus_per_node=2)
    got = bounds_at(jobs, spec, None, seed=0, mix=class_mix("all"), max_jobs_per_gpu=4)
    assert got["energy_note"] is None
    assert got["energy_kwh"] == pytest.approx(shared_energy_bound_kwh(
        jobs, spec, seed=0, mix=class_mix("all"), max_jobs_per_gpu=4))
    batched = [TraceJob(job_id=j.job_id, submit_s=j.submit_s, duration_s=j.duration_s,
                        num_gpus=1, line=1, batch_size=64) for j in jobs]
    got = bounds_at(batched, spec, None, seed=0, mix=class_mix("all"), max_jobs_per_gpu=4)
    assert "energy bound: the oracle's within the share limit" in got["energy_note"]
    assert "batch sizes" in got["energy_note"] and got["energy_kwh"] > 0


def test_the_carbon_floor_takes_the_cleanest_hour_each_job_can_reach():
    a, b = _job("a", 0.0, 60.0), _job("b", 2 * HOUR_S + 5, 60.0)
    # a may run in hours 0..2 (cleanest 100); b only in hour 2 (200), the window ending there
    assert carbon_floor_kg([a, b], [1.0, 2.0], _Hours, 2 * HOUR_S + 10, 1) == pytest.approx(
        (1.0 * 100 + 2.0 * 200) / 1000)
    # a later end lets b wrap into the next week's hour 1
    assert carbon_floor_kg([a, b], [1.0, 2.0], _Hours, 5 * HOUR_S, 1) == pytest.approx(0.3)


def test_the_carbon_floor_keeps_to_the_capacity():
    """Two hour-long jobs on one GPU submitted together: one runs in the cleanest hour (100),
    the other in the next cleanest it can reach (200 or, in hour 0, 300)."""
    a, b = _job("a", 0.0, HOUR_S), _job("b", 0.0, HOUR_S)
    got = carbon_floor_kg([a, b], [1.0, 1.0], _Hours, 3 * HOUR_S, 1)
    assert got == pytest.approx((100 + 200) / 1000)
    assert carbon_floor_kg([a, b], [1.0, 1.0], _Hours, 3 * HOUR_S, 2) == pytest.approx(0.2)
    # a job needing more per unit of work keeps the cleanest hour's excess for itself
    assert carbon_floor_kg([a, b], [1.0, 3.0], _Hours, 3 * HOUR_S, 1) == pytest.approx(
        (2.0 * 100 + 1.0 * (100 + 200)) / 1000)


def test_simulate_loads_prints_each_load_with_bounds_and_json():
    small = Path(__file__).parent / "golden" / "small_trace.csv"
    args = ["simulate", "--trace", str(small), "--trace-format", "canonical",
            "--gpus-per-node", "4", "--compare", "slurm-powersave,eaco,greenflow",
            "--loads", "4,2"]
    res = CliRunner().invoke(group, [*args, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [ld["nodes"] for ld in out["loads"]] == [4, 2]
    for ld in out["loads"]:
        assert [r["policy"] for r in ld["results"]] == ["slurm-powersave", "eaco", "greenflow"]
        for r in ld["results"]:
            assert r["energy_kwh"] >= ld["bounds"]["energy_kwh"]
            assert r["captured"]["energy_kwh"] is None or r["captured"]["energy_kwh"] <= 1
        assert ld["results"][0]["captured"]["energy_kwh"] == 0.0
    text = CliRunner().invoke(group, args)
    assert text.exit_code == 0 and "bound" in text.stdout and "fluid ref" in text.stdout
    bad = CliRunner().invoke(group, [*args[:-2], "--loads", "0,x"])
    assert bad.exit_code != 0 and "--loads" in bad.output
    both = CliRunner().invoke(group, [*args, "--nodes", "3"])
    assert both.exit_code != 0 and "leave out --nodes" in both.output
