"""Configuration models: shapes the fitted models must have, the class mapping, bad input."""

from __future__ import annotations

import pytest

from slurm_plugin.errors import ConfigError
from slurm_plugin.physics.classes import class_names
from slurm_plugin.physics.config_model import (CapFit, ScalingFit, class_config_model,
                                               config_model, workload_names)


def test_every_measured_workload_loads_with_a_v100_cap_model():
    assert set(workload_names()) >= {"bert", "cifar10", "deepspeech2", "imagenet", "ncf"}
    for w in workload_names():
        m = config_model(w)
        assert m.cap_fit("v100").max_cap_w == 250.0
        assert m.samples_per_s(1, 64) > 0


@pytest.mark.parametrize("w", ["imagenet", "cifar10", "bert", "deepspeech2"])
def test_more_gpus_more_throughput_but_sublinear_across_nodes(w):
    m = config_model(w)
    b = 32
    one, four, sixteen = (m.samples_per_s(g, b * g, gpus_per_node=4) for g in (1, 4, 16))
    assert one < four < sixteen
    assert sixteen < 16 * one                 # sync costs something
    # the same 8 GPUs on one node are no slower than spread over two
    assert m.samples_per_s(8, 8 * b, gpus_per_node=8) >= m.samples_per_s(8, 8 * b,
                                                                          gpus_per_node=4)


@pytest.mark.parametrize("w", workload_names())
def test_a_lower_cap_is_slower_and_draws_less(w):
    m = config_model(w)
    caps = (None, 225.0, 175.0, 125.0, 100.0)
    thr = [m.samples_per_s(1, 256, c) for c in caps]
    pw = [m.power_per_gpu_w(1, 256, c) for c in caps]
    assert all(a >= b for a, b in zip(thr, thr[1:])), thr
    assert all(a >= b - 1e-9 for a, b in zip(pw, pw[1:])), pw
    assert pw[-1] <= 100.0 + 1e-6               # never above the cap
    assert m.speedup(1, 256, None) == pytest.approx(1.0)
    if m.power_per_gpu_w(1, 256) > 110.0:      # a cap under the job's draw slows it
        assert m.speedup(1, 256, 100.0) < 1.0
    else:                                     # ncf draws ~40 W: a 100 W cap changes nothing
        assert m.speedup(1, 256, 100.0) == pytest.approx(1.0)


def test_cap_below_the_settable_range_is_clamped():
    fit = config_model("imagenet").cap_fit("V100")
    assert fit.slowdown(128, 10.0) == fit.slowdown(128, fit.min_cap_w)
    assert fit.slowdown(128, 400.0) == 1.0


def test_multi_gpu_power_falls_with_sync_share():
    m = config_model("imagenet")
    assert m.power_per_gpu_w(16, 16 * 20, gpus_per_node=4) < m.power_per_gpu_w(1, 20)


def test_perseus_gpu_models_serve_any_workload():
    m = config_model("imagenet")
    assert m.cap_fit("a100").max_cap_w >= 300
    assert m.samples_per_s(1, 64, 200.0, gpu_model="A100") < m.samples_per_s(1, 64, None,
                                                                             gpu_model="A100")


def test_every_job_class_has_a_model_and_says_whether_measured():
    for name in class_names():
        c = class_config_model(name)
        assert c.note.split(":")[0] in ("measured", "nearest"), c.note
    assert class_config_model("resnet18").measured
    assert class_config_model("resnet18").model.name == "cifar10"
    vgg = class_config_model("VGG16")
    assert not vgg.measured and vgg.model.name == "imagenet" and "nearest" in vgg.note


def test_unknown_names_raise_naming_key_and_value():
    with pytest.raises(ConfigError, match=r"workload = 'gpt5'.*measured: bert"):
        config_model("gpt5")
    with pytest.raises(ConfigError, match=r"app = 'tetris'"):
        class_config_model("tetris")
    with pytest.raises(ConfigError, match=r"gpu_type = 'K80'.*V100"):
        config_model("ncf").cap_fit("K80")


def test_formulas():
    s = ScalingFit(0.1, 0.01, 0.02, 0.0, 0.2, 0.01, 1.0)
    assert s.step_time_s(1, 10) == pytest.approx(0.2)
    assert s.step_time_s(2, 10, nodes=1) == pytest.approx(0.22)
    assert s.step_time_s(4, 10, nodes=2) == pytest.approx(0.2 + 0.22)
    c = CapFit(100.0, 800.0, 200.0, 0.0, 1.0, 1000.0, 0.5, 1.0, 250.0, 100.0)
    assert c.full_time_s(8) == pytest.approx(200.0)
    assert c.power_w(8, 100.0) == pytest.approx(100.0, abs=0.1)
    assert c.slowdown(8, 100.0) == pytest.approx(1.5)
