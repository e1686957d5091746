"""Any catalogued GPU model, anywhere: the physics (``gpu_constants``), the job classes, the
caps, the simulator and the node collector compute with the model's own constants; the V100
stays physics.json's exactly; an unknown model is one error with close names (physics,
simulator) or one warning (collector)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from slurm_plugin.cli import group as wattctl
from slurm_plugin.errors import ConfigError
from slurm_plugin.physics import (cap_slowdown, capped_power_w, class_names, clamp_cap_w,
                                  gpu_power_w, idle_power_w, job_class, max_power_w)
from slurm_plugin.physics import gpu_models as gm
from slurm_plugin.physics.classes import curve_ratio
from slurm_plugin.physics.constants import catalogue_entry, constants, gpu_constants
from slurm_plugin.resources import data_dir

KEYS = ("idle_power_w", "dynamic_power_w", "util_gamma", "cap_beta", "max_power_w",
        "min_power_cap_w", "memory_mib")


# ---- gpu_constants -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["V100", "v100", "V100-SXM2-32GB", "Tesla V100-SXM2-32GB",
                                  "v100-sxm2", "V100_32GB"])
def test_every_spelling_of_the_v100_gives_physics_json_exactly(name):
    v100 = json.loads((data_dir() / "physics.json").read_text())["gpu_models"]["V100"]
    got = gpu_constants(name)
    assert got == v100                         # every key, every value, nothing added
    assert got is constants()["gpu_models"]["V100"]


@pytest.mark.parametrize("name,entry", [("H100", "H100-80GB-HBM3"),
                                        ("NVIDIA H100 80GB HBM3", "H100-80GB-HBM3"),
                                        ("a100", "A100-SXM4-80GB"),
                                        ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"),
                                        ("h200", "H200"), ("L40S", "L40S")])
def test_catalogued_models_resolve_to_their_catalogue_constants(name, entry):
    assert catalogue_entry(name) == entry
    m = gm.lookup(entry)
    assert gpu_constants(name) == {k: getattr(m, k) for k in KEYS}


def test_h100_and_a100_figures():
    h, a = gpu_constants("H100"), gpu_constants("A100")
    assert (h["idle_power_w"], h["min_power_cap_w"], h["max_power_w"], h["memory_mib"]) == \
        (72.5, 234.0, 700.0, 81068)
    assert (a["idle_power_w"], a["dynamic_power_w"], a["max_power_w"], a["cap_beta"]) == \
        (60.1, 175.26, 400.0, 0.84)
    assert idle_power_w("H100") == 72.5 and max_power_w("a100") == 400.0
    assert gpu_power_w(100, model="H100") == pytest.approx(72.5 + 387.0)


def test_an_unknown_model_is_one_error_naming_it_with_close_names():
    with pytest.raises(ConfigError) as exc:
        gpu_constants("H300")
    msg = str(exc.value)
    assert msg.startswith("config: physics: gpu_type = 'H300': not a catalogued GPU model")
    assert "close names: " in msg and "H200" in msg and "H100" in msg
    with pytest.raises(ConfigError, match="gpu_type = 'K80'"):
        idle_power_w("K80")


# ---- what every consumer computes with ----------------------------------------------------
def test_caps_are_clamped_to_the_models_own_range():
    assert clamp_cap_w(300.0, "V100") == 250.0 and clamp_cap_w(50.0, "V100") == 100.0
    assert clamp_cap_w(1000.0, "H100") == 700.0 and clamp_cap_w(100.0, "H100") == 234.0
    assert clamp_cap_w(300.0, "H100") == 300.0 and clamp_cap_w(100.0, "A100") == 134.0


def test_cap_slowdown_uses_the_models_idle_and_beta():
    # the same draw and cap, the model's own formula
    for model in ("V100", "A100", "H100"):
        c = gpu_constants(model)
        p0, cap = c["max_power_w"] * 0.9, c["max_power_w"] * 0.6
        want = ((p0 - c["idle_power_w"]) / (cap - c["idle_power_w"])) ** c["cap_beta"]
        assert cap_slowdown(p0, cap, model) == pytest.approx(want)
    assert cap_slowdown(200.0, 150.0, "A100") != cap_slowdown(200.0, 150.0, "V100")


def test_class_power_on_the_v100_is_unchanged():
    v = constants()["gpu_models"]["V100"]
    for name in class_names():
        cls = job_class(name)
        for n in (1, 2, 8):
            idle = v["idle_power_w"]
            assert cls.power_at(n, "V100") == idle + (cls.power_w - idle) * cls.util_at(n) \
                / cls.util_pct
            assert cls.power_at(n, "Tesla V100-SXM2-32GB") == cls.power_at(n)


def test_class_power_carries_over_through_the_models_curve():
    v, h = gpu_constants("V100"), gpu_constants("H100")
    ratio = h["dynamic_power_w"] / v["dynamic_power_w"]          # equal gammas: a constant
    for name in class_names():
        cls = job_class(name)
        v_dyn = cls.dynamic_power_at(1, "V100")
        assert cls.dynamic_power_at(1, "H100") == pytest.approx(v_dyn * ratio)
        assert cls.power_at(1, "H100") <= h["max_power_w"]
        assert cls.util_at(1) == job_class(name).util_at(1)     # utilisation is the class's
    # another gamma bends the ratio with the utilisation
    ref = {"dynamic_power_w": 100.0, "util_gamma": 0.75}
    other = {"dynamic_power_w": 200.0, "util_gamma": 1.0}
    assert curve_ratio(other, ref, 100.0) == pytest.approx(2.0)
    assert curve_ratio(other, ref, 16.0) == pytest.approx(2.0 * 0.16 ** 0.25)


def test_capped_job_on_a_chip_without_a_cap_sweep_uses_the_models_own_fit():
    from slurm_plugin.physics.config_model import config_model, fitted_cap_gpu
    from slurm_plugin.physics.job_cap import capped_job
    assert fitted_cap_gpu("A100-SXM4-80GB") == "A100" and fitted_cap_gpu("V100-PCIE-16GB") == "V100"
    assert fitted_cap_gpu("A40") == "A40" and fitted_cap_gpu("H100") is None
    assert fitted_cap_gpu("L40S") is None and fitted_cap_gpu("H300") is None
    assert config_model("imagenet").cap_fit("NVIDIA A100-SXM4-40GB") is \
        config_model("imagenet").cap_fit("A100")
    level = job_class("nas").power_at(1, "H100")
    assert capped_job("nas", 1, 300.0, "H100") == (capped_power_w(level, 300.0, "H100"),
                                                   cap_slowdown(level, 300.0, "H100"))
    power, slow = capped_job("nas", 1, 150.0, "A100")        # the A100's Perseus curve
    assert power <= 150.0 and slow > 1.0


def test_colocation_is_carried_over_unchanged_to_every_model():
    """The shipped catalogue carries the V100's pairs and interference over to every entry (and
    each entry's MPS k is its time-sliced k), so with it the slowdowns are the same on every
    model; a site's calibrated pair gives a model its own (test_colocation_models.py)."""
    for name, m in gm.shipped()["models"].items():
        assert m["colocation_pairs"]["value"] == constants()["pairs"], name
        assert m["interference_k"]["value"] == constants()["interference"]["k"], name
        assert m["interference_util_threshold"]["value"] == \
            constants()["interference"]["util_threshold"], name
        assert m["interference_k_mps"]["value"] == m["interference_k"]["value"], name


def test_greenflow_tries_the_models_own_caps():
    from slurm_plugin.policy.greenflow.decide import _cap_table
    from slurm_plugin.policy.greenflow.settings import CAPS_W, GreenFlowSettings, model_caps_w
    assert model_caps_w("V100") == CAPS_W and model_caps_w("v100") == CAPS_W
    assert model_caps_w("H100") == (None, 630.0, 560.0, 490.0, 420.0, 350.0, 280.0)
    assert model_caps_w("A100") == (None, 360.0, 320.0, 280.0, 240.0, 200.0, 160.0)
    assert GreenFlowSettings(caps_w=(None, 300.0)).caps_for("H100") == (None, 300.0)
    rows = _cap_table("nas", 1, model_caps_w("H100"), "H100", 8, 400.0)
    assert [r[0] for r in rows] == list(model_caps_w("H100"))
    # nas draws about 516 W on an H100: 630 W costs it nothing, 280 W slows it
    assert rows[0][2] == rows[1][2] == 1.0 and rows[-1][2] > 1.0


def test_greenflow_prices_owed_work_at_the_models_top_limit_when_nothing_is_read():
    from slurm_plugin.model import Cluster, Gpu, Node, Readings
    from slurm_plugin.policy.greenflow.observe import OWED_GPU_W, power_per_allocated_gpu_w

    def idle(model):
        return Cluster(nodes=(Node(name="a", gpus=(Gpu(node="a", index=0, model=model),)),))
    assert power_per_allocated_gpu_w(idle("V100"), Readings(), 400.0) == OWED_GPU_W == 250.0
    assert power_per_allocated_gpu_w(idle("h100"), Readings(), 400.0) == 700.0
    assert power_per_allocated_gpu_w(idle("g0"), Readings(), 400.0) == OWED_GPU_W


# ---- the simulator --------------------------------------------------------------------------
def _simulate(*args):
    return CliRunner().invoke(wattctl, ["simulate", *args])


def test_simulator_uses_the_models_idle_top_limit_and_memory():
    from slurm_plugin.policy import get_policy
    from slurm_plugin.sim.cluster import ClusterSpec
    from slurm_plugin.sim.engine import Simulator
    sim = Simulator([], ClusterSpec(nodes=1, gpus_per_node=2, gpu_type="H100"),
                    get_policy("slurm-default"))
    kinds = {(n.kind.idle_w, n.kind.max_w, n.kind.memory_mib) for n in sim.nodes}
    assert kinds == {(72.5, 700.0, 81068)}


def test_one_job_draws_its_class_power_on_the_model(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_s,duration_s,num_gpus,user,app\n"
                     "j1,1700000000,3600,1,u,alexnet\n")
    for model in ("V100", "H100", "A100"):
        res = _simulate("--trace", str(trace), "--trace-format", "canonical", "--nodes", "1",
                        "--gpus-per-node", "1", "--gpu-type", model, "--policy",
                        "slurm-default", "--json")
        assert res.exit_code == 0, res.output
        got = json.loads(res.stdout)
        assert got["gpu_energy_kwh"] == pytest.approx(
            job_class("alexnet").power_at(1, model) * 3600 / 3.6e6, rel=1e-9)


def test_simulate_on_the_shipped_trace_per_model():
    out = {}
    for model in ("V100", "A100", "H100"):
        res = _simulate("--gpu-type", model, "--policy", "slurm-default", "--json")
        assert res.exit_code == 0, res.output
        out[model] = json.loads(res.stdout)
        assert out[model]["cluster"]["gpu_type"] == model and out[model]["jobs_finished"] == 1000
    # the same jobs at the same speed (the classes' step times do not change with the model)
    assert out["H100"]["avg_jct_s"] == out["V100"]["avg_jct_s"] == out["A100"]["avg_jct_s"]
    # higher idle (72.5 vs 41.4 W) and a 2.1x dynamic span: more energy for the same work
    assert out["H100"]["gpu_energy_kwh"] > 1.5 * out["V100"]["gpu_energy_kwh"]
    assert out["V100"]["gpu_energy_kwh"] < out["A100"]["gpu_energy_kwh"] \
        < out["H100"]["gpu_energy_kwh"]


def test_a_bad_gpu_type_is_one_error_with_close_names(tmp_path):
    res = _simulate("--gpu-type", "H300", "--policy", "slurm-default")
    assert res.exit_code == 2
    assert "Invalid value for '--gpu-type': 'H300': not a catalogued GPU model" in res.output
    assert "close names: " in res.output and "H200" in res.output
    assert res.output.count("H300") == 1


def test_a_cluster_files_gpu_type_is_any_catalogued_model(tmp_path):
    from slurm_plugin.sim.cluster import load_cluster
    good = tmp_path / "good.toml"
    good.write_text('[cluster]\nnodes = 2\ngpus_per_node = 4\ngpu_type = "NVIDIA H100 80GB HBM3"\n')
    assert load_cluster(good).resolved().gpu_type == "NVIDIA H100 80GB HBM3"
    res = _simulate("--cluster", str(good), "--policy", "slurm-default", "--limit-jobs", "20",
                    "--json")
    assert res.exit_code == 0, res.output
    bad = tmp_path / "bad.toml"
    bad.write_text('[cluster]\ngpu_type = "A1000"\n')
    with pytest.raises(ConfigError) as exc:
        load_cluster(bad)
    assert str(exc.value).startswith(f"config: {bad}: cluster.gpu_type = 'A1000': not a "
                                     "catalogued GPU model; close names: ")


# ---- the node collector ---------------------------------------------------------------------
class FakeNv:
    """The pynvml calls NvmlSource makes, with recorded values (milliwatts, millijoules)."""

    class NVMLError(Exception):
        pass

    NVML_ERROR_NOT_FOUND = 6

    def __init__(self, names, power_mw=(150_000, 90_000), limit_range_mw=None):
        self.names, self.power_mw = names, power_mw
        self.limit_range_mw = limit_range_mw or {i: (100_000, 300_000) for i in range(len(names))}
        self.limits = {i: self.limit_range_mw[i][1] for i in range(len(names))}
        self.energy = {i: 1_000_000 for i in range(len(names))}

    def nvmlDeviceGetCount(self): return len(self.names)
    def nvmlDeviceGetHandleByIndex(self, i): return i
    def nvmlDeviceGetName(self, h): return self.names[h]
    def nvmlDeviceGetPowerUsage(self, h): return self.power_mw[h]

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        self.energy[h] += 60 * self.power_mw[h]          # a minute at that power
        return self.energy[h]

    def nvmlDeviceGetUtilizationRates(self, h): return SimpleNamespace(gpu=70 - 10 * h)
    def nvmlDeviceGetMemoryInfo(self, h): return SimpleNamespace(used=2048 * 1024 * 1024)
    def nvmlDeviceGetPowerManagementLimit(self, h): return self.limits[h]
    def nvmlDeviceGetPowerManagementLimitConstraints(self, h): return self.limit_range_mw[h]
    def nvmlDeviceGetPowerManagementDefaultLimit(self, h): return self.limit_range_mw[h][1]
    def nvmlDeviceSetPowerManagementLimit(self, h, mw): self.limits[h] = mw
    def nvmlDeviceGetComputeRunningProcesses(self, h): return [SimpleNamespace(pid=100 + h)]

    def nvmlDeviceGetProcessUtilization(self, h, since_us):
        return [SimpleNamespace(pid=100 + h, smUtil=60.0)]


def _nvml(fake):
    from slurm_plugin.telemetry.nvml import Nvml
    nv = Nvml.__new__(Nvml)
    nv._nv, nv._handles = fake, {}
    return nv


def _source(fake, caps=None):
    from slurm_plugin.node.source import NvmlSource
    clock = iter(range(1_000, 100_000, 60))
    return NvmlSource("n1", _nvml(fake), clock=lambda: float(next(clock)),
                      job_of=lambda pid: str(pid), caps=caps, cap_refresh_s=1)


def test_each_gpus_model_is_read_from_its_nvml_name():
    fake = FakeNv([b"NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-32GB"])      # bytes: old pynvml
    readings = _source(fake).read()
    assert [r.model for r in readings] == ["H100-80GB-HBM3", "V100-SXM2-32GB"]
    assert [r.power_w for r in readings] == [150.0, 90.0]


def test_caps_are_moved_into_each_gpus_model_range():
    fake = FakeNv(["NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-32GB", "NVIDIA B200"],
                  power_mw=(1, 1, 1),
                  limit_range_mw={0: (200_000, 700_000), 1: (100_000, 300_000),
                                  2: (200_000, 1_000_000)})
    _source(fake, caps=lambda idx: {i: 500.0 for i in idx}).read()
    # H100: 500 W is settable (the V100's 250 W top no longer applies); V100: its 250 W top;
    # a board the catalogue lacks: as asked, within the board's own range
    assert fake.limits == {0: 500_000, 1: 250_000, 2: 500_000}
    _source(fake, caps=lambda idx: {i: 150.0 for i in idx}).read()
    assert fake.limits == {0: 234_000, 1: 150_000, 2: 200_000}


def test_an_unknown_nvml_name_warns_once_and_everything_is_still_recorded(tmp_path):
    from slurm_plugin.node.collector import collect_once
    from slurm_plugin.node.ledger import Ledger, job_file

    class Client:
        def __init__(self): self.points = []
        def write(self, points): self.points += list(points)
        def write_lines(self, lines): return 0

    fake = FakeNv(["NVIDIA B200", "NVIDIA B200"])
    warned, client = [], Client()
    ledger = Ledger(tmp_path, None, "V100", warn=warned.append)
    source = _source(fake)
    for _ in range(3):
        readings = collect_once(source, client, "c", ledger)
    assert [r.model for r in readings] == ["NVIDIA B200", "NVIDIA B200"]
    assert len(warned) == 1 and "'NVIDIA B200'" in warned[0] and "recorded" in warned[0]
    assert len(client.points) == 6
    assert {p.fields["power_w"] for p in client.points} == {150.0, 90.0}
    assert {p.fields["util_pct"] for p in client.points} == {70.0, 60.0}
    # each GPU's job is charged what its counter gained over the two intervals
    for gpu, pid in ((0, 100), (1, 101)):
        entry = json.loads(job_file(tmp_path, str(pid)).read_text())["nodes"]["n1"]
        assert entry["energy_j"] == pytest.approx(2 * 60 * fake.power_mw[gpu] / 1000)
        assert entry["gpus"] == [gpu]


def test_a_catalogued_nvml_name_sets_the_ledgers_idle_power(tmp_path):
    from slurm_plugin.node.ledger import Ledger
    ledger = Ledger(tmp_path, None, "V100")
    assert ledger.idle_w == idle_power_w("V100")
    assert ledger.idle_of("H100-80GB-HBM3") == 72.5
    assert ledger.idle_of("V100-SXM2-32GB") == ledger.idle_w


class _Recorder:
    def __init__(self): self.points = []
    def write(self, points): self.points += list(points)
    def write_lines(self, lines): return 0


def _collect_cli(monkeypatch, tmp_path, gpu_model):
    from slurm_plugin.commands import collect as collect_cmd
    from slurm_plugin.node import source as sources
    site = tmp_path / "site.toml"
    site.write_text(f'[node]\ngpu_model = "{gpu_model}"\nstate_dir = "{tmp_path / "state"}"\n'
                    'cap_refresh_s = 0\n')
    monkeypatch.setenv("WATTBATCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WATTBATCH_SITE_CONFIG", str(site))
    client = _Recorder()
    monkeypatch.setattr(collect_cmd.InfluxClient, "from_config", staticmethod(lambda cfg: client))
    monkeypatch.setitem(sources.SOURCES, "fake",
                        lambda node, cfg: _source(FakeNv(["NVIDIA H100 80GB HBM3", "NVIDIA X9"])))
    res = CliRunner().invoke(wattctl, ["collect", "--once", "--source", "fake"])
    shown = CliRunner().invoke(wattctl, ["collect", "--once", "--source", "fake", "--json"])
    assert shown.exit_code == 0, shown.output
    assert [r["model"] for r in json.loads(shown.stdout)] == ["H100-80GB-HBM3", "NVIDIA X9"]
    return res, client


@pytest.mark.parametrize("gpu_model", ["H100", "NVIDIA H100 80GB HBM3", "a100"])
def test_collect_starts_with_any_catalogued_node_gpu_model(monkeypatch, tmp_path, gpu_model):
    res, client = _collect_cli(monkeypatch, tmp_path, gpu_model)
    assert res.exit_code == 0, res.output
    assert len(client.points) == 2
    assert res.stderr.count("warning: GPU model") == 1 and "'NVIDIA X9'" in res.stderr


def test_collect_with_an_uncatalogued_node_gpu_model_warns_and_records(monkeypatch, tmp_path):
    res, client = _collect_cli(monkeypatch, tmp_path, "H300")
    assert res.exit_code == 0, res.output
    assert len(client.points) == 2
    lines = [ln for ln in res.stderr.splitlines() if "warning: GPU model 'H300'" in ln]
    assert len(lines) == 1 and "node.gpu_model" in lines[0] and "close names" in lines[0]
