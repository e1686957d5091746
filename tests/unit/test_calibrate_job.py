"""The calibration job (node/calibrate_job.py, node/calibrate_load.py) on emulated GPUs, with
the real emulated source and physics and a fake Slurm record: stepping its class and cap, it
recovers the emulated model's own constants, the fit included; and it refuses what it cannot
measure."""

from __future__ import annotations

import json

import pytest
from calibrate_fakes import EmulatedNode, run_emulated

from slurm_plugin.commands.calibrate_run import measurement
from slurm_plugin.node import calibrate_job as cj
from slurm_plugin.node.calibrate_load import class_load_scale
from slurm_plugin.physics import gpu_models as gm
from slurm_plugin.physics import job_class
from slurm_plugin.physics.calibrate_fit import CalibrationError, fit
from slurm_plugin.physics.classes import CLASS_GPU
from slurm_plugin.physics.constants import gpu_constants
from slurm_plugin.physics.job_cap import capped_job

CURVE = ("idle_power_w", "dynamic_power_w", "util_gamma", "max_power_w", "min_power_cap_w")


@pytest.fixture(autouse=True)
def _shipped_physics():
    gm.use_site_models("")
    gpu_constants.cache_clear()
    capped_job.cache_clear()
    yield
    gm.use_site_models(None)
    gpu_constants.cache_clear()
    capped_job.cache_clear()


def _calibrated(result: dict) -> dict[str, float]:
    return {k: c.value for k, c in fit(measurement(result)).constants.items()}


@pytest.mark.parametrize("model", ["H100-80GB-HBM3", "L40S", "H200-NVL"])
def test_a_model_without_a_cap_sweep_comes_back_whole(model, tmp_path):
    """Chips nothing was swept on slow under a cap as cap_beta says (physics/job_cap.py)."""
    got = _calibrated(run_emulated(EmulatedNode(model), tmp_path))
    want = {k: gpu_constants(model)[k] for k in (*CURVE, "cap_beta")}
    assert got == pytest.approx(want, rel=0.01)


def test_a_site_entry_is_what_the_emulated_gpus_draw_and_what_comes_back(tmp_path):
    """Constants that differ from every shipped entry (gamma included): recovered, so the
    pipeline measures the model's curve, not the classes' reference."""
    site = {"idle_power_w": 80.0, "dynamic_power_w": 420.0, "util_gamma": 1.2,
            "cap_beta": 1.1, "min_power_cap_w": 250.0, "max_power_w": 650.0}
    path = tmp_path / "site.json"
    path.write_text(json.dumps({"models": {"H100": {k: {"value": v, "source": "measured"}
                                                    for k, v in site.items()}}}))
    gm.use_site_models(str(path))
    gpu_constants.cache_clear()
    capped_job.cache_clear()
    result = run_emulated(EmulatedNode("H100-80GB-HBM3"), tmp_path)
    assert _calibrated(result) == pytest.approx(site, rel=0.01)


def test_on_the_v100_the_curve_and_range_come_back_and_the_cap_follows_its_sweep(tmp_path):
    """A swept chip (GV100) slows as its class's measured sweep, not as cap_beta: the fitted
    beta is the generic form's best fit to that, and the timed runs are the sweep's."""
    model = "V100-SXM2-32GB"
    result = run_emulated(EmulatedNode(model), tmp_path)
    got = _calibrated(result)
    want = {k: gpu_constants(model)[k] for k in CURVE}
    assert {k: got[k] for k in CURVE} == pytest.approx(want, rel=0.01)
    assert result["workload"] == "lstm"            # nas draws the 250 W limit: left out
    for c in result["caps"]:
        _, slow = capped_job("lstm", 1, c["power_limit_w"], model)
        assert c["time_s"] / result["workload_time_s"] == pytest.approx(slow, rel=0.01)
    assert got["cap_beta"] > 0


def test_the_idle_power_is_the_intercept_when_no_gpu_of_the_model_is_idle(tmp_path):
    node = EmulatedNode("H100-80GB-HBM3", others={1: "vgg16", 2: "aps", 3: "lstm"})
    result = run_emulated(node, tmp_path)
    assert result["idle_w"] == []
    cal = fit(measurement(result))
    assert cal.constants["idle_power_w"].value == pytest.approx(72.5, rel=0.01)
    assert "intercept" in cal.constants["idle_power_w"].how


def test_the_class_scale_is_the_offset_the_physics_keeps_on_every_model():
    for app in ("lstm", "alexnet", "aps"):          # below every model's limit
        cls = job_class(app)
        for model in ("H100", "A40", CLASS_GPU):
            c = gpu_constants(model)
            u = cls.util_at(1)
            curve_w = c["dynamic_power_w"] * (u / 100) ** c["util_gamma"]
            assert cls.power_at(1, model) - c["idle_power_w"] == pytest.approx(
                class_load_scale(app, 1) * curve_w)


def test_another_job_on_the_gpu_stops_the_run(tmp_path):
    with pytest.raises(CalibrationError, match="job 99 came onto GPU gpu1:0 during the "
                                               "calibration"):
        run_emulated(EmulatedNode("H100", intruder_at=20), tmp_path)


def test_too_little_time_is_refused_before_measuring():
    with pytest.raises(CalibrationError, match="20 s left before the deadline: too little"):
        cj.make_plan(20.0, 8, emulated=True)
    plan = cj.make_plan(170.0, 8, emulated=True)
    assert plan.window_s > 1 and plan.fixed_s > 1


def test_declared_app_goes_first_in_the_wb_word_and_every_other_key_stays():
    assert cj.with_declared_app("wb:uid=0;declared_app=;tagged=0;cap=200", "lstm") == \
        "wb:uid=0;tagged=0;cap=200;declared_app=lstm"
    assert cj.with_declared_app("", "nas") == "wb:declared_app=nas"
    assert cj.with_declared_app("note wb:uid=3", "aps") == "wb:uid=3;declared_app=aps note"
    from slurm_plugin.slurm.parse import declared_app
    assert declared_app(cj.with_declared_app("note wb:uid=3", "aps"), "app=x") == "aps"


def test_a_job_without_a_gpu_writes_why(tmp_path):
    res = cj.run_job(tmp_path, 2e9, {"SLURM_JOB_ID": "12", "SLURMD_NODENAME": "gpu1"})
    assert res["error"].startswith("the job holds no GPU")
    on_disk = json.loads((tmp_path / "calibration-12.json").read_text())
    assert on_disk["error"] == res["error"] and on_disk["gpu_index"] is None
    assert (tmp_path / "phase-12.txt").read_text().startswith("failed: the job holds no GPU")


class _FakeTensor:
    def __init__(self, clock) -> None:
        self.clock = clock

    def __matmul__(self, other):
        self.clock.t += 0.01                      # one matmul: 10 ms of GPU time
        return self

    def __mul__(self, k):
        return self


class _FakeTorch:
    """What TorchLoad asks of torch, on a fake clock (no GPU here)."""
    float16 = "float16"

    def __init__(self, clock) -> None:
        self.clock = clock
        self.cuda = type("cuda", (), {"synchronize": staticmethod(lambda *a: None)})

    def device(self, name):
        return name

    def randn(self, *shape, **kw):
        return _FakeTensor(self.clock)


def test_the_real_load_holds_its_duty_and_repeats_the_same_work():
    from calibrate_fakes import FakeClock

    from slurm_plugin.node.calibrate_load import TorchLoad
    c = FakeClock()
    load = TorchLoad(_FakeTorch(c), fixed_s=1.0, interval_s=0.25, clock=c, sleep=c.sleep)
    assert load.levels()[0] == "10%" and load.levels()[-1] == "100%"
    assert load.load_scale("40%") == 1.0
    load.apply("50%")
    ticks: list[float] = []
    start = c()
    load.hold(2.0, lambda: ticks.append(c()))
    assert c() - start == pytest.approx(2.0, abs=0.15)
    assert 6 <= len(ticks) <= 10
    t0 = load.run_fixed(lambda: None)
    t1 = load.run_fixed(lambda: None)
    assert t0 == pytest.approx(1.0, abs=0.02) and t1 == pytest.approx(t0, abs=0.02)


def test_a_real_node_without_torch_says_so(monkeypatch):
    from slurm_plugin import config
    from slurm_plugin.node import gpu_bench
    monkeypatch.setattr(gpu_bench, "_torch", lambda: (None, "torch is not installed: x"))
    cfg = config.load(environ={}).with_overrides({"node.gpu_source": "nvml"})
    make = cj.make_load_factory(cfg, None, "7", 1, cj.make_plan(500, 10, emulated=False))
    with pytest.raises(CalibrationError, match="torch is not installed: x: the load on a real "
                                               "GPU is a PyTorch matmul loop"):
        make()


def test_slow_reads_do_not_stretch_the_emulated_fixed_workload(tmp_path):
    from calibrate_fakes import FakeClock

    from slurm_plugin.node.calibrate_load import EmulatedLoad
    c = FakeClock()
    slowdown = tmp_path / "slowdown-7"
    slowdown.write_text("1.5000\n")
    load = EmulatedLoad(None, "7", 1, slowdown, fixed_s=3.5, interval_s=0.25, clock=c,
                        sleep=c.sleep)
    reads: list[float] = []

    def slow_read() -> None:                  # a Slurm snapshot slower than a step
        c.t += 0.8
        reads.append(c.t)

    assert load.run_fixed(slow_read) == pytest.approx(3.5 * 1.5, abs=0.01)
    assert 1 <= len(reads) < 10


def test_the_reader_finds_its_gpu_and_refuses_one_it_cannot_see():
    from slurm_plugin.model import GpuReading

    def reading(index: int) -> GpuReading:
        return GpuReading(node="n1", index=index, power_w=60.0, energy_j=0.0, util_pct=0.0,
                          mem_used_mib=0.0, power_limit_w=300.0, taken_s=0.0, model="A40")

    class Source:
        def __init__(self, indexes):
            self.indexes = indexes

        def read(self):
            return [reading(i) for i in self.indexes]

    plan = cj.make_plan(170.0, 8, emulated=True)
    # the job's cgroup shows NVML its one GPU as index 0: that is the job's GPU 2
    one = cj.GpuReader(Source([0]), "n1", 2, "7", plan)
    assert one.read().index == 0 and one.key == ("n1", 0)
    with pytest.raises(CalibrationError, match=r"GPU n1:2 is not among the GPUs the node's "
                                               r"source reads \(n1:0, n1:1\)"):
        cj.GpuReader(Source([0, 1]), "n1", 2, "7", plan).read()


# ---- the co-located pair (node/calibrate_pair.py) --------------------------------------------
def _with_pair(result: dict, model: str) -> dict[str, float]:
    from slurm_plugin.commands.calibrate_run import colocation
    cal = fit(measurement(result), colocation(model))
    return {k: c.value for k, c in cal.constants.items()}


def test_the_pair_gives_back_the_emulated_models_own_ks(tmp_path):
    """Time-sliced and through MPS, on a model a site gave ks no shipped entry has."""
    own = {"interference_k": 0.9, "interference_k_mps": 0.35}
    path = tmp_path / "site.json"
    path.write_text(json.dumps({"models": {"H100": {k: {"value": v, "source": "measured"}
                                                    for k, v in own.items()}}}))
    gm.use_site_models(str(path))
    result = run_emulated(EmulatedNode("H100-80GB-HBM3"), tmp_path)
    assert [(p["mode"], p["level"]) for p in result["pair"]] == [("time-sliced", "aps"),
                                                                  ("mps", "aps")]
    got = _with_pair(result, "H100-80GB-HBM3")
    assert {k: got[k] for k in own} == pytest.approx(own, rel=0.01)
    assert got["colocation_pairs"]["aps|aps"][0] == pytest.approx(
        1 / (1 + 0.9 * 0.4437 * 0.8874), rel=0.01)
    v100 = _with_pair(run_emulated(EmulatedNode("V100-SXM2-32GB"), tmp_path / "v"),
                      "V100-SXM2-32GB")
    assert (v100["interference_k"], v100["interference_k_mps"]) == pytest.approx((0.6, 0.6),
                                                                                 rel=0.01)


def _pair_phase(tmp_path, node, end_after_s: float, load_class=None):
    """The pair phase alone on GPU 0 of ``node`` (the stepped loads as measured), with
    ``end_after_s`` left before the deadline."""
    from calibrate_fakes import FakeClock

    from slurm_plugin.node.calibrate_load import EmulatedLoad
    from slurm_plugin.node.calibrate_pair import measure_pair
    from slurm_plugin.node.emulated import EmulatedSource, slowdown_path
    clock = FakeClock()
    plan = cj.make_plan(170.0, 8, emulated=True)
    reader = cj.GpuReader(EmulatedSource("gpu1", node.snapshot, tmp_path), "gpu1", 0, "7", plan,
                          clock=clock, sleep=clock.sleep)
    load = (load_class or EmulatedLoad)(node, "7", 1, slowdown_path(tmp_path, "7"), plan.fixed_s,
                                        plan.interval_s, clock=clock, sleep=clock.sleep)
    loads = [{"label": c, "util_pct": job_class(c).util_at(1)} for c in load.levels()]
    max_w = gpu_constants(node.model)["max_power_w"]
    return measure_pair(reader, node, load, loads, node.model, max_w, plan,
                        clock() + end_after_s, lambda line: None, clock=clock)


def test_a_pair_without_time_or_mps_is_a_note_and_the_rest_stays(tmp_path):
    from slurm_plugin.node.calibrate_load import EmulatedLoad
    from slurm_plugin.node.calibrate_pair import PairUnavailable
    node = EmulatedNode("H100-80GB-HBM3")
    samples, notes = _pair_phase(tmp_path, node, 1.0)
    assert samples == [] and notes == ["co-located pair cut short by the deadline before aps "
                                       "alone: time-sliced, mps not measured"]
    plan = cj.make_plan(170.0, 8, emulated=True)
    samples, notes = _pair_phase(tmp_path, node, 4.5 * plan.fixed_s)   # alone, time-sliced
    assert [s["mode"] for s in samples] == ["time-sliced"]
    assert notes == ["co-located pair cut short by the deadline before aps as a mps pair: "
                     "mps not measured"]

    class NoMps(EmulatedLoad):
        def run_fixed(self, tick):
            if self._tag.job.app.startswith("pair:mps:"):
                raise PairUnavailable("MPS is not available here (nvidia-cuda-mps-control: "
                                      "not found)")
            return super().run_fixed(tick)

    samples, notes = _pair_phase(tmp_path, EmulatedNode("H100-80GB-HBM3"), 170.0, NoMps)
    assert [s["mode"] for s in samples] == ["time-sliced"]
    assert notes == ["the co-located pair of aps as a mps pair not measured: MPS is not "
                     "available here (nvidia-cuda-mps-control: not found)"]
    assert samples[0]["pair_time_s"] / samples[0]["solo_time_s"] == pytest.approx(1.2362,
                                                                                  rel=1e-3)


def test_the_real_load_runs_its_pair_as_copies_of_the_fixed_workload(monkeypatch):
    from calibrate_fakes import FakeClock

    from slurm_plugin.node import calibrate_pair
    from slurm_plugin.node.calibrate_load import TorchLoad
    c = FakeClock()
    load = TorchLoad(_FakeTorch(c), fixed_s=1.0, interval_s=0.25, clock=c, sleep=c.sleep)
    calls = []
    monkeypatch.setattr(calibrate_pair, "run_copies",
                        lambda *a: calls.append(a[:5]) or 1.5)
    load.apply("100%")
    load.run_fixed(lambda: None)                       # counts the fixed workload's matmuls
    assert load.pair_level("H100", load.levels()) == "100%"
    for mode, want in ((None, (1, None)), ("mps", (2, "mps"))):
        load.apply(load.pair("100%", mode))
        assert load.run_fixed(lambda: None) == 1.5
        assert calls[-1] == (want[0], load._iterations, 4096, want[1], 1.0)
    load.apply("40%")                                  # a level again: in this process
    assert load.run_fixed(lambda: None) == pytest.approx(1.0, abs=0.02) and len(calls) == 2
