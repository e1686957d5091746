"""The fitted physics: shapes the simulator and the policies rely on."""

from __future__ import annotations

import pytest

from slurm_plugin.errors import ConfigError, InputError
from slurm_plugin.physics import (assign_class, cap_settings_w, cap_slowdown, capped_power_w,
                                  class_names, colocated_slowdown, gpu_power_w, group_slowdowns,
                                  idle_power_w, job_class, max_power_w, shared_gpu_power_w,
                                  shared_gpu_util)
from slurm_plugin.physics.classes import class_mix
from slurm_plugin.physics.constants import constants
from slurm_plugin.physics.variability import load_profile
from slurm_plugin.policy.oracle import energy_bound


def test_power_rises_with_utilisation_from_idle_and_respects_the_cap():
    powers = [gpu_power_w(u) for u in range(0, 101, 10)]
    assert powers[0] == pytest.approx(idle_power_w())
    assert all(a < b for a, b in zip(powers, powers[1:]))
    assert powers[-1] <= max_power_w()
    assert gpu_power_w(100, power_cap_w=150) == 150
    assert gpu_power_w(-5) == gpu_power_w(0) and gpu_power_w(500) == gpu_power_w(100)


def test_unknown_gpu_model_names_the_fitted_ones():
    with pytest.raises(ConfigError, match="V100"):
        gpu_power_w(50, model="Z9000")


def test_cap_slows_a_job_only_below_its_power_and_saves_power():
    assert cap_slowdown(200, None) == 1.0
    assert cap_slowdown(200, 250) == 1.0
    assert cap_slowdown(200, 150) > 1.0 > 0
    assert cap_slowdown(200, 100) > cap_slowdown(200, 150)
    assert capped_power_w(200, 150) == 150
    caps = cap_settings_w()
    assert caps[0] == constants()["gpu_models"]["V100"]["min_power_cap_w"] and caps[-1] == max_power_w()


def test_class_table_carries_measured_fields_and_scaling():
    assert len(class_names()) == 8
    for name in class_names():
        c = job_class(name)
        assert 0 < c.util_pct <= 100 and c.power_w > idle_power_w() and c.memory_mib > 0
        assert c.speedup(1) == 1.0 and c.speedup(8) > c.speedup(2)
        assert c.variability_class in "ABCD"
        assert c.power_at(c.measured_gpus) == pytest.approx(c.power_w)
    with pytest.raises(InputError, match="resnet18"):
        job_class("no-such-app")


def test_class_assignment_is_seeded_and_covers_the_classes():
    assert assign_class("42", 0) == assign_class("42", 0)
    drawn = {assign_class(str(i), 7) for i in range(400)}
    assert drawn == set(class_names())
    assert [assign_class(str(i), 1) for i in range(50)] != [assign_class(str(i), 2) for i in range(50)]


def test_class_mix_draws_only_its_classes_and_all_is_the_default():
    paper = class_mix("eaco-paper")
    assert paper.name == "eaco-paper" and paper.classes == ("alexnet", "resnet18", "vgg16")
    assert {assign_class(str(i), 7, paper) for i in range(300)} == set(paper.classes)
    every = class_mix("all")
    assert every.classes == class_names()
    assert [assign_class(str(i), 3, every) for i in range(200)] == \
        [assign_class(str(i), 3) for i in range(200)]
    # a list is a set: order, case and spaces do not change the draws
    listed = class_mix(" VGG16, alexnet,resnet18")
    assert listed.name == "alexnet,resnet18,vgg16" and listed.classes == paper.classes
    assert [assign_class(str(i), 0, listed) for i in range(100)] == \
        [assign_class(str(i), 0, paper) for i in range(100)]
    assert {assign_class(str(i), 0, class_mix("lstm")) for i in range(20)} == {"lstm"}


@pytest.mark.parametrize("spec, match", [
    ("alexnet,resnet-50", "'resnet-50' is not a known job class.*eaco-paper.*wavenet"),
    ("vgg16,alexnet,vgg16", "'vgg16' is named twice"),
    (" , ", "names no class"),
])
def test_bad_class_mix_names_the_class_and_the_choices(spec, match):
    with pytest.raises(InputError, match=match):
        class_mix(spec)


def test_measured_pairs_are_used_in_both_orders():
    sa, sb = constants()["pairs"]["vgg16|vgg16"]
    assert colocated_slowdown("vgg16", "vgg16") == pytest.approx((1 / sa, 1 / sb))
    ab = colocated_slowdown("lstm", "resnet18")
    ba = colocated_slowdown("resnet18", "lstm")
    assert ab == pytest.approx(ba[::-1])


def test_fitted_model_slows_busier_partners_more():
    light = colocated_slowdown("wavenet", "alexnet")[0]
    heavy = colocated_slowdown("wavenet", "nas")[0]
    assert 1.0 <= light < heavy
    assert group_slowdowns(["nas"]) == (1.0,)
    three = group_slowdowns(["nas", "aps", "wavenet"])
    assert all(s >= p for s, p in zip(three, group_slowdowns(["nas", "aps"]) + (1.0,)))


def test_shared_gpu_util_and_power():
    assert shared_gpu_util([60, 70], [1, 1]) == 100
    assert shared_gpu_util([30, 20], [0.5, 0.5]) == pytest.approx(25)
    idle = idle_power_w()
    assert shared_gpu_power_w([], []) == pytest.approx(idle)
    assert shared_gpu_power_w([100, 50], [0.5, 1.0]) == pytest.approx(idle + 100)
    assert shared_gpu_power_w([500, 500], [1, 1]) == max_power_w()
    assert shared_gpu_power_w([100, 100], [1, 1], power_cap_w=120) == 120


def test_oracle_bound_is_below_the_uncapped_exclusive_energy():
    for name in class_names():
        b = energy_bound(name, 1, 3600)
        solo = job_class(name).power_at(1) * 3600
        assert 0 < b.energy_j < solo + 400 / 8 * 3600
        assert b.duration_s >= 3600


@pytest.mark.parametrize("gpus, limit", [(1, None), (4, None), (8, 2), (2, 4)])
def test_oracle_bound_takes_the_cap_of_least_energy_whatever_the_run_length(gpus, limit):
    """The cap is chosen once per job shape: energy is power x slowdown x run, so the best cap
    of a 60 s run is that of a week's; each is checked against every cap tried by hand."""
    from slurm_plugin.physics import idle_power_w, job_class, node_base_power_w
    for name in class_names():
        cls, idle = job_class(name), idle_power_w()
        p0, share = cls.power_at(gpus), cls.util_at(gpus) / 100
        if limit:
            share = max(share, 1 / limit)
        for run_s in (60.0, 3600.0, 7 * 86400.0):
            b = energy_bound(name, gpus, run_s, max_jobs_per_gpu=limit)
            by_cap = []
            for cap in (None,) + cap_settings_w():
                slow = cap_slowdown(p0, cap)
                gpu_w = capped_power_w(p0, cap) - idle + share * idle
                by_cap.append(gpus * (gpu_w + share * node_base_power_w() / 8) * slow * run_s)
            assert b.energy_j == pytest.approx(min(by_cap), rel=1e-12), (name, gpus, run_s)
            assert b.duration_s == pytest.approx(run_s * cap_slowdown(p0, b.power_cap_w))
            assert b.energy_j == pytest.approx(b.power_w * b.duration_s)


def test_builtin_variability_profile():
    p = load_profile(None)
    f = p.factors(40, seed=3)
    assert len(f) == 40 and set(f[0]) == {"A", "B", "C", "D"}
    assert f == p.factors(40, seed=3) and f != p.factors(40, seed=4)


def test_bad_variability_file_names_line_and_field(tmp_path):
    bad = tmp_path / "v.csv"
    bad.write_text("PerfVar_classA,PerfVar_classB,PerfVar_classC,PerfVar_classD\n1,1,x,1\n")
    with pytest.raises(InputError, match=r"line 2: field PerfVar_classC"):
        load_profile(bad)


VAR_HEAD = "node,gpu_index,PerfVar_classA,PerfVar_classB,PerfVar_classC,PerfVar_classD\n"


@pytest.mark.parametrize("value,why", [
    ("nan", r"'nan' is not a finite number; give the GPU's time multiplier"),
    ("inf", r"'inf' is not a finite number"),
    ("-inf", r"'-inf' is not a finite number"),
    ("0", r"0 must be positive"),
    ("1e6", r"1e6 is outside 0.1-10: a GPU 1e\+06x slower than the median one is not "
            r"plausible .*; re-measure the GPU or leave its row out"),
    ("10.5", r"10.5 is outside 0.1-10"),
    ("0.05", r"0.05 is outside 0.1-10: a GPU 20x faster"),
])
def test_variability_factors_must_be_finite_and_plausible(tmp_path, value, why):
    """A NaN or infinite factor would change every simulated run on that GPU without a word."""
    bad = tmp_path / "v.csv"
    bad.write_text(VAR_HEAD + "n0,0,1,1,1,1\nn0,1,1,1,1,1\n"
                   f"n0,2,{value},1,1,1\n")
    with pytest.raises(InputError, match=rf"variability: {bad}: line 4: field PerfVar_classA: "
                                         + why):
        load_profile(bad)


def test_variability_limits_keep_the_measured_profiles_and_the_extremes(tmp_path):
    ok = tmp_path / "v.csv"
    ok.write_text(VAR_HEAD + "n0,0,0.1,10,1,1\n")
    assert load_profile(ok).rows == ((0.1, 10.0, 1.0, 1.0),)
    assert all(0.9 < f < 1.2 for r in load_profile(None).rows for f in r)


def test_variability_profile_with_a_byte_order_mark(tmp_path):
    """Excel writes one: the first column is still PerfVar_classA."""
    p = tmp_path / "bom.csv"
    p.write_text("PerfVar_classA,PerfVar_classB,PerfVar_classC,PerfVar_classD,Node_ID,"
                 "Local_GPU_ID\n1.1,1,1,1,0,3\n", encoding="utf-8-sig")
    assert load_profile(p).by_gpu() == {("0", 3): (1.1, 1.0, 1.0, 1.0)}


def test_variability_profile_columns_match_in_any_case(tmp_path):
    p = tmp_path / "lower.csv"
    p.write_text("perfvar_classa,PERFVAR_CLASSB,PerfVar_ClassC,perfvar_classd,node_id,"
                 "local_gpu_id\n1.1,1,1,1,0,3\n")
    assert load_profile(p).by_gpu() == {("0", 3): (1.1, 1.0, 1.0, 1.0)}
