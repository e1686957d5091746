"""GreenFlow's predictor: JCT, energy and carbon under a (start, GPUs, cap) choice."""

from __future__ import annotations

import pytest

from slurm_plugin.errors import InputError
from slurm_plugin.physics.classes import job_class
from slurm_plugin.policy.greenflow.predict import (CarbonCurve, Choice, JobProfile, predict)

H = 3600.0


def test_carbon_curve_is_a_step_function():
    c = CarbonCurve(100.0, ((H, 300.0), (2 * H, 50.0)))
    assert c.gco2_per_kwh_at(0) == 100.0 and c.gco2_per_kwh_at(H) == 300.0
    assert c.mean_gco2_per_kwh(0, 2 * H) == pytest.approx(200.0)
    assert c.mean_gco2_per_kwh(1.5 * H, 3 * H) == pytest.approx((0.5 * 300 + 50) / 1.5)
    assert c.mean_gco2_per_kwh(5 * H, 5 * H) == 50.0
    with pytest.raises(InputError, match="time_s=3600.0.*ascending"):
        CarbonCurve(1.0, ((H, 1.0), (H, 2.0)))


def test_reference_choice_reproduces_the_reference_run_and_class_power():
    job = JobProfile("vgg16", ref_run_s=2 * H, ref_gpus=8)
    p = predict(job, Choice(0.0, 8), submit_s=0.0, carbon=CarbonCurve(200.0))
    assert p.run_s == pytest.approx(2 * H)
    assert p.power_w == pytest.approx(8 * job_class("vgg16").power_at(8))
    assert p.carbon_g == pytest.approx(p.energy_j / 3.6e6 * 200.0)
    assert "nearest" in p.model_note and "imagenet" in p.model_note


def test_waiting_for_clean_power_trades_jct_for_carbon():
    curve = CarbonCurve(400.0, ((4 * H, 100.0),))
    job = JobProfile("resnet18", ref_run_s=H)
    now = predict(job, Choice(0.0, 1), 0.0, curve)
    later = predict(job, Choice(4 * H, 1), 0.0, curve)
    assert later.carbon_g == pytest.approx(now.carbon_g / 4)
    assert later.jct_s == pytest.approx(now.jct_s + 4 * H)


def test_cap_and_gpu_count_move_run_time_and_power():
    curve = CarbonCurve(300.0)
    job = JobProfile("lstm", ref_run_s=10 * H, ref_gpus=1)       # draws ~184 W alone
    base = predict(job, Choice(0.0, 1), 0.0, curve)
    capped = predict(job, Choice(0.0, 1, 100.0), 0.0, curve)
    wide = predict(job, Choice(0.0, 4), 0.0, curve)
    assert capped.run_s > base.run_s and capped.power_w <= 100.0 < base.power_w
    assert wide.run_s < base.run_s and wide.power_w > base.power_w


def test_a_cap_above_the_class_draw_does_not_slow_it():
    # transformer draws ~74 W on one GPU; its stand-in model (BERT) draws ~220 W
    job = JobProfile("transformer", ref_run_s=H, ref_gpus=1)
    base = predict(job, Choice(0.0, 1), 0.0, CarbonCurve(300.0))
    capped = predict(job, Choice(0.0, 1, 100.0), 0.0, CarbonCurve(300.0))
    assert base.power_w < 100.0
    assert capped.run_s == pytest.approx(base.run_s) and capped.power_w == pytest.approx(
        base.power_w)
