"""A local cluster of two GPU models (two V100 nodes, two H100 nodes): Slurm's GRES types
name each GPU's model, the snapshot reads it, and the emulated GPUs draw that model's power;
`wattctl calibrate-gpus` gives back each emulated model's own constants (the proof that the
calibration pipeline is right end to end, within 5 %). The split of a shared H100 is in
test_nvml_path_live.py.

Calibration: one Slurm job per model steps its emulated GPU through the job classes and the
caps of the settable range. The emulated GPUs compute with the shipped catalogue (the
cluster's site config names no site GPU model file); the run writes its own file
(--site-file). The H100's chip has no cap sweep, so it slows under a cap as its ``cap_beta``
says; the V100's chip has one (Zeus), so its timed runs are checked against that sweep instead
(``physics/job_cap.py``). Each job also runs its fixed workload's co-located pair (two copies of
a class on its GPU, time-sliced and through MPS): the fitted ``interference_k`` and
``interference_k_mps`` are the emulated model's own.

The module brings the session's cluster down, runs its own (same ports, its own state
directory) and puts the session's back at the end."""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

import pytest
from cluster_waits import own_cluster, wait_job

from slurm_plugin import live
from slurm_plugin.localcluster.render import type_prefix
from slurm_plugin.physics import gpu_models as gm
from slurm_plugin.physics import idle_power_w
from slurm_plugin.physics.constants import colocation_constants, gpu_constants
from slurm_plugin.physics.job_cap import capped_job
from slurm_plugin.proc import run

pytestmark = pytest.mark.cluster
MODELS = "V100:2,H100:2"
V100, H100 = "V100-SXM2-32GB", "H100-80GB-HBM3"
CURVE = ("idle_power_w", "dynamic_power_w", "util_gamma", "max_power_w", "min_power_cap_w")


@pytest.fixture(scope="module")
def mixed(session_down):
    with own_cluster(session_down, "models", gpu_model=MODELS) as cluster:
        yield cluster


def test_each_gpu_is_read_as_its_model_and_draws_its_power(mixed):
    cfg = mixed.config()
    cluster = live.snapshot(cfg)
    models = {n.name: {g.model for g in n.gpus} for n in cluster.nodes}
    assert models == {"gpu1": {V100}, "gpu2": {V100}, "gpu3": {H100}, "gpu4": {H100}}
    assert {g.gres_type for g in cluster.nodes[2].gpus} == {
        f"{type_prefix(H100)}g{i}" for i in range(4)}
    client = mixed.influx(cfg["influx.database"])
    deadline = time.monotonic() + 30
    while True:          # the collector's idle readings: each node's own model's idle power
        series = client.query('SELECT last("power_w") FROM "gpu" WHERE time > now() - 20s '
                              'GROUP BY "node"')
        idle = {s.tags["node"]: s.values[0][1] for s in series}
        if set(idle) >= {"gpu1", "gpu3"} or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert idle["gpu1"] == pytest.approx(idle_power_w(V100))
    assert idle["gpu3"] == pytest.approx(idle_power_w(H100))
    assert idle_power_w(H100) != pytest.approx(idle_power_w(V100))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_each_models_own_constants_come_back_within_5_percent(mixed, tmp_path):
    assert mixed.config()["physics.site_gpu_models"] == ""
    shipped_file = Path(gm.__file__).parent.parent / "data" / "gpu_models.json"
    shipped_sha = _sha(shipped_file)
    site_file = tmp_path / "site-gpus.json"
    done = run([sys.executable, "-m", "slurm_plugin.cli", "calibrate-gpus", "-p",
                mixed.spec.partition, "--minutes", "3", "--site-file", str(site_file),
                "--work-dir", str(tmp_path / "work"), "--json"],
               env=mixed.env, timeout_s=240, check=False)
    assert done.returncode == 0, done.stderr
    assert f"2 jobs submitted for {H100}, {V100}" in done.stderr, done.stderr
    assert ": load " in done.stderr and ": measured" in done.stderr   # progress while waiting
    summary = json.loads(done.stdout)
    assert set(summary["models"]) == {V100, H100}
    assert summary["elapsed_s"] < 180

    for model in (V100, H100):
        m = summary["models"][model]
        assert m["mode"] == "emulated"
        got = {k: c["calibrated"] for k, c in m["constants"].items()}
        want = {k: gpu_constants(model)[k] for k in CURVE}
        assert {k: got[k] for k in CURVE} == pytest.approx(want, rel=0.05), (model, m)
        assert {k: m["constants"][k]["shipped"] for k in CURVE} == pytest.approx(want)
    h100 = summary["models"][H100]["constants"]["cap_beta"]["calibrated"]
    assert h100 == pytest.approx(gpu_constants(H100)["cap_beta"], rel=0.05)
    for model in (V100, H100):          # the co-located pair, time-sliced and through MPS
        got = {k: c["calibrated"] for k, c in summary["models"][model]["constants"].items()}
        want = {k: colocation_constants(model)[k]
                for k in ("interference_k", "interference_k_mps")}
        assert {k: got[k] for k in want} == pytest.approx(want, rel=0.05), (model, got)

    doc = json.loads(site_file.read_text())
    samples = doc["calibrations"][V100]["samples"]
    for cap in samples["caps"]:                     # the V100 slows as its chip's sweep
        _, slow = capped_job(samples["workload"], 1, cap["power_limit_w"], V100)
        assert cap["time_s"] / samples["workload_time_s"] == pytest.approx(slow, rel=0.05)
    assert doc["models"][H100]["util_gamma"]["source"] == "measured"

    # the site's file is what a process naming it computes with; the shipped file is as it was
    assert _sha(shipped_file) == shipped_sha
    try:
        gm.use_site_models(str(site_file))
        assert gm.lookup(H100).dynamic_power_w == pytest.approx(
            summary["models"][H100]["constants"]["dynamic_power_w"]["calibrated"])
        assert gm.shipped()["models"][H100]["dynamic_power_w"]["value"] == \
            gpu_constants(H100)["dynamic_power_w"]
    finally:
        gm.use_site_models(None)


def _wattbatch(cluster, tmp_path: Path, name: str, app: str, constraint: str) -> tuple[str, str]:
    """An emulated training job of ``app`` through wattbatch with EaCO, sharing allowed, on the
    model ``constraint`` names (a node feature); (job id, explanation)."""
    script = tmp_path / f"{name}.sh"
    script.write_text(f"#!/bin/bash\n#SBATCH --output={tmp_path}/{name}-%j.out\n"
                      f"{sys.executable} -m slurm_plugin.emulated_train --steps 600 "
                      f"--step-s 0.2 --steps-per-epoch 50 --checkpoint {tmp_path}/{name}.ckpt\n")
    done = run([sys.executable, "-m", "wrapper.cli", "--parsable", "--wb-policy=eaco",
                "--wb-explain", f"--wb-app={app}", "--wb-share", "--gres=gpu:1",
                f"--constraint={constraint}", "-t", "10", "-J", name, str(script)],
               env=cluster.env, timeout_s=60)
    return done.stdout.strip().split(";")[0], done.stderr


def test_eaco_shares_a_gpu_only_between_jobs_of_its_model(mixed, tmp_path):
    """alexnet runs sharable on an H100. resnet18 on the V100s (--constraint=v100) does not
    join it, though that pair shares well; resnet18 on the H100s joins it on its GPU."""
    cfg = mixed.config()
    first, why = _wattbatch(mixed, tmp_path, "alexnet-h100", "alexnet", "h100")
    alexnet = wait_job(cfg, first, lambda j: j.running)
    assert {u.node for u in alexnet.uses} <= {"gpu3", "gpu4"}, why
    assert all(u.shards > 0 for u in alexnet.uses), why
    on_v100, why_v = _wattbatch(mixed, tmp_path, "resnet18-v100", "resnet18", "v100")
    on_h100, why_h = _wattbatch(mixed, tmp_path, "resnet18-h100", "resnet18", "h100")
    v = wait_job(cfg, on_v100, lambda j: j.running)
    h = wait_job(cfg, on_h100, lambda j: j.running)
    gpu = {(u.node, u.index) for u in alexnet.uses}
    assert {u.node for u in v.uses} <= {"gpu1", "gpu2"}, why_v
    assert {(u.node, u.index) for u in h.uses} == gpu, why_h
    cluster = live.snapshot(cfg)
    assert {g.model for n in cluster.nodes for g in n.gpus if (n.name, g.index) in gpu} == {H100}
    for job in (first, on_v100, on_h100):
        run(["scancel", job], env=mixed.env, timeout_s=30)
