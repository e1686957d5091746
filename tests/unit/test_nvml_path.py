"""The collector's NVML path end to end on replayed passes (replay -> Nvml -> NvmlSource ->
Ledger/split): each job charged against its true energy, the invariants of the split, MPS
clients charged to their jobs, and a call a GPU cannot answer costing only its reading."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from slurm_plugin.errors import CommandError
from slurm_plugin.node.ledger import Ledger, job_file
from slurm_plugin.node.nvml_replay import NvmlReplay, replay_source
from slurm_plugin.node.source import NvmlSource
from slurm_plugin.physics import idle_power_w, job_class
from slurm_plugin.telemetry.nvml import Nvml

DATA = Path(__file__).resolve().parents[1] / "data" / "nvml"
FILES = sorted(p.stem for p in DATA.glob("*.json"))


def doc_of(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def run(doc: dict, tmp_path: Path, warn=lambda line: None) -> tuple[list, list, dict]:
    """Every pass through the path: the readings, what each pass charged, each job's entry."""
    replay = NvmlReplay(doc)
    source = replay_source(replay, warn=warn)
    book = Ledger(tmp_path, None, "V100", intensity=lambda t_s: 250.0)
    passes, added = [], []
    for _ in replay.passes():
        passes.append(source.read())
        added.append(book.update(passes[-1]))
    jobs = {j: json.loads(job_file(tmp_path, j).read_text())["nodes"][replay.node]
            for j in doc["jobs"] if job_file(tmp_path, j).exists()}
    return passes, added, jobs


@pytest.mark.parametrize("name", FILES)
def test_each_interval_charges_exactly_what_the_counter_gained(name, tmp_path):
    passes, added, jobs = run(doc_of(name), tmp_path)
    for before, after, charged in zip(passes, passes[1:], added[1:]):
        gained = sum(b.energy_j - a.energy_j for a, b in zip(before, after) if b.residents)
        assert sum(charged.values()) == pytest.approx(gained, rel=1e-9, abs=1e-6)
    assert all(e["energy_j"] >= e["idle_j"] >= 0 for e in jobs.values())


@pytest.mark.parametrize("name, worst", [
    ("h100-shard-2", 0.04), ("h100-shard-3", 0.04), ("h100-shard-4", 0.04),
    ("h100-mps-2", 0.04), ("h100-mps-3", 0.04), ("h100-mps-4", 0.05)])
def test_shared_jobs_are_charged_their_true_energy(name, worst, tmp_path):
    """Time-sliced and MPS jobs against the emulated truth: what is left is each job's first
    and last interval (charged to the jobs seen at its end) and NVML's whole-percent samples."""
    doc = doc_of(name)
    _, _, jobs = run(doc, tmp_path)
    errors = {j: jobs[j]["energy_j"] / t - 1 for j, t in doc["truth_j"].items()}
    assert max(abs(e) for e in errors.values()) < worst, errors
    assert {m for e in jobs.values() for m in e["method_j"]} <= {"exclusive", "util-class",
                                                                 "util-solo"}


def test_mps_clients_are_charged_to_their_jobs_not_to_the_server(tmp_path):
    doc = doc_of("h100-mps-3")
    passes, _, jobs = run(doc, tmp_path)
    for p, (reading,) in zip(doc["passes"], passes):
        gpu = p["gpus"][0]
        assert [x["pid"] for x in gpu["nvmlDeviceGetComputeRunningProcesses"]] == [3000]
        clients = {doc["pids"][str(x["pid"])]
                   for x in gpu["nvmlDeviceGetMPSComputeRunningProcesses"]}
        assert {r.job_id for r in reading.residents} == clients
        assert all(r.shares == 33 and r.app == doc["jobs"][r.job_id]["app"]
                   for r in reading.residents)
    assert sorted(jobs) == ["101", "102", "103"]


def test_mig_jobs_share_the_gpus_energy_by_their_slices_and_class(tmp_path):
    """NVML gives one power for the whole GPU: the idle part evenly, the rest by each job's
    slices times its class's solo utilisation and watts per point."""
    passes, added, _ = run(doc_of("h100-mig"), tmp_path)
    k = next(i for i, rs in enumerate(passes[1:], 1) if len(rs[0].residents) == 3 and
             len(passes[i - 1][0].residents) == 3)
    (before,), (after,) = passes[k - 1], passes[k]
    apps = {"101": "vgg16", "102": "alexnet", "103": "lstm"}
    assert [(r.job_id, r.shares, r.app) for r in after.residents] == [
        ("101", 3, "vgg16"), ("102", 2, "alexnet"), ("103", 1, "lstm")]
    for r in after.residents:               # 7 slices instantiated: 3 + 2 + 1 + 1 unused
        assert r.util_pct == pytest.approx(r.shares / 7 * job_class(apps[r.job_id]).util_at(1))
    energy_j, dt_s = after.energy_j - before.energy_j, after.taken_s - before.taken_s
    idle_j = idle_power_w("H100-80GB-HBM3") * dt_s
    assert sum(added[k].values()) == pytest.approx(energy_j)
    dynamic = {j: added[k][j] - idle_j / 3 for j in apps}
    assert all(d > 0 for d in dynamic.values())
    # per slice, as each class's solo dynamic power on the H100 (lstm > vgg16 > alexnet)
    per_slice = {j: dynamic[j] / n for j, n in (("101", 3), ("102", 2), ("103", 1))}
    solo = {j: job_class(a).dynamic_power_at(1, "H100") for j, a in apps.items()}
    assert sorted(per_slice, key=per_slice.get) == sorted(solo, key=solo.get)


# --- a call the GPU cannot answer costs that reading alone -----------------------------------


def unanswered(doc: dict, call: str, error: str = "NVML_ERROR_NOT_SUPPORTED",
               passes: range | None = None) -> dict:
    doc = copy.deepcopy(doc)
    for k in passes if passes is not None else range(len(doc["passes"])):
        doc["passes"][k]["gpus"][0][call] = {"error": error}
    return doc


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


# a call; the reading it degrades; the readings that then differ, each with its fallback
DEGRADED = [
    ("nvmlDeviceGetPowerUsage", "power_w", {"power_w": lambda v: math.isnan(v) or v > 0}),
    ("nvmlDeviceGetTotalEnergyConsumption", "energy_j", {"energy_j": lambda v: v >= 0}),
    ("nvmlDeviceGetUtilizationRates", "util_pct", {"util_pct": lambda v: v == 0.0}),
    ("nvmlDeviceGetMemoryInfo", "mem_used_mib", {"mem_used_mib": math.isnan}),
    ("nvmlDeviceGetPowerManagementLimit", "power_limit_w", {"power_limit_w": math.isnan}),
    ("nvmlDeviceGetComputeRunningProcesses", "compute_processes", {}),
    ("nvmlDeviceGetMPSComputeRunningProcesses", "mps_processes", {}),
    ("nvmlDeviceGetProcessUtilization", "process_util", {"residents": None}),
    ("nvmlDeviceGetMigMode", "mig", {}),
]


@pytest.mark.parametrize("call, reading, fallback", DEGRADED)
def test_an_unanswered_call_degrades_only_its_reading(call, reading, fallback, tmp_path):
    doc = doc_of("h100-shard-3")
    warned: list[str] = []
    error = "NVML_ERROR_UNKNOWN" if reading == "mig" else "NVML_ERROR_NOT_SUPPORTED"
    got, _, _ = run(unanswered(doc, call, error), tmp_path / "got", warned.append)
    want, _, _ = run(doc, tmp_path / "want")
    for (g,), (w,) in zip(got, want):
        for f in ("power_w", "energy_j", "util_pct", "mem_used_mib", "power_limit_w"):
            if f in fallback:
                assert fallback[f](getattr(g, f)), (f, getattr(g, f))
            else:
                assert same(getattr(g, f), getattr(w, f)), (f, getattr(g, f), getattr(w, f))
        assert g.model == w.model == "H100-80GB-HBM3"
        if "residents" in fallback:   # the jobs of the processes NVML lists, utilisation unknown
            assert {r.job_id for r in g.residents} <= {r.job_id for r in w.residents}
            assert all(r.util_pct is None for r in g.residents)
        else:
            assert g.residents == w.residents
    assert len(warned) == 1, warned               # said once, not on every pass
    assert warned[0].startswith(f"readings degraded: GPU 0 {reading}: nvml: {call} on GPU 0")


def test_a_board_without_a_name_is_read_with_no_model(tmp_path):
    got, _, _ = run(unanswered(doc_of("h100-shard-2"), "nvmlDeviceGetName"), tmp_path)
    assert {r.model for rs in got for r in rs} == {""}
    assert all(math.isfinite(r.power_w) and r.power_limit_w == 700.0 for rs in got for r in rs)


def test_without_power_it_is_the_counters_mean_and_without_a_counter_power_integrated(tmp_path):
    doc = doc_of("h100-shard-3")
    want, _, truth = run(doc, tmp_path / "want")
    no_power, _, _ = run(unanswered(doc, "nvmlDeviceGetPowerUsage"), tmp_path / "p")
    assert math.isnan(no_power[0][0].power_w)                  # nothing to take a mean over
    for (a,), (b,), (g,) in zip(want, want[1:], no_power[1:]):
        assert g.power_w == pytest.approx((b.energy_j - a.energy_j) / (b.taken_s - a.taken_s))
    _, _, integrated = run(unanswered(doc, "nvmlDeviceGetTotalEnergyConsumption"),
                           tmp_path / "e")
    for job, entry in truth.items():              # the trapezoid of power over 2 s steps
        assert integrated[job]["energy_j"] == pytest.approx(entry["energy_j"], rel=0.05)


def test_a_counter_that_fails_for_a_while_goes_on_from_its_last_value(tmp_path):
    doc = doc_of("h100-mps-4")
    want, _, truth = run(doc, tmp_path / "want")
    warned: list[str] = []
    got, _, jobs = run(unanswered(doc, "nvmlDeviceGetTotalEnergyConsumption",
                                  passes=range(10, 14)), tmp_path / "got", warned.append)
    energy = [rs[0].energy_j for rs in got]
    assert energy == sorted(energy)                         # no jump back, none ahead
    assert [g[0].energy_j for g in got[:10]] == [w[0].energy_j for w in want[:10]]
    assert [g[0].energy_j for g in got[14:]] == [w[0].energy_j for w in want[14:]]
    total = sum(e["energy_j"] for e in jobs.values())
    assert total == pytest.approx(sum(e["energy_j"] for e in truth.values()), rel=0.01)
    assert len(warned) == 1                  # said when it started, not on every pass


def test_a_counter_back_after_integrating_from_nothing_is_charged_to_nobody(tmp_path):
    """The first read without a counter starts the integral at 0: the counter's return is a
    jump no GPU draws, and that one interval is charged to nobody."""
    doc = doc_of("h100-mps-2")
    _, added, _ = run(unanswered(doc, "nvmlDeviceGetTotalEnergyConsumption",
                                 passes=range(0, 8)), tmp_path)
    assert added[8] == {} and all(added[k] for k in range(9, 20))


def test_slurm_not_answering_costs_the_class_and_shares_only_and_is_said_once():
    replay = NvmlReplay(doc_of("h100-mps-3"))
    answers = iter([CommandError(["squeue"], 1, "Unable to contact slurm controller")] * 20)

    def jobs(seen):
        got = next(answers, None)
        if got is not None:
            raise got
        return replay.node_jobs(seen)

    warned: list[str] = []
    source = NvmlSource(replay.node, Nvml(replay), clock=replay.now_s, job_of=replay.job_of,
                        jobs=jobs, warn=warned.append)
    seen = [source.read()[0] for _ in replay.passes()]
    down, up = seen[5], seen[25]
    assert down.residents and all(r.app == "" and r.shares == 0 for r in down.residents)
    assert all(r.util_pct is not None for r in down.residents)     # still measured
    assert {r.app for r in up.residents} == {"lstm", "resnet18", "transformer"}
    assert len(warned) == 1 and "Slurm's jobs not read" in warned[0]
    assert "Unable to contact slurm controller" in warned[0]


def test_the_benchmark_prints_the_split_errors_and_the_pass_time():
    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_nvml_path.py"
    done = subprocess.run([sys.executable, str(bench), "--passes", "5", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    res = json.loads(done.stdout)
    assert sorted(res["split"]) == FILES
    assert all(res["split"][f]["max_abs"] < 0.05 for f in FILES if f != "h100-mig")
    assert res["split"]["h100-mig"]["max_abs"] < 0.3          # the idle part goes evenly
    assert set(res["split"]["h100-mig"]["splits"]) <= {"exclusive", "util-class", "util-solo"}
    assert 0 < res["nvml_read_median_s"] <= res["pass_median_s"] < 1.0
