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
    from slurm_plugin.policy.greenflow.observe import (LAST_S, LIMIT_USE, OWED_G, PERIOD_START_S,
                                                       WEIGHT, account_weight_key)
    from slurm_plugin.report.carbon_budget import pacing
    hist = {LAST_S: 1000.0, PERIOD_START_S: 0.0, OWED_G: 2500.0, WEIGHT: 0.75,
            account_weight_key("physics"): 1.0, LIMIT_USE: 0.4}
    assert pacing(hist, {"physics": 1.0, "bio": 2.0}, 0.0) == {
        "at_s": 1000.0, "owed_kg": 2.5, "limit_use": 0.4, "weight": 0.75,
        "accounts": {"bio": None, "physics": 1.0}}
    assert pacing(hist, {}, 86400.0) is None        # its last pass was in another period
    assert pacing({}, {}, 0.0) is None              # no pass yet
