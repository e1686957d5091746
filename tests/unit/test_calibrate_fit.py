"""The calibration fit (physics/calibrate_fit.py): known constants come back from samples that
follow the physics' forms, noisy samples within their noise, and readings no GPU gives are
refused with the reason."""

from __future__ import annotations

import pytest
from calibrate_fakes import synthetic_result

from slurm_plugin.commands.calibrate_run import measurement
from slurm_plugin.physics.calibrate_fit import CalibrationError, fit
from slurm_plugin.physics.power import cap_slowdown, gpu_power_w

CASES = [
    dict(idle_w=70.0, dynamic_w=300.0, gamma=0.9, beta=0.7, min_w=150.0, max_w=500.0),
    dict(idle_w=41.44, dynamic_w=185.57, gamma=0.75, beta=0.45, min_w=100.0, max_w=250.0),
    dict(idle_w=25.0, dynamic_w=120.0, gamma=1.6, beta=1.2, min_w=60.0, max_w=300.0),
]


def _values(cal) -> dict[str, float]:
    return {k: c.value for k, c in cal.constants.items()}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"gamma{c['gamma']}")
def test_known_constants_come_back_within_one_percent(case):
    cal = fit(measurement(synthetic_result(**case)))
    got = _values(cal)
    want = {"idle_power_w": case["idle_w"], "dynamic_power_w": case["dynamic_w"],
            "util_gamma": case["gamma"], "cap_beta": case["beta"],
            "min_power_cap_w": case["min_w"], "max_power_w": case["max_w"]}
    assert got == pytest.approx(want, rel=0.01)
    assert cal.curve_rmse_w < 1e-6 and cal.cap_rmse < 1e-6
    assert cal.constants["idle_power_w"].how.startswith("mean of 4 readings of idle GPUs")


def test_the_samples_are_what_the_physics_computes_with_those_constants():
    """The synthetic forms are physics/power.py's: a check on the test's own generator."""
    from slurm_plugin.physics.constants import gpu_constants
    c = gpu_constants("V100")
    r = synthetic_result(idle_w=c["idle_power_w"], dynamic_w=c["dynamic_power_w"],
                         gamma=c["util_gamma"], beta=c["cap_beta"], min_w=c["min_power_cap_w"],
                         max_w=c["max_power_w"])
    for p in r["loads"]:
        assert p["power_w"] == pytest.approx(min(c["max_power_w"], gpu_power_w(p["util_pct"])))
    for k in r["caps"]:
        assert k["time_s"] / r["workload_time_s"] == pytest.approx(
            cap_slowdown(r["workload_power_w"], k["power_limit_w"]))


def test_load_scales_are_divided_out_and_idle_comes_from_the_intercept_without_idle_gpus():
    case = CASES[0]
    scales = [1.45, 0.59, 0.9, 1.1, 0.8, 1.2, 0.95, 0.7]
    cal = fit(measurement(synthetic_result(**case, scales=scales, idle_reads=0)))
    got = _values(cal)
    assert got["idle_power_w"] == pytest.approx(case["idle_w"], rel=0.01)
    assert got["dynamic_power_w"] == pytest.approx(case["dynamic_w"], rel=0.01)
    assert got["util_gamma"] == pytest.approx(case["gamma"], rel=0.01)
    assert "intercept of the power curve" in cal.constants["idle_power_w"].how
    # the scales ignored, these readings are no curve at all: the scale matters
    plain = [{**p, "load_scale": 1.0} for p in synthetic_result(**case, scales=scales)["loads"]]
    with pytest.raises(CalibrationError, match="power falls as utilisation rises"):
        fit(measurement({**synthetic_result(**case, scales=scales), "loads": plain}))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_noisy_samples_stay_within_their_noise(seed):
    case = CASES[0]
    cal = fit(measurement(synthetic_result(**case, noise=0.01, seed=seed)))
    got = _values(cal)
    assert got["idle_power_w"] == pytest.approx(case["idle_w"], rel=0.02)
    assert got["dynamic_power_w"] == pytest.approx(case["dynamic_w"], rel=0.05)
    assert got["util_gamma"] == pytest.approx(case["gamma"], rel=0.08)
    assert got["cap_beta"] == pytest.approx(case["beta"], rel=0.1)
    # the errors say how far off it may be: each within three standard errors
    for name, want in (("dynamic_power_w", case["dynamic_w"]), ("util_gamma", case["gamma"])):
        c = cal.constants[name]
        assert c.error is not None and c.error > 0
        assert abs(c.value - want) < 3 * c.error + 0.01 * want, (name, c)
    assert 0 < cal.curve_rmse_w < 0.05 * case["max_w"]


def _bad(**change) -> dict:
    r = synthetic_result(**CASES[0])
    for key, value in change.items():
        r[key] = value
    return r


@pytest.mark.parametrize("result, reason", [
    (_bad(loads=[{**p, "power_w": 620.0} if p["util_pct"] == 60 else p
                 for p in synthetic_result(**CASES[0])["loads"]]),
     r"load 60%: power 620.0 W is above the power limit 500 W"),
    (_bad(idle_w=[300.0] * 4), r"idle power 300.0 W is above the power under load 5%"),
    (_bad(loads=synthetic_result(**CASES[0])["loads"][:1]),
     r"1 load levels of distinct utilisation .* too few to fit the power curve"),
    (_bad(loads=synthetic_result(**CASES[0], utils=(5.0, 30.0))["loads"], idle_w=[]),
     r"too few to fit the power curve \(at least 3, without an idle GPU"),
    (_bad(loads=[{**p, "power_w": 400.0 - p["util_pct"] * 3}
                 for p in synthetic_result(**CASES[0])["loads"]]),
     r"power falls as utilisation rises"),
    (_bad(min_limit_w=600.0), r"lowest power limit 600 W is above the uncapped one 500 W"),
    (_bad(caps=[{**c, "time_s": 1.0} for c in synthetic_result(**CASES[0])["caps"]]),
     r"ran faster under a 456.25 W limit \(1.000 s\) than uncapped \(2.000 s\)"),
    (_bad(caps=[{**c, "time_s": 2.0 + c["power_limit_w"] / 100}
                for c in synthetic_result(**CASES[0])["caps"]]),
     r"ran faster under a lower limit"),
    (_bad(workload_time_s=float("nan")), r"took nan s uncapped: not a time"),
    (_bad(max_limit_w=-1.0), r"power limits read as -1.0 W"),
])
def test_nonsense_is_refused_with_the_reason(result, reason):
    with pytest.raises(CalibrationError, match=reason):
        fit(measurement(result))


def test_a_workload_below_every_cap_leaves_cap_beta_unmeasured_with_a_note():
    r = synthetic_result(**{**CASES[0], "min_w": 450.0})      # caps 450-494 W, above P0
    cal = fit(measurement(r))
    assert "cap_beta" not in cal.constants and cal.cap_rmse is None
    assert any(n.startswith("cap_beta not measured: 0 of the limits tried lie below")
               for n in cal.notes)


def test_levels_at_the_limit_are_left_out_of_the_curve():
    r = synthetic_result(**{**CASES[0], "max_w": 330.0})
    cal = fit(measurement(r))
    assert cal.constants["dynamic_power_w"].value == pytest.approx(300.0, rel=0.01)
    assert any("at the power limit" in n for n in cal.notes)


def test_a_result_that_is_not_a_calibration_is_named():
    r = synthetic_result()
    del r["caps"]
    with pytest.raises(CalibrationError, match="not a calibration .*caps"):
        measurement(r)


# ---- the co-located pair (physics/calibrate_pairs.py) ----------------------------------------
def test_the_pair_gives_k_k_mps_and_the_classes_pair_beside_the_rest():
    from calibrate_fakes import pair_samples

    from slurm_plugin.commands.calibrate_run import colocation
    from slurm_plugin.physics import gpu_models as gm
    gm.use_site_models("")
    try:
        model = "H100-80GB-HBM3"
        r = {**synthetic_result(**CASES[0], model=model), "pair": pair_samples(model)}
        cal = fit(measurement(r), colocation(model))
        got = _values(cal)
        assert got["interference_k"] == pytest.approx(0.6, rel=1e-9)
        assert got["interference_k_mps"] == pytest.approx(0.6, rel=1e-9)
        assert got["colocation_pairs"]["aps|aps"] == pytest.approx([1 / 1.2362] * 2, rel=1e-4)
        assert got["cap_beta"] == pytest.approx(CASES[0]["beta"], rel=0.01)
        assert not any("not measured" in n for n in cal.notes)
        # the same result without its pair: the rest is fitted, the pair's constants noted
        cal = fit(measurement(synthetic_result(**CASES[0], model=model)), colocation(model))
        assert "interference_k" not in cal.constants and "cap_beta" in cal.constants
        assert [n.split(":")[0] for n in cal.notes if "not measured" in n] == [
            "interference_k and colocation_pairs not measured", "interference_k_mps not measured"]
        # a pair slower than 4x: the whole fit is refused (nothing is written then)
        slow = [{**p, "pair_time_s": 9.0} for p in pair_samples(model)]
        with pytest.raises(CalibrationError, match="time-sliced pair ran 4.500 times slower"):
            fit(measurement({**r, "pair": slow}), colocation(model))
    finally:
        gm.use_site_models(None)
