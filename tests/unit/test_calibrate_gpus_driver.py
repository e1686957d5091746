"""``wattctl calibrate-gpus`` against a fake Slurm (no cluster): one job per model, progress,
the site file written whole only when every model's run is sane, and left as it was (with the
reason) when a job is killed, reaches no GPU, measures nonsense or does not finish in time."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from calibrate_fakes import synthetic_result
from click.testing import CliRunner

from slurm_plugin import config
from slurm_plugin.commands import calibrate_run as cr
from slurm_plugin.commands.calibrate_gpus import calibrate_gpus
from slurm_plugin.errors import ConfigError
from slurm_plugin.model import Cluster, Gpu, Job, Node
from slurm_plugin.physics import gpu_models as gm
from slurm_plugin.physics.calibrate_fit import CalibrationError

H100, V100 = "H100-80GB-HBM3", "V100-SXM2-32GB"


def _cluster(jobs: dict[str, str] | None = None) -> Cluster:
    nodes = []
    for name, model, busy in (("gpu1", H100, {0}), ("gpu2", H100, set()), ("gpu3", V100, set()),
                              ("gpu4", V100, {0, 1, 2, 3})):
        gpus = tuple(Gpu(node=name, index=i, model=model, gres_type=f"h{i}" if model == H100
                         else f"g{i}", exclusive_job="x" if i in busy else None)
                     for i in range(4))
        nodes.append(Node(name=name, gpus=gpus, state="down" if name == "gpu4" else "mixed"))
    return Cluster(nodes=tuple(nodes), jobs={j: Job(job_id=j, state=s)
                                             for j, s in (jobs or {}).items()})


class FakeSlurm:
    """sinfo, sbatch (each job's result as ``results`` says: a dict, or None for none),
    scancel; ``states``: what squeue shows of each job (absent: left the queue)."""

    def __init__(self, work: Path, results: dict[str, dict | None], states: dict[str, str]):
        self.work, self.results, self.states = work, results, states
        self.calls: list[tuple[str, list[str]]] = []
        self.next_id = 100

    def __call__(self, cmd, args, cfg, input_text=None, check=True, timeout_s=None):
        self.calls.append((cmd, list(args)))
        out = ""
        if cmd == "sinfo":
            out = "gpu[1-4]"
        elif cmd == "sbatch":
            assert "slurm_plugin.node.calibrate_job" in input_text
            jid, self.next_id = str(self.next_id), self.next_id + 1
            node = next(a for a in args if a.startswith("--nodelist=")).split("=")[1]
            result = self.results.get(node)
            if result is not None:
                (self.work / f"calibration-{jid}.json").write_text(json.dumps(
                    {**result, "job_id": jid, "node": node}))
            out = f"{jid};cluster"

        class Done:
            stdout = out
        return Done()

    def sbatch_args(self) -> list[list[str]]:
        return [a for c, a in self.calls if c == "sbatch"]


def _fast_wait(real):
    def wait(work_dir, jobs, deadline_s, queue, progress, **kw):
        class Clock:
            t = time.time()

            def __call__(self):
                return self.t

            def sleep(self, s):
                self.t += s
        c = Clock()
        return real(work_dir, jobs, deadline_s, queue, progress, clock=c, sleep=c.sleep)
    return wait


@pytest.fixture(autouse=True)
def _site_models_reset():
    gm.use_site_models(None)
    yield
    gm.use_site_models(None)


@pytest.fixture()
def fake(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    site = tmp_path / "site.toml"
    site_file = tmp_path / "site-gpus.json"
    site.write_text(f'[physics]\nsite_gpu_models = "{site_file}"\n')
    monkeypatch.setenv("WATTBATCH_SITE_CONFIG", str(site))
    monkeypatch.setattr(cr, "wait_results", _fast_wait(cr.wait_results))

    def make(results: dict[str, dict | None], states: dict[str, str] | None = None):
        slurm = FakeSlurm(work, results, states or {})
        monkeypatch.setattr("slurm_plugin.slurm.cli.slurm", slurm)
        monkeypatch.setattr("slurm_plugin.slurm.snapshot.snapshot",
                            lambda cfg: _cluster({j: s for j, s in slurm.states.items()}))
        return slurm
    make.work, make.site_file = work, site_file
    return make


def _good(model: str) -> dict:
    if model == H100:
        return synthetic_result(idle_w=72.5, dynamic_w=387.0, gamma=0.75, beta=0.84,
                                min_w=234.0, max_w=700.0, model=model)
    return synthetic_result(idle_w=41.44, dynamic_w=185.57, gamma=0.75, beta=0.45, min_w=100.0,
                            max_w=250.0, model=model)


def _run(fake, minutes: float = 2.0) -> dict:
    lines: list[str] = []
    cfg = config.load()
    out = cr.run_calibration(cfg, "gpu", minutes, str(fake.site_file), "site.toml", fake.work,
                             "python3", lines.append)
    out["progress"] = lines
    return out


def test_plan_is_one_job_per_model_on_the_freest_node():
    plan = cr.plan_jobs(_cluster(), ["gpu1", "gpu2", "gpu3", "gpu4"])
    assert [(j.model, j.node, j.index, j.sbatch_args) for j in plan] == [
        (H100, "gpu2", 0, ("--nodelist=gpu2", "--gres=gpu:h0:1")),     # 4 free H100s there
        (V100, "gpu3", 0, ("--nodelist=gpu3", "--gres=gpu:g0:1"))]     # gpu4 is down
    untyped = Cluster(nodes=(Node(name="n1", gpus=(Gpu(node="n1", index=0, model=V100),)),))
    assert cr.plan_jobs(untyped, ["n1"])[0].sbatch_args == ("--nodelist=n1", "--gres=gpu:1")
    assert cr.plan_jobs(_cluster(), ["gpu4"]) == []


def test_every_model_sane_writes_the_site_file_and_prints_the_table(fake):
    slurm = fake({"gpu2": _good(H100), "gpu3": _good(V100)})
    done = CliRunner().invoke(calibrate_gpus, ["-p", "gpu", "--minutes", "2", "--work-dir",
                                               str(fake.work)])
    assert done.exit_code == 0, done.output
    doc = json.loads(fake.site_file.read_text())
    assert set(doc["models"]) == {H100, V100}
    rec = doc["models"][H100]["util_gamma"]
    assert rec["value"] == pytest.approx(0.75, rel=1e-3) and rec["source"] == "measured"
    assert rec["how"].startswith("wattctl calibrate-gpus ") and "on gpu2:0 (job 100" in rec["how"]
    assert doc["calibrations"][V100]["samples"]["workload"] == _good(V100)["workload"]
    assert "calibrate-gpus: 2 GPU models calibrated" in done.output
    row = next(line for line in done.output.splitlines() if "cap_beta" in line and
               "0.84" in line)
    assert row.split()[:3] == ["cap_beta", "0.84", "0.84"]
    assert "calibrate-gpus: 2 jobs submitted for H100-80GB-HBM3, V100-SXM2-32GB" in done.output
    assert "--time=2" in slurm.sbatch_args()[0] and "--partition=gpu" in slurm.sbatch_args()[0]
    assert [c for c, _ in slurm.calls][-1] == "scancel"


def test_json_gives_shipped_and_calibrated_per_constant(fake):
    fake({"gpu2": _good(H100), "gpu3": _good(V100)})
    out = _run(fake)
    c = out["models"][H100]["constants"]["idle_power_w"]
    assert (c["shipped"], c["calibrated"]) == (72.5, 72.5) and c["points"] == 4
    assert out["models"][V100]["constants"]["max_power_w"]["fit_error"] is None
    assert any(line.startswith(f"calibrate-gpus: {H100} (job 100 on gpu2:0): measured")
               for line in out["progress"])


def _left_as_it_was(fake, match: str) -> None:
    fake.site_file.write_text(json.dumps({"models": {V100: {"idle_power_w": {
        "value": 40.0, "source": "measured"}}}}))
    before = fake.site_file.read_text()
    with pytest.raises(CalibrationError, match=match) as exc:
        _run(fake)
    assert f"{fake.site_file} is left as it was" in str(exc.value)
    assert fake.site_file.read_text() == before


def test_a_killed_job_leaves_the_site_file_as_it_was(fake):
    fake({"gpu2": _good(H100), "gpu3": None}, states={"101": "CANCELLED"})
    _left_as_it_was(fake, r"V100-SXM2-32GB \(job 101 on gpu3:0\): job 101 ended CANCELLED "
                          r"without a result \(killed")


def test_a_job_that_reaches_no_gpu_leaves_it_as_it_was(fake):
    fake({"gpu2": _good(H100), "gpu3": {"error": "the job holds no GPU (SLURM_JOB_GPUS, ...)",
                                        "gpu_index": None}})
    _left_as_it_was(fake, r"job 101 on gpu3:0\): the job holds no GPU")


def test_nonsense_leaves_it_as_it_was_even_when_the_other_model_is_sane(fake):
    bad = _good(V100)
    bad["loads"][2]["power_w"] = 400.0
    fake({"gpu2": _good(H100), "gpu3": bad})
    _left_as_it_was(fake, r"job 101 on gpu3:0\): load 30%: power 400.0 W is above the power "
                          r"limit 250 W")


def test_idle_above_load_is_named(fake):
    bad = _good(H100)
    bad["idle_w"] = [400.0] * 4
    fake({"gpu2": bad, "gpu3": _good(V100)})
    _left_as_it_was(fake, r"idle power 400.0 W is above the power under load")


def test_a_job_still_pending_at_the_deadline_is_cancelled_and_named(fake):
    slurm = fake({"gpu2": _good(H100), "gpu3": None}, states={"101": "PENDING"})
    _left_as_it_was(fake, r"V100-SXM2-32GB \(job 101 on gpu3:0\): no result within 2 min "
                          r"\(the job was cancelled\)")
    assert slurm.calls[-1] == ("scancel", ["100", "101"])


def test_a_bad_site_file_is_named_before_any_job_runs(fake):
    slurm = fake({"gpu2": _good(H100), "gpu3": _good(V100)})
    fake.site_file.write_text('{"models": {"V100": {"idle_power_w": {"value": 0, '
                              '"source": "measured"}}}}')
    with pytest.raises(ConfigError, match=r"models.V100.idle_power_w.value = 0: expected a "
                                          r"finite number above 0"):
        _run(fake)
    assert slurm.sbatch_args() == []


def test_without_a_site_file_the_key_is_named(fake, monkeypatch):
    fake({})
    monkeypatch.setenv("WATTBATCH_PHYSICS_SITE_GPU_MODELS", "")
    done = CliRunner().invoke(calibrate_gpus, ["-p", "gpu"])
    assert done.exit_code != 0
    assert "physics.site_gpu_models = '': no site GPU model file to write" in str(done.exception)


def _paired(model: str, **change) -> dict:
    from calibrate_fakes import pair_samples
    gm.use_site_models("")            # the samples from the shipped physics
    pairs = [{**p, **change} for p in pair_samples(model)]
    gm.use_site_models(None)
    return {**_good(model), "pair": pairs}


def test_the_pair_constants_are_written_printed_and_in_the_json(fake):
    mps_cut = {**_paired(V100), "notes": ["co-located pair cut short by the deadline before "
                                          "aps as a mps pair: mps not measured"]}
    mps_cut["pair"] = mps_cut["pair"][:1]
    fake({"gpu2": _paired(H100), "gpu3": mps_cut})
    done = CliRunner().invoke(calibrate_gpus, ["-p", "gpu", "--minutes", "2", "--work-dir",
                                               str(fake.work)])
    assert done.exit_code == 0, done.output
    doc = json.loads(fake.site_file.read_text())
    h100 = doc["models"][H100]
    assert h100["interference_k"]["value"] == h100["interference_k_mps"]["value"] == 0.6
    assert h100["colocation_pairs"]["value"]["aps|aps"] == [0.8089, 0.8089]
    assert h100["colocation_pairs"]["value"]["vgg16|vgg16"] == [0.36, 0.36]
    assert "job 100" in h100["interference_k"]["how"] and "aps (44.4 % alone)" in \
        h100["interference_k"]["how"] and "slowdown 1.2362" in h100["interference_k"]["how"]
    assert doc["calibrations"][H100]["samples"]["pair"][1]["mode"] == "mps"
    assert "interference_k_mps" not in doc["models"][V100]            # its MPS pair not run
    lines = done.output.splitlines()
    assert next(x for x in lines if "interference_k_mps" in x).split()[:3] == [
        "interference_k_mps", "0.6", "0.6"]
    assert next(x for x in lines if "pair aps|aps" in x).split()[:4] == [
        "pair", "aps|aps", "-", "0.8089"]
    assert "note: interference_k_mps not measured: no mps pair in the run" in done.output
    assert "note: co-located pair cut short by the deadline" in done.output
    out = _run(fake)
    c = out["models"][H100]["constants"]
    assert c["colocation_pairs"]["shipped"] == {"aps|aps": None}
    assert c["colocation_pairs"]["calibrated"] == {"aps|aps": [0.8089, 0.8089]}
    assert (c["interference_k"]["shipped"], c["interference_k"]["calibrated"]) == (0.6, 0.6)


def test_a_pair_faster_than_alone_leaves_it_as_it_was(fake):
    fake({"gpu2": _paired(H100, pair_time_s=1.0), "gpu3": _good(V100)})
    _left_as_it_was(fake, r"H100-80GB-HBM3 \(job 100 on gpu2:0\): the time-sliced pair ran "
                          r"faster than alone: slowdown 0.500")
