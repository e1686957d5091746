"""The forecast part of ``wattctl carbon budget``: power held to the end of the period."""

from __future__ import annotations

import pytest

from slurm_plugin.report.carbon_budget import rest_of_period_g


def test_power_times_the_intensity_in_force_over_each_stretch():
    # 1 kW for 1 h at 100 g/kWh, then 1 h at 300 g/kWh: 400 g
    assert rest_of_period_g(1000.0, 100.0, ((3600.0, 300.0),), 0.0, 7200.0) == pytest.approx(400)
    # a point past the end does not count; the last one before it holds to the end
    fc = ((1800.0, 200.0), (9000.0, 999.0))
    assert rest_of_period_g(2000.0, 100.0, fc, 0.0, 3600.0) == pytest.approx(100 + 200)


def test_no_intensity_known_yet_counts_from_the_first_forecast_point():
    assert rest_of_period_g(1000.0, None, ((1800.0, 100.0),), 0.0, 3600.0) == pytest.approx(50)
    assert rest_of_period_g(1000.0, None, (), 0.0, 3600.0) == 0.0
    assert rest_of_period_g(0.0, 500.0, (), 0.0, 3600.0) == 0.0


def test_pacing_is_greenflows_last_pass_in_the_period():
    from slurm_plugin.policy.greenflow.observe import (FLOOR_G, LAST_S, LIMIT_USE, OWED_G,
                                                       PERIOD_START_S, WEIGHT, account_weight_key)
    from slurm_plugin.report.carbon_budget import pacing
    hist = {LAST_S: 1000.0, PERIOD_START_S: 0.0, OWED_G: 2500.0, WEIGHT: 0.75,
            account_weight_key("physics"): 1.0, LIMIT_USE: 0.4, FLOOR_G: 1200.0}
    assert pacing(hist, {"physics": 1.0, "bio": 2.0}, 0.0) == {
        "at_s": 1000.0, "owed_kg": 2.5, "limit_use": 0.4, "floor_kg": 1.2, "weight": 0.75,
        "accounts": {"bio": None, "physics": 1.0}}
    assert pacing(hist, {}, 86400.0) is None        # its last pass was in another period
    assert pacing({}, {}, 0.0) is None              # no pass yet


def test_the_floor_is_the_spend_plus_the_owed_work_at_its_least_in_the_cleanest_hour():
    from slurm_plugin.physics import cap_settings_w, cap_slowdown, capped_power_w, job_class
    from slurm_plugin.policy.greenflow.observe import floor_g, least_work_power_w
    least = least_work_power_w(("V100",))
    # no class and cap does a GPU-second of work for less
    for app in ("vgg16", "resnet18", "alexnet"):
        p0 = job_class(app).power_at(1, "V100")
        for cap in (None, *cap_settings_w("V100")):
            assert capped_power_w(p0, cap, "V100") * cap_slowdown(p0, cap, "V100") >= least
    forecast = ((3600.0, 300.0), (7200.0, 80.0), (90_000.0, 10.0))   # the last is past the end
    got = floor_g(500.0, 3.6e6, ("V100",), 200.0, forecast, 0.0, 86_400.0)
    assert got == pytest.approx(500.0 + 3.6e6 * least / 3.6e6 * 80.0)
    assert floor_g(500.0, 0.0, ("V100",), None, (), 0.0, 1.0) == 500.0
