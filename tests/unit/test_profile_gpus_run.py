"""PAL's live parts: the emulated GPUs' per-GPU speed, the benchmark job, ``profile-gpus run``
(planning, waiting, classifying, storing), and profile freshness (age, uuid changes)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import MappingProxyType

import pytest
from click.testing import CliRunner

from slurm_plugin.commands import profile_run as pr
from slurm_plugin.commands.profile_gpus import profile_gpus
from slurm_plugin.emulated_train import gpu_speed_factor
from slurm_plugin.errors import ConfigError, InputError
from slurm_plugin.localcluster.render import render, render_all
from slurm_plugin.localcluster.spec import EMULATED_GPUS, Spec
from slurm_plugin.model import Cluster, Gpu, JobRequest, Node
from slurm_plugin.node import gpu_bench
from slurm_plugin.node.emulated import (emulated_gpus, emulated_profile_csv, emulated_uuid,
                                        job_gpu_indexes, variability_factor)
from slurm_plugin.physics.gpu_profile import build_profile, read_runs, write_profile
from slurm_plugin.physics.variability import load_profile
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.base import Context
from slurm_plugin.policy.pal.freshness import parse_time, stale_gpus
from slurm_plugin.policy.pal.settings import parse_settings

GPUS = [(f"gpu{n}", i) for n in range(1, 5) for i in range(4)]


def _site(tmp_path: Path) -> Path:
    p = tmp_path / "site.toml"
    p.write_text("")
    return p


def _emulated(tmp_path: Path, seed: int = 3) -> Path:
    p = tmp_path / "emulated.csv"
    p.write_text(emulated_profile_csv("wattbatch", GPUS, seed))
    return p


# --- the emulated GPUs' speed ---------------------------------------------------------------

def test_emulated_profile_spreads_the_builtin_rows_as_the_simulator_does(tmp_path):
    table = emulated_gpus(str(_emulated(tmp_path)))
    want = load_profile().factors(16, 3)
    assert [table[k][1] for k in GPUS] == [tuple(round(f[c], 6) for c in "ABCD") for f in want]
    assert len({u for u, _ in table.values()}) == 16
    assert table[("gpu1", 0)][0] == emulated_uuid("wattbatch", "gpu1", 0, 3)
    assert emulated_uuid("wattbatch", "gpu1", 0, 4) != emulated_uuid("wattbatch", "gpu1", 0, 3)
    # the seed the local cluster uses makes Slurm's first GPU a slow one for class A
    assert table[("gpu1", 0)][1][0] > 1.05
    assert min(f[0] for _, f in table.values()) < 1.0


def test_variability_factor_is_the_slowest_gpu_and_median_elsewhere(tmp_path):
    path = str(_emulated(tmp_path))
    table = emulated_gpus(path)
    assert variability_factor(path, "gpu1", (0,), "A") == table[("gpu1", 0)][1][0]
    assert variability_factor(path, "gpu1", (1, 0), "A") == max(table[("gpu1", 0)][1][0],
                                                                table[("gpu1", 1)][1][0])
    assert variability_factor(path, "gpu1", (0,), "B") == table[("gpu1", 0)][1][1]
    assert variability_factor(path, "other", (0,), "A") == 1.0
    assert variability_factor(path, "gpu1", (), "A") == 1.0
    assert variability_factor("", "gpu1", (0,), "A") == 1.0
    with pytest.raises(InputError, match="node.emulated_variability: .*cannot read"):
        variability_factor(str(tmp_path / "none.csv"), "gpu1", (0,), "A")


def test_job_gpu_indexes_reads_slurms_variables_in_order():
    assert job_gpu_indexes({"SLURM_JOB_GPUS": "2,3", "SLURM_STEP_GPUS": "0"}) == (2, 3)
    assert job_gpu_indexes({"SLURM_STEP_GPUS": "1"}) == (1,)
    assert job_gpu_indexes({"SLURM_JOB_GPUS": "x", "GPU_DEVICE_ORDINAL": "3"}) == (3,)
    assert job_gpu_indexes({}) == ()


def test_emulated_training_runs_at_its_gpus_speed(tmp_path, monkeypatch):
    path = _emulated(tmp_path)
    monkeypatch.setenv("WATTBATCH_SITE_CONFIG", str(_site(tmp_path)))
    monkeypatch.setenv("WATTBATCH_NODE_GPU_SOURCE", "emulated")
    monkeypatch.setenv("WATTBATCH_NODE_EMULATED_VARIABILITY", str(path))
    env = {"SLURM_JOB_ID": "7", "SLURMD_NODENAME": "gpu1", "SLURM_JOB_GPUS": "0"}
    slow = emulated_gpus(str(path))[("gpu1", 0)][1]
    assert gpu_speed_factor("resnet18", env) == slow[0]          # class A
    assert gpu_speed_factor("bert", env) == slow[1]              # class B
    assert gpu_speed_factor("resnet18", {**env, "SLURM_JOB_ID": ""}) == 1.0
    monkeypatch.setenv("WATTBATCH_NODE_GPU_SOURCE", "nvml")
    assert gpu_speed_factor("resnet18", env) == 1.0


def test_local_cluster_writes_the_emulated_profile_and_names_it_in_its_site_config(tmp_path):
    spec = Spec(state_dir=tmp_path)
    files = render_all(spec, "pw")
    assert files[EMULATED_GPUS] == emulated_profile_csv("wattbatch", spec.gpu_keys, 3)
    site = render("site.toml.j2", spec, influx_user="u", influx_password="p")
    assert f'emulated_variability = "{tmp_path / "etc" / EMULATED_GPUS}"' in site
    other = render_all(Spec(state_dir=tmp_path, variability_seed=5), "pw")[EMULATED_GPUS]
    assert other != files[EMULATED_GPUS]


# --- the benchmark job ----------------------------------------------------------------------

class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s + 0.003            # every sleep overshoots a little


def test_emulated_runs_sleep_to_deadlines_so_overshoots_do_not_add_up():
    c = FakeClock()
    times = gpu_bench.emulated_runs(1.1, runs=3, steps=10, step_s=0.2, clock=c, sleep=c.sleep)
    assert len(times) == 3
    for t in times:
        assert t == pytest.approx(2.2, abs=0.0031)


def test_bench_writes_one_result_per_gpu(tmp_path, monkeypatch):
    path = _emulated(tmp_path)
    monkeypatch.setattr(gpu_bench, "emulated_runs",
                        lambda f, runs, steps, step_s: [f * steps * step_s] * runs)
    env = {"SLURMD_NODENAME": "gpu1", "SLURM_JOB_GPUS": "0,2", "SLURM_JOB_ID": "9"}
    out = tmp_path / "out"
    out.mkdir()
    res = gpu_bench.bench(out, ["resnet", "bert"], 2, 5, 0.2, True, str(path), env)
    table = emulated_gpus(str(path))
    got = json.loads((out / "result-gpu1-2.json").read_text())
    assert got["uuid"] == table[("gpu1", 2)][0] and got["mode"] == "emulated"
    assert got["runs"]["resnet"] == [pytest.approx(table[("gpu1", 2)][1][0])] * 2
    assert got["runs"]["bert"] == [pytest.approx(table[("gpu1", 2)][1][1])] * 2
    assert got["job_id"] == "9" and got["error"] == ""
    assert [r["gpu_index"] for r in res] == [0, 2]


def test_bench_without_torch_reports_why_for_each_gpu(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_bench, "_torch", lambda: (None, "torch is not installed: x"))
    env = {"SLURMD_NODENAME": "n1", "SLURM_JOB_GPUS": "1"}
    res = gpu_bench.bench(tmp_path, ["resnet"], 1, 1, 0.1, False, "", env)
    assert res[0]["error"] == "torch is not installed: x" and res[0]["runs"] == {}
    assert json.loads((tmp_path / "result-n1-1.json").read_text())["error"]
    assert gpu_bench.bench(tmp_path, ["resnet"], 1, 1, 0.1, False, "", {}) == []


# --- profile-gpus run -------------------------------------------------------------------------

def _cluster(typed: bool = True, down: str = "") -> Cluster:
    nodes = []
    for n in ("gpu1", "gpu2"):
        gpus = tuple(Gpu(node=n, index=i, gres_type=f"g{i}" if typed else "") for i in range(2))
        nodes.append(Node(name=n, gpus=gpus, state="down" if n == down else "idle"))
    nodes.append(Node(name="cpu1"))
    return Cluster(nodes=tuple(nodes))


def test_plan_pins_one_job_per_typed_gpu_else_one_per_node():
    plan = pr.plan_jobs(_cluster(), None)
    assert [(j.node, j.gpus) for j in plan] == [("gpu1", (0,)), ("gpu1", (1,)),
                                                 ("gpu2", (0,)), ("gpu2", (1,))]
    assert plan[1].sbatch_args == ("--nodelist=gpu1", "--gres=gpu:g1:1")
    per_node = pr.plan_jobs(_cluster(typed=False), ["gpu2"])
    assert [(j.node, j.gpus) for j in per_node] == [("gpu2", (0, 1))]
    assert "--gres=gpu:2" in per_node[0].sbatch_args
    assert [j.node for j in pr.plan_jobs(_cluster(), None, "node")] == ["gpu1", "gpu2"]
    assert [j.node for j in pr.plan_jobs(_cluster(down="gpu1"), None)] == ["gpu2", "gpu2"]
    with pytest.raises(InputError, match="no GRES type"):
        pr.plan_jobs(_cluster(typed=False), None, "gpu")


def _result(out: Path, node: str, index: int, times, uuid: str = "", error: str = "") -> None:
    gpu_bench.write_result(out, {"node": node, "gpu_index": index, "uuid": uuid or
                                 f"GPU-{node}-{index}", "mode": "emulated",
                                 "runs": {"resnet": times} if times else {}, "error": error})


def test_wait_shows_progress_and_names_the_gpus_that_did_not_report(tmp_path):
    jobs = {"1": pr.BenchJob("gpu1", (0,), ()), "2": pr.BenchJob("gpu1", (1,), ()),
            "3": pr.BenchJob("gpu2", (0,), ())}
    c = FakeClock()
    lines: list[str] = []
    _result(tmp_path, "gpu1", 0, [1.0])
    queue = {"2": "RUNNING", "3": "PENDING"}
    w = pr.wait_results(tmp_path, jobs, 10, lambda: dict(queue), lines.append, clock=c,
                        sleep=c.sleep)
    assert w.missing == {("gpu1", 1), ("gpu2", 0)} and set(w.results) == {("gpu1", 0)}
    assert w.elapsed_s >= 10
    assert lines[0].startswith("profile-gpus: 1/3 GPUs reported; jobs: 1 running, 1 pending")
    assert pr.gpu_names(w.missing) == "gpu1:1, gpu2:0"
    # a job that left the queue without a result failed; the others reported
    _result(tmp_path, "gpu1", 1, [1.1])
    _result(tmp_path, "gpu2", 0, [1.0])
    queue.clear()
    jobs["4"] = pr.BenchJob("gpu3", (0,), ())
    w2 = pr.wait_results(tmp_path, jobs, 10, lambda: {"4": "FAILED"}, lines.append, clock=c,
                         sleep=c.sleep)
    assert w2.failed == {("gpu3", 0): f"job 4 ended FAILED without a result (see "
                                      f"{tmp_path}/job-4.out)"}
    assert not w2.missing and len(w2.results) == 3
    assert 5 <= w2.elapsed_s < 7                  # the grace for a shared filesystem
    w3 = pr.wait_results(tmp_path, {"5": pr.BenchJob("gpu4", (0,), ())}, 10, lambda: {},
                         lines.append, clock=c, sleep=c.sleep)
    assert w3.failed[("gpu4", 0)].startswith("job 5 left the queue without a result")
    # finished jobs still listed are neither running nor pending
    done = pr.wait_results(tmp_path, {"1": jobs["1"]}, 10, lambda: {"1": "COMPLETED"},
                           lines.append, clock=c, sleep=c.sleep)
    assert lines[-1].startswith("profile-gpus: 1/1 GPUs reported; jobs: 0 running, 0 pending")
    assert not done.failed


def test_results_become_the_profile_import_writes_and_gpu_perf_points(tmp_path):
    times = {("gpu1", 0): 2.23, ("gpu1", 1): 2.0, ("gpu2", 0): 1.99, ("gpu2", 1): 2.01,
             ("gpu3", 0): 2.0, ("gpu3", 1): 2.11}
    for (n, i), t in times.items():
        _result(tmp_path, n, i, [t, t * 1.001, t * 0.999])
    results = pr.read_results(tmp_path, set(times))
    rows = pr.measurement_rows(results)
    assert len(rows) == 18 and rows[0] == {"exp": "resnet", "node": "gpu1", "device": "0",
                                           "uuid": "GPU-gpu1-0", "time": "2.230000",
                                           "measured_at": ""}
    runs = tmp_path / "p.runs.csv"
    pr.write_measurements(rows, runs)
    prof = build_profile(read_runs([runs]))
    out = tmp_path / "p.csv"
    write_profile(prof, out, measured_at="2026-01-02T03:04:05+00:00")
    loaded = load_profile(out)
    factors = {k: f[0] for k, f in loaded.by_gpu().items()}
    slow = {k for k, f in factors.items() if f > 1.03}
    assert slow == {("gpu1", 0), ("gpu3", 1)}
    assert loaded.measured_at == ("2026-01-02T03:04:05+00:00",) * 6
    pts = pr.influx_points(prof, results, "c1", 1000.0)
    assert len(pts) == 6
    line = next(p.to_line() for p in pts if p.tags["node"] == "gpu1" and p.tags["gpu"] == "0")
    assert line.startswith("gpu_perf,app_class=A,cluster=c1,gpu=0,node=gpu1,uuid=GPU-gpu1-0 ")
    assert "runs=3i" in line and "time_s=2.23" in line
    # a GPU swapped since: its uuid differs from the previous profile's
    for (n, i), t in times.items():
        _result(tmp_path, n, i, [t], uuid="GPU-new" if (n, i) == ("gpu2", 1) else "")
    rows2 = build_profile(read_runs([_write(tmp_path, pr.read_results(tmp_path, set(times)))]))
    assert pr.uuid_changes(out, rows2) == ["gpu2:1 GPU-gpu2-1 -> GPU-new"]


def _write(tmp_path: Path, results) -> Path:
    p = tmp_path / "again.runs.csv"
    pr.write_measurements(pr.measurement_rows(results), p)
    return p


def test_run_command_reports_gpus_that_timed_out_and_cancels_their_jobs(tmp_path, monkeypatch):
    calls: list[tuple[str, list]] = []
    ids = iter(range(100, 200))

    def fake_slurm(cmd, args, cfg, input_text=None, check=True, timeout_s=None):
        calls.append((cmd, list(args)))
        out = str(next(ids)) if cmd == "sbatch" else ""
        if cmd == "sbatch":
            node = next(a for a in args if a.startswith("--nodelist=")).split("=")[1]
            gres = next(a for a in args if a.startswith("--gres=")).split(":")[1]
            if (node, gres) != ("gpu2", "g1"):        # every GPU but gpu2:1 reports
                _result(work, node, int(gres[1:]), [1.0])
            assert "slurm_plugin.node.gpu_bench" in input_text

        class Done:
            stdout = out
        return Done()

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setattr("slurm_plugin.slurm.cli.slurm", fake_slurm)
    monkeypatch.setattr("slurm_plugin.slurm.snapshot.snapshot", lambda cfg: _cluster())
    monkeypatch.setattr(pr, "wait_results", _fast_wait)
    from slurm_plugin import config
    cfg = config.load(_site(tmp_path), environ={})
    with pytest.raises(Exception) as exc:
        pr.run_profile(cfg, tmp_path / "p.csv", ["resnet"], None, None, "auto", 1, 1, 0.1,
                       2.0, work, "python3", False, lambda line: None)
    assert "no result after 2 s from 1 GPUs: gpu2:1 (their jobs were cancelled)" in str(exc.value)
    assert [c for c, _ in calls].count("sbatch") == 4
    assert calls[-1][0] == "scancel" and not (tmp_path / "p.csv").exists()


_WAIT = pr.wait_results


def _fast_wait(work_dir, jobs, timeout_s, queue, progress, **kw):
    c = FakeClock()
    return _WAIT(work_dir, jobs, timeout_s, lambda: {j: "RUNNING" for j in jobs},
                           progress, clock=c, sleep=c.sleep)


# --- freshness ----------------------------------------------------------------------------

def _profile(tmp_path: Path, stamps: list[str]) -> Path:
    p = tmp_path / "prof.csv"
    lines = ["node,gpu_index,uuid,PerfVar_classA,PerfVar_classB,PerfVar_classC,PerfVar_classD,"
             "measured_at"]
    for i, s in enumerate(stamps):
        lines.append(f"n0,{i},GPU-{i},{1.0 + 0.1 * i},1,1,1,{s}")
    p.write_text("\n".join(lines) + "\n")
    return p


def test_rows_go_stale_by_age_and_by_uuid(tmp_path):
    now = parse_time("2026-03-01T00:00:00Z")
    p = _profile(tmp_path, ["2026-02-25T00:00:00Z", "2026-01-01T00:00:00+00:00", ""])
    os.utime(p, (now - 40 * 86400, now - 40 * 86400))
    prof = load_profile(p)
    got = stale_gpus(prof, p.stat().st_mtime, now, 30)
    assert set(got) == {("n0", 1), ("n0", 2)}
    assert got[("n0", 1)] == "measured 59.0 days ago (profile_max_age_days = 30)"
    assert stale_gpus(prof, p.stat().st_mtime, now, 0) == {}
    swapped = stale_gpus(prof, p.stat().st_mtime, now, 0, {("n0", 0): "GPU-x", ("n0", 1): "GPU-1"})
    assert swapped == {("n0", 0): "uuid changed: profiled GPU-0, now GPU-x"}
    assert parse_time("nonsense") is None and parse_time("2026-01-01T00:00:00") == \
        parse_time("2026-01-01T00:00:00Z")


def test_show_lists_stale_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("WATTBATCH_SITE_CONFIG", str(_site(tmp_path)))
    old = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 50 * 86400))
    new = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    p = _profile(tmp_path, [new, old])
    res = CliRunner().invoke(profile_gpus, ["show", str(p), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["stale"] == 1 and data["gpus"][1]["stale"].startswith("measured 50.0 days ago")
    assert data["gpus"][0]["stale"] == "" and data["gpus"][0]["measured_at"] == new
    text = CliRunner().invoke(profile_gpus, ["show", str(p)]).output
    assert "stale: 1 of 2 GPUs" in text and "n0:1" in text.split("stale:")[1]
    fresh = CliRunner().invoke(profile_gpus, ["show", str(p), "--max-age-days", "0"]).output
    assert "stale:" not in fresh
    # the emulated GPUs' uuids are the current ones: a profile of other uuids is stale
    emu = _emulated(tmp_path)
    monkeypatch.setenv("WATTBATCH_NODE_GPU_SOURCE", "emulated")
    monkeypatch.setenv("WATTBATCH_NODE_EMULATED_VARIABILITY", str(emu))
    q = tmp_path / "q.csv"
    q.write_text(p.read_text().replace("n0,0,GPU-0", "gpu1,0,GPU-0").replace("n0,1,", "n9,1,"))
    data = json.loads(CliRunner().invoke(profile_gpus, ["show", str(q), "--json"]).output)
    assert data["gpus"][0]["stale"].startswith("uuid changed: profiled GPU-0, now GPU-")


def test_pal_says_when_the_chosen_gpus_profile_is_stale(tmp_path):
    now = parse_time("2026-03-01T00:00:00Z")
    p = _profile(tmp_path, ["2026-01-01T00:00:00Z", "2026-02-28T00:00:00Z"])
    p.write_text(p.read_text().replace("n0,0,GPU-0,1.0,", "n0,0,GPU-0,0.9,"))
    cluster = Cluster(nodes=(Node(name="n0", gpus=(Gpu(node="n0", index=0),
                                                   Gpu(node="n0", index=1))),))
    req = JobRequest(gpus=1, app="resnet18")
    ctx = Context(cluster=cluster, now_s=now, settings=MappingProxyType({"profile": str(p)}))
    pl = get_policy("pal").advise(req, ctx)
    assert pl.gpu_indexes == (0,)           # an aged row is still used
    assert pl.why[0].endswith("; profile stale (older than 30 days, re-run wattctl "
                              "profile-gpus run) for n0:0")
    ctx2 = Context(cluster=cluster, now_s=now, settings=MappingProxyType(
        {"profile": str(p), "profile_max_age_days": 90}))
    assert "stale" not in get_policy("pal").advise(req, ctx2).why[0]
    with pytest.raises(ConfigError, match="profile_max_age_days"):
        parse_settings(MappingProxyType({"profile_max_age_days": -1}))


def test_pal_explains_each_chosen_gpus_cluster(tmp_path):
    for (n, i), t in {("n0", 0): 2.3, ("n0", 1): 2.0, ("n1", 0): 2.01, ("n1", 1): 1.99}.items():
        _result(tmp_path, n, i, [t])
    runs = _write(tmp_path, pr.read_results(tmp_path, {("n0", 0), ("n0", 1), ("n1", 0),
                                                       ("n1", 1)}))
    out = tmp_path / "p.csv"
    write_profile(build_profile(read_runs([runs])), out)
    cluster = Cluster(nodes=tuple(Node(name=n, gpus=(Gpu(node=n, index=0), Gpu(node=n, index=1)))
                                  for n in ("n0", "n1")))
    ctx = Context(cluster=cluster, settings=MappingProxyType({"profile": str(out)}))
    pl = get_policy("pal").advise(JobRequest(gpus=2, app="resnet18"), ctx)
    assert pl.nodes == ("n1",)
    assert "n1:0 x1.000 (A0), n1:1 x1.000 (A0); predicted slowdown 1.000" in pl.why[0], pl.why
    pl_b = get_policy("pal").advise(JobRequest(gpus=1, app="bert"), ctx)
    assert "x1.000 (unmeasured)" in pl_b.why[0] and "class B" in pl_b.why[0]


def test_merge_keeps_the_runs_of_gpus_not_measured_again(tmp_path):
    out = tmp_path / "p.csv"
    first = {("gpu1", 0): 2.3, ("gpu1", 1): 2.0, ("gpu2", 0): 2.0, ("gpu2", 1): 2.01}
    for (n, i), t in first.items():
        _result(tmp_path, n, i, [t, t])
    rows = pr.measurement_rows(pr.read_results(tmp_path, set(first)), "2026-01-01T00:00:00+00:00")
    pr.write_measurements(rows, pr.runs_path(out))
    # gpu1 measured again: its GPU 0 is now fast; gpu2 keeps its old runs and time
    again = {("gpu1", 0): {"node": "gpu1", "gpu_index": 0, "uuid": "GPU-gpu1-0",
                           "runs": {"resnet": [2.0]}},
             ("gpu1", 1): {"node": "gpu1", "gpu_index": 1, "uuid": "GPU-gpu1-1",
                           "runs": {"resnet": [2.0]}}}
    merged = pr.merge_runs(pr.runs_path(out), pr.measurement_rows(again, "2026-02-01T00:00:00Z"))
    assert len(merged) == 6
    assert sorted({(r["node"], r["device"], r["measured_at"]) for r in merged}) == [
        ("gpu1", "0", "2026-02-01T00:00:00Z"), ("gpu1", "1", "2026-02-01T00:00:00Z"),
        ("gpu2", "0", "2026-01-01T00:00:00+00:00"), ("gpu2", "1", "2026-01-01T00:00:00+00:00")]
    pr.write_measurements(merged, pr.runs_path(out))
    prof = build_profile(read_runs([pr.runs_path(out)]))
    write_profile(prof, out, measured_at=pr.latest_times(merged))
    loaded = load_profile(out)
    assert all(f[0] < 1.01 for f in loaded.by_gpu().values())
    assert dict(zip(loaded.keys, loaded.measured_at))[("gpu2", 1)] == "2026-01-01T00:00:00+00:00"
    assert dict(zip(loaded.keys, loaded.measured_at))[("gpu1", 0)] == "2026-02-01T00:00:00Z"
    assert len(pr.influx_points(prof, again, "c", 1.0)) == 2     # the GPUs measured now
    with pytest.raises(InputError, match="cannot read .*run once without --merge"):
        pr.merge_runs(tmp_path / "none.csv", [])


class _FakeTensor:
    def __matmul__(self, other):
        return self

    def __mul__(self, k):
        return self


class _FakeCuda:
    def __init__(self, available: bool) -> None:
        self.available, self.synced = available, []

    def is_available(self) -> bool:
        return self.available

    def synchronize(self, dev) -> None:
        self.synced.append(dev)

    def get_device_properties(self, ordinal):
        class Props:
            uuid = f"abc-{ordinal}"
        return Props()


class _FakeTorch:
    float16 = "f16"

    def __init__(self, available: bool = True) -> None:
        self.cuda = _FakeCuda(available)

    def device(self, name: str) -> str:
        return name

    def randn(self, *shape, device=None, dtype=None):
        return _FakeTensor()


def test_real_gpus_are_timed_with_torch_where_it_imports(tmp_path, monkeypatch):
    import sys
    fake = _FakeTorch()
    monkeypatch.setitem(sys.modules, "torch", fake)
    env = {"SLURMD_NODENAME": "n1", "SLURM_JOB_GPUS": "2,3"}
    res = gpu_bench.bench(tmp_path, ["resnet"], 2, 3, 0.1, False, "", env)
    assert [(r["gpu_index"], r["uuid"], r["mode"], r["error"]) for r in res] == [
        (2, "GPU-abc-0", "cuda", ""), (3, "GPU-abc-1", "cuda", "")]
    assert all(len(r["runs"]["resnet"]) == 2 for r in res)
    # one warm-up and one sync per run, on the job's own devices (ordinals 0, 1)
    assert fake.cuda.synced == ["cuda:0"] * 3 + ["cuda:1"] * 3
    monkeypatch.setitem(sys.modules, "torch", _FakeTorch(available=False))
    assert gpu_bench._torch() == (None, "torch finds no CUDA device")
    monkeypatch.setitem(sys.modules, "torch", None)      # import torch raises ImportError
    assert gpu_bench._torch()[1].startswith("torch is not installed")
