"""Co-location slowdowns per GPU model and sharing mode (physics/colocation.py): the shipped
catalogue gives today's figures on every model; a site's calibrated k, MPS k and pair give one
model its own; MPS computes with k_mps and never the table measured time-sliced; the fit
recovers both ks exactly from the physics' own pairs; EaCO's predictor and the emulated GPUs
compute with the GPU's model (and a declared pair as two co-located jobs)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from calibrate_fakes import pair_samples

from slurm_plugin.errors import ConfigError
from slurm_plugin.model import Gpu, GpuUse, Job
from slurm_plugin.node.emulated import declared_pair, gpu_state, pair_app
from slurm_plugin.physics import class_names, colocated_slowdown, group_slowdowns, job_class
from slurm_plugin.physics import gpu_models as gm
from slurm_plugin.physics.calibrate_fit import CalibrationError
from slurm_plugin.physics.calibrate_pairs import Colocation, PairPoint, fit_pairs
from slurm_plugin.physics.constants import colocation_constants, constants

H100, V100 = "H100-80GB-HBM3", "V100-SXM2-32GB"
OWN = {"interference_k": 0.9, "interference_k_mps": 0.35}
OWN_PAIR = ("vgg16|vgg16", [0.5, 0.5])       # the V100 table says 0.36


@pytest.fixture(autouse=True)
def _shipped():
    gm.use_site_models("")
    yield
    gm.use_site_models(None)


def _own_h100(tmp_path: Path) -> None:
    """A site file giving the H100 its own k, MPS k and vgg16 pair."""
    table = {**gm.shipped()["models"][H100]["colocation_pairs"]["value"],
             OWN_PAIR[0]: OWN_PAIR[1]}
    body = {k: {"value": v, "source": "measured", "how": "test"} for k, v in OWN.items()}
    body["colocation_pairs"] = {"value": table, "source": "measured", "how": "test"}
    path = tmp_path / "site-gpus.json"
    path.write_text(json.dumps({"models": {"H100": body}}))
    gm.use_site_models(str(path))


def _today(a: str, b: str) -> tuple[float, float]:
    """The rule before models were passed: physics.json's V100 pairs and interference."""
    pairs, inter = constants()["pairs"], constants()["interference"]
    if f"{a}|{b}" in pairs:
        sa, sb = pairs[f"{a}|{b}"]
        return 1 / sa, 1 / sb
    if f"{b}|{a}" in pairs:
        sb, sa = pairs[f"{b}|{a}"]
        return 1 / sa, 1 / sb
    ua, ub = job_class(a).util_pct, job_class(b).util_pct
    over = max(0.0, (ua + ub) / 100 - inter["util_threshold"])
    return 1 + inter["k"] * ub / 100 * over, 1 + inter["k"] * ua / 100 * over


PAIRS = list(itertools.product(class_names(), repeat=2))


@pytest.mark.parametrize("model", [*gm.names(), "V100", "A100", "nvidia h100 80gb hbm3"])
def test_the_shipped_catalogue_gives_todays_slowdowns_on_every_model(model):
    for a, b in PAIRS:
        assert colocated_slowdown(a, b, model=model) == _today(a, b), (a, b)
        assert colocated_slowdown(a, b, model, "time-sliced") == colocated_slowdown(a, b)
    group = ["nas", "aps", "wavenet"]
    assert group_slowdowns(group, model=model) == group_slowdowns(group)


def test_mps_computes_with_k_mps_and_not_the_pairs_measured_time_sliced():
    k = colocation_constants(H100)["interference_k_mps"]
    u = job_class("vgg16").util_pct
    want = 1 + k * u / 100 * max(0.0, 2 * u / 100)
    assert colocated_slowdown("vgg16", "vgg16", H100, "mps") == (want, want)
    assert colocated_slowdown("vgg16", "vgg16", H100) == (1 / 0.36, 1 / 0.36)   # the table
    # a pair the table lacks: the shipped MPS k is the time-sliced one, so the same figure
    assert colocated_slowdown("aps", "nas", H100, "mps") == colocated_slowdown("aps", "nas")


def test_a_site_calibration_gives_one_model_its_own_slowdowns(tmp_path):
    before = colocated_slowdown("aps", "nas", H100)         # cached before the site file
    _own_h100(tmp_path)
    ua, ub = job_class("aps").util_pct, job_class("nas").util_pct
    over = (ua + ub) / 100
    for mode, k in (("time-sliced", OWN["interference_k"]), ("mps", OWN["interference_k_mps"])):
        assert colocated_slowdown("aps", "nas", "H100", mode) == pytest.approx(
            (1 + k * ub / 100 * over, 1 + k * ua / 100 * over))
    assert colocated_slowdown("aps", "nas", H100) != before
    assert colocated_slowdown("vgg16", "vgg16", "NVIDIA H100 80GB HBM3") == (2.0, 2.0)
    assert group_slowdowns(["vgg16", "vgg16", "aps"], model=H100)[0] > 2.0
    # every other model keeps today's figures, the V100 its measured ones
    for model in (V100, "A100", "H200"):
        assert colocated_slowdown("aps", "nas", model) == before
        assert colocated_slowdown("vgg16", "vgg16", model) == (1 / 0.36, 1 / 0.36)
    gm.use_site_models("")
    assert colocated_slowdown("aps", "nas", H100) == before


def test_an_unknown_mode_or_model_is_named():
    with pytest.raises(ConfigError) as exc:
        colocated_slowdown("aps", "nas", H100, "shard")
    assert (exc.value.key, exc.value.value) == ("mode", "shard")
    assert "time-sliced, mps" in exc.value.fix
    with pytest.raises(ConfigError, match="H300"):
        group_slowdowns(["aps", "nas"], model="H300")


@pytest.mark.parametrize("level", ["aps", "wavenet", "nas"])
def test_the_fit_recovers_both_ks_exactly_from_the_physics_own_pairs(tmp_path, level):
    _own_h100(tmp_path)
    c = colocation_constants(H100)
    got, notes = fit_pairs([PairPoint(**p) for p in pair_samples(H100, level)],
                           Colocation(c["interference_util_threshold"],
                                      gm.shipped()["models"][H100]["colocation_pairs"]["value"]))
    assert got["interference_k"].value == pytest.approx(OWN["interference_k"], rel=1e-12)
    assert got["interference_k_mps"].value == pytest.approx(OWN["interference_k_mps"],
                                                            rel=1e-12)
    s = group_slowdowns([level, level], model=H100)[0]
    table = got["colocation_pairs"].value
    assert table[f"{level}|{level}"] == pytest.approx([1 / s, 1 / s])
    assert table["vgg16|vgg16"] == [0.36, 0.36]             # merged over the shipped table
    assert notes == []
    assert f"{level} (" in got["interference_k"].how and "slowdown" in got["interference_k"].how


def _point(mode: str, ratio: float) -> PairPoint:
    return PairPoint(mode, "aps", 44.37, 2.0, 2.0 * ratio)


NO_THRESHOLD = Colocation(0.0, {})


@pytest.mark.parametrize("mode, ratio, match", [
    ("time-sliced", 0.9, r"the time-sliced pair ran faster than alone: slowdown 0.900"),
    ("mps", 4.5, r"the mps pair ran 4.500 times slower than alone"),
    ("mps", float("nan"), r"the mps pair: the fixed workload aps took nan s as a pair"),
])
def test_a_pair_no_gpu_gives_is_refused_naming_the_mode_and_value(mode, ratio, match):
    with pytest.raises(CalibrationError, match=match):
        fit_pairs([_point(mode, ratio)], NO_THRESHOLD)


def test_a_mode_not_measured_is_a_note_and_noise_below_one_is_no_interference():
    got, notes = fit_pairs([_point("time-sliced", 0.97)], NO_THRESHOLD)
    assert got["interference_k"].value == 0.0 and "interference_k_mps" not in got
    assert notes == ["interference_k_mps not measured: no mps pair in the run (the job's "
                     "notes say why)"]
    got, notes = fit_pairs([], NO_THRESHOLD)
    assert got == {} and len(notes) == 2
    got, notes = fit_pairs([PairPoint("mps", "100%", 99.0, 2.0, 4.0)], Colocation(0.0, {}))
    assert got["interference_k_mps"].value == pytest.approx(1 / (0.99 * 1.98))


def test_a_load_that_is_no_class_gives_k_and_no_pair():
    got, notes = fit_pairs([PairPoint("time-sliced", "100%", 100.0, 2.0, 4.0)], NO_THRESHOLD)
    assert got["interference_k"].value == pytest.approx(0.5)
    assert "colocation_pairs" not in got and "100% is no job class" in notes[0]


# ---- the emulated GPUs: a declared pair is two co-located jobs -----------------------------
def _job(jid: str, app: str) -> Job:
    return Job(jid, "RUNNING", app=app, uses=(GpuUse("gpu1", 0, 1),))


def test_a_declared_pair_is_computed_as_two_co_located_jobs_of_its_class(tmp_path):
    _own_h100(tmp_path)
    gpu = Gpu("gpu1", 0, model=H100, shard_jobs=("1", "2"), shards_total=4, shards_used=2)
    two = gpu_state(gpu, {"1": _job("1", "aps"), "2": _job("2", "aps")})
    one = gpu_state(Gpu("gpu1", 0, model=H100, shard_jobs=("7",), shards_total=4),
                    {"7": _job("7", pair_app("aps", "time-sliced"))})
    assert one.slowdown["7"] == two.slowdown["1"] == two.slowdown["2"] == pytest.approx(
        group_slowdowns(["aps", "aps"], model=H100)[0])
    assert one.slowdown["7"] == pytest.approx(1 + 0.9 * 0.4437 * 0.8874)    # the site's k
    assert (one.util_pct, one.power_w, one.mem_used_mib) == pytest.approx(
        (two.util_pct, two.power_w, two.mem_used_mib))
    assert one.residents[0].util_pct == pytest.approx(sum(r.util_pct for r in two.residents))
    assert one.residents[0].app == "pair:time-sliced:aps"
    assert one.job_power_w["7"] == pytest.approx(sum(two.job_power_w.values()))
    mps = gpu_state(Gpu("gpu1", 0, model=H100, shard_jobs=("7",), shards_total=4),
                    {"7": _job("7", pair_app("aps", "mps"))})
    assert mps.slowdown["7"] == pytest.approx(
        group_slowdowns(["aps", "aps"], model=H100, mode="mps")[0])
    assert mps.slowdown["7"] < one.slowdown["7"]                              # k_mps 0.35


def test_only_a_pair_of_a_known_class_and_mode_is_declared():
    assert declared_pair("pair:mps:aps") == ("aps", "mps")
    assert declared_pair(pair_app("wavenet", "time-sliced")) == ("wavenet", "time-sliced")
    for app in ("aps", "", "pair:shard:aps", "pair:mps:nope", "pair:mps"):
        assert declared_pair(app) is None, app
    st = gpu_state(Gpu("gpu1", 0, shard_jobs=("7",)), {"7": _job("7", "pair:shard:aps")})
    assert st.slowdown["7"] == 1.0          # not a pair: one job of the default class


# ---- EaCO's predictor ------------------------------------------------------------------------
def test_eaco_predicts_with_the_gpus_model_and_mps_when_it_shares_through_mps(tmp_path):
    from slurm_plugin.policy.eaco.predict import group_slowdowns as predict
    today, _ = predict(["vgg16", "vgg16"], {})
    assert predict(["vgg16", "vgg16"], {}, model=H100) == (today, "physics")
    _own_h100(tmp_path)
    assert predict(["vgg16", "vgg16"], {}, model=H100)[0] == (2.0, 2.0)
    assert predict(["vgg16", "vgg16"], {}, model=V100)[0] == today
    slow, _ = predict(["vgg16", "vgg16"], {}, model=H100, share_gres="mps")
    assert slow == group_slowdowns(["vgg16", "vgg16"], model=H100, mode="mps")
    assert predict(["vgg16", "vgg16"], {"pair:vgg16+vgg16": 1.5}, model=H100,
                   share_gres="mps") == ((1.5, 1.5), "history")


def test_the_mps_utilisation_split_takes_the_gpus_model(tmp_path):
    from slurm_plugin.node.nvml_attribution import mps_estimate
    apps = {"a": "vgg16", "b": "aps"}
    today = mps_estimate(["a", "b"], 80.0, {}, apps)
    assert mps_estimate(["a", "b"], 80.0, {}, apps, model=H100) == today
    _own_h100(tmp_path)
    assert mps_estimate(["a", "b"], 80.0, {}, apps, model=V100) == today
    assert mps_estimate(["a", "b"], 80.0, {}, apps, model=H100) != today
