"""The NVML replay (``node/nvml_replay.py``): the real ``Nvml`` wrapper on recorded pynvml
answers, the recorder that writes them (``node/nvml_record.py``) and the files synthesised
from the emulated physics (``tests/data/nvml/``, ``node/nvml_synth.py``)."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from slurm_plugin.errors import InputError
from slurm_plugin.node.nvml_record import record
from slurm_plugin.node.nvml_replay import FORMAT, NvmlReplay, dumps, replay_source
from slurm_plugin.node.nvml_synth import scenarios, synthesise
from slurm_plugin.telemetry.nvml import Nvml, Unsupported

DATA = Path(__file__).resolve().parents[1] / "data" / "nvml"


def doc_of(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def readings(replay: NvmlReplay, warn=lambda line: None) -> list:
    source = replay_source(replay, warn=warn)
    return [source.read() for _ in replay.passes()]


def test_the_real_wrapper_reads_a_replayed_gpu_in_watts_and_joules():
    replay = NvmlReplay(doc_of("h100-shard-2"))
    nv = Nvml(replay)
    gpu = doc_of("h100-shard-2")["passes"][0]["gpus"][0]
    assert nv.count() == 1 and nv.name(0) == "NVIDIA H100 80GB HBM3"
    assert nv.power_w(0) == gpu["nvmlDeviceGetPowerUsage"] / 1000
    assert nv.energy_j(0) == gpu["nvmlDeviceGetTotalEnergyConsumption"] / 1000
    assert nv.power_limit_range_w(0) == (234.0, 700.0) and nv.default_power_limit_w(0) == 700.0
    assert nv.mem_used_mib(0) == 0.0 and nv.mig_enabled(0) is False
    for _ in replay.passes():                       # to a pass where both jobs run
        if len(nv.compute_pids(0)) == 5:
            break
    assert nv.compute_pids(0) == (900, 4000, 4001, 4010, 4011) and nv.mps_pids(0) == ()
    util, newest_us = nv.process_samples(0, 0)
    assert set(util) == {900, 4000, 4010} and newest_us == int(replay.now_s() * 1e6)
    assert nv.process_samples(0, newest_us) == ({}, newest_us)   # NOT_FOUND: no newer one


def test_an_unrecorded_call_is_unsupported_and_one_the_binding_lacks_too():
    doc = doc_of("h100-mps-2")
    del doc["passes"][0]["gpus"][0]["nvmlDeviceGetPowerUsage"]
    nv = Nvml(NvmlReplay({**doc, "binding_lacks": ["nvmlDeviceGetMPSComputeRunningProcesses"]}))
    with pytest.raises(Unsupported, match="nvmlDeviceGetPowerUsage on GPU 0: Function Not Found"):
        nv.power_w(0)
    with pytest.raises(Unsupported, match="nvmlDeviceGetMPSComputeRunningProcesses on GPU 0: "
                                          "not in this pynvml"):
        nv.mps_pids(0)


def test_a_driver_without_the_newest_process_call_is_read_through_the_one_before():
    doc = doc_of("h100-shard-2")
    gpu = doc["passes"][10]["gpus"][0]
    gpu["nvmlDeviceGetComputeRunningProcesses_v2"] = gpu["nvmlDeviceGetComputeRunningProcesses"]
    gpu["nvmlDeviceGetComputeRunningProcesses"] = {"error": "NVMLLibraryMismatchError"}
    replay = NvmlReplay(doc)
    replay.at = 10
    assert Nvml(replay).compute_pids(0) == (900, 4000, 4001, 4010, 4011)


@pytest.mark.parametrize("change, message", [
    ({"format": "other/1"}, "format = 'other/1': expected 'wattbatch-nvml-replay/1'"),
    ({"passes": []}, "passes = \\[\\]: expected a non-empty list"),
    ({"passes": [{"gpus": []}]}, "passes\\[0\\] = .*expected"),
])
def test_a_bad_replay_file_names_the_key_and_value(change, message):
    with pytest.raises(InputError, match=f"nvml replay x.json: {message}"):
        NvmlReplay({**doc_of("h100-mps-2"), **change}, "x.json")


def test_a_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="nope.json: cannot read"):
        NvmlReplay.load(tmp_path / "nope.json")


def test_caps_go_through_the_real_wrapper_to_the_replayed_board():
    replay = NvmlReplay(doc_of("h100-mps-2"))
    source = replay_source(replay, caps=lambda indexes: {i: 400.0 for i in indexes})
    next(replay.passes())
    source.read()
    assert replay.limits_set == [(replay.now_s(), 0, 400_000)]


@pytest.mark.parametrize("name", ["h100-shard-3", "h100-mps-3", "h100-mig"])
def test_a_recording_replays_to_the_same_readings(name):
    """The recorder keeps exactly what the collector asked: recorded over a replay, the
    recording replays to the same readings, residents included."""
    source = NvmlReplay(doc_of(name))
    step = source.passes()
    next(step)
    warned: list[str] = []
    doc = record(source, len(source), 2.0, source.node, jobs=source.node_jobs,
                 job_of=source.job_of, clock=source.now_s, sleep=lambda s: next(step),
                 warn=warned.append)
    again = NvmlReplay(json.loads(dumps(doc)))
    assert readings(again) == readings(NvmlReplay(doc_of(name)))
    assert doc["jobs"] == doc_of(name)["jobs"] and doc["truth_j"] == {}
    assert len(warned) == (1 if name == "h100-mig" else 0)    # no utilisation in MIG mode


def _close(a, b, path="") -> list[str]:
    """Where two documents differ beyond rounding (numbers to 1e-9, or 1 in the last unit)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{path}: keys {sorted(set(a) ^ set(b))}"]
        return [d for k in a for d in _close(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} != {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _close(x, y, f"{path}[{i}]")]
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return [] if math.isclose(a, b, rel_tol=1e-9, abs_tol=1) else [f"{path}: {a} != {b}"]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def test_the_files_are_what_the_generator_writes_and_say_they_are_synthesised():
    names = scenarios()
    assert sorted(p.stem for p in DATA.glob("*.json")) == sorted(names)
    for name, (_what, gpus) in names.items():
        doc = doc_of(name)
        assert doc["format"] == FORMAT
        assert doc["provenance"].startswith("synthesised from the emulated physics")
        assert "not recorded on a GPU" in doc["provenance"]
        made = synthesise(gpus, provenance=doc["provenance"])
        assert _close(json.loads(dumps(made)), doc) == [], name


def test_the_truth_is_each_jobs_own_power_and_adds_up_with_the_idle_gpu():
    """The synthesised counter gains what the jobs draw plus the idle GPU while none runs."""
    doc = doc_of("h100-mps-4")
    counter = [p["gpus"][0]["nvmlDeviceGetTotalEnergyConsumption"] for p in doc["passes"]]
    idle_s = 1.5 + (60.0 - 58.5)    # before the first job starts and after it, the last, ends
    gained_j = (counter[-1] - counter[0]) / 1000
    assert gained_j == pytest.approx(sum(doc["truth_j"].values()) + 72.5 * idle_s, rel=1e-6)


def test_a_pass_with_a_gpu_lost_reads_the_others():
    doc = synthesise([*scenarios()["h100-shard-2"][1], *scenarios()["h100-mps-2"][1]])
    lost = copy.deepcopy(doc)
    for p in lost["passes"]:
        p["gpus"][0]["nvmlDeviceGetHandleByIndex"] = {"error": "NVML_ERROR_GPU_IS_LOST"}
    warned: list[str] = []
    got, want = readings(NvmlReplay(lost), warned.append), readings(NvmlReplay(doc))
    assert [[r.index for r in rs] for rs in got] == [[1]] * len(got)
    assert [rs[1:] for rs in want] == got
    assert warned == ["readings degraded: GPU 0 gpu: nvml: nvmlDeviceGetHandleByIndex on "
                      "GPU 0: GPU is lost (left out of this pass)"]


# --- the scripts ---------------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[2]


def script(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / name), *args],
                          capture_output=True, text=True, timeout=120)


def test_the_generator_script_writes_the_files_again(tmp_path):
    done = script("synth_nvml_traces.py", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    for path in DATA.glob("*.json"):
        assert _close(json.loads((tmp_path / path.name).read_text()),
                      json.loads(path.read_text())) == [], path.name


def test_the_recorder_script_records_here_or_says_why_it_cannot(tmp_path):
    out = tmp_path / "node.json"
    done = script("record_nvml.py", "--out", str(out), "--passes", "2", "--interval", "0.1",
                  "--no-slurm")
    if done.returncode == 0:                         # a GPU node: a file that replays
        replay = NvmlReplay.load(out)
        assert len(replay) == 2 and "recorded on" in replay.provenance
        assert len(readings(replay)[-1]) >= 1
    else:
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert "error: NVML cannot be used here:" in done.stderr
    bad = script("record_nvml.py", "--out", str(out), "--passes", "0")
    assert bad.returncode == 2 and "--passes: '0': give a number > 0" in bad.stderr
