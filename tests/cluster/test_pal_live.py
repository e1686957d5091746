"""PAL live on the local cluster: `wattctl profile-gpus run` measures the emulated GPUs through
Slurm, finds the slow ones (the site's ``node.emulated_variability``: the built-in Longhorn
profile spread with the local cluster's seed), and a 1-GPU job submitted with
``--wb-policy=pal`` and ``pal.profile`` pointing at the measured profile is pinned to a fast
GPU and runs there (the GPU Slurm gave it), at that GPU's speed.

With the local cluster's seed, gpu1's GPU 0 (Slurm's first choice on an idle cluster) is one of
the slow GPUs for class A, so the pin is what moves the job off it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from cluster_waits import fill_every_gpu, wait_job

import slurm_plugin
from slurm_plugin.node.emulated import emulated_gpus
from slurm_plugin.proc import run
from slurm_plugin.slurm import actions
from slurm_plugin.slurm.snapshot import snapshot
from slurm_plugin.telemetry.influx import InfluxClient, quote_str

pytestmark = pytest.mark.cluster
SLOW = 1.035          # class-A factors of the Longhorn profile: <= 1.021 or >= 1.054


def test_profile_run_finds_the_slow_gpus_and_pal_pins_a_job_to_a_fast_one(localcluster,
                                                                         tmp_path):
    cfg = localcluster.config()
    emulated = emulated_gpus(cfg["node.emulated_variability"])
    assert len(emulated) == 16, cfg["node.emulated_variability"]
    slow_emulated = {k for k, (_, f) in emulated.items() if f[0] >= SLOW}
    assert ("gpu1", 0) in slow_emulated and 0 < len(slow_emulated) < 16

    out = tmp_path / "site-gpus.csv"
    started = time.time()
    done = run([sys.executable, "-m", "slurm_plugin.cli", "profile-gpus", "run", "--out",
                str(out), "--partition", localcluster.spec.partition, "--runs", "3",
                "--steps", "4", "--step-s", "0.5", "--timeout-s", "120", "--work-dir",
                str(tmp_path / "bench"), "--json"], env=localcluster.env, timeout_s=180)
    result = json.loads(done.stdout)
    assert "16 benchmark jobs submitted for 16 GPUs on 4 nodes" in done.stderr
    assert "16/16 GPUs reported" in done.stderr, done.stderr
    measured = {tuple(g["gpu"].split(":")): g for g in result["gpus"]}
    measured = {(n, int(i)): g for (n, i), g in measured.items()}
    assert set(measured) == set(emulated)
    assert {k: g["uuid"] for k, g in measured.items()} == {k: u for k, (u, _) in emulated.items()}
    assert all(g["mode"] == "emulated" for g in measured.values())
    slow_measured = {k for k, g in measured.items() if g["factors"]["A"] >= SLOW}
    detail = {f"{n}:{i}": (round(emulated[(n, i)][1][0], 3), round(g["time_s"]["A"], 4),
                           round(g["factors"]["A"], 3)) for (n, i), g in sorted(measured.items())}
    assert slow_measured == slow_emulated, detail
    # a slow GPU's run took its factor longer than the median one's (2 s a run at 1.0)
    for k, g in measured.items():
        assert g["time_s"]["A"] == pytest.approx(2.0 * emulated[k][1][0], rel=0.02), detail

    client = InfluxClient.from_config(cfg)
    series = client.query(
        f'SELECT "time_s", "factor" FROM "gpu_perf" WHERE "cluster" = '
        f'{quote_str(cfg["cluster.name"])} AND "app_class" = \'A\' AND '
        f'time >= {int(started * 1e9)} GROUP BY "node", "gpu", "uuid"')
    stored = {(s.tags["node"], int(s.tags["gpu"])): s.tags["uuid"] for s in series}
    assert stored == {k: u for k, (u, _) in emulated.items()}

    print("profile-gpus run, class A: gpu: (emulated factor, median run s, measured factor)")
    for name, row in detail.items():
        print(f"  {name}: {row}")

    # re-profile one node: the other nodes' runs are kept, all 16 GPUs classified again
    before = {g["gpu"]: g["factors"]["A"] for g in result["gpus"]}
    again = run([sys.executable, "-m", "slurm_plugin.cli", "profile-gpus", "run", "--out",
                 str(out), "-w", "gpu1", "--merge", "--no-influx", "--runs", "3", "--steps", "4",
                 "--step-s", "0.5", "--timeout-s", "120", "--json"], env=localcluster.env,
                timeout_s=180)
    merged = json.loads(again.stdout)
    assert "4 benchmark jobs submitted for 4 GPUs on 1 nodes" in again.stderr
    assert {g["gpu"] for g in merged["gpus"]} == set(before)
    assert {g["gpu"] for g in merged["gpus"] if g["factors"]["A"] >= SLOW} == \
        {f"{n}:{i}" for n, i in slow_emulated}
    shown = json.loads(run([sys.executable, "-m", "slurm_plugin.cli", "profile-gpus", "show",
                            str(out), "--json"], env=localcluster.env, timeout_s=60).stdout)
    assert shown["stale"] == 0
    stamps = {g["gpu"]: g["measured_at"] for g in shown["gpus"]}
    assert stamps["gpu1:0"] == merged["measured_at"] > stamps["gpu2:0"] == result["measured_at"]

    # the pal policy with the measured profile: a 1-GPU class-A job goes to a fast GPU
    env = {**localcluster.env, "WATTBATCH_PAL_PROFILE": str(out), "WATTBATCH_SERVER": "0"}
    script = tmp_path / "train.sh"
    script.write_text(
        f"#!/bin/bash\n#SBATCH --job-name=pal-train\n#SBATCH --output={tmp_path}/train-%j.out\n"
        f"{sys.executable} -m slurm_plugin.emulated_train --app resnet18 --steps 5 "
        f"--step-s 0.2 --checkpoint {tmp_path}/train.ckpt\n")
    sub = run([sys.executable, "-m", "wrapper.cli", "--parsable", "--wb-policy=pal",
               "--wb-explain", "--wb-app=resnet18", "--gres=gpu:1", "-t", "5", str(script)],
              env=env, timeout_s=60)
    job_id = sub.stdout.strip().split(";")[0]
    job = wait_job(cfg, job_id, lambda j: j.running or j.state == "completed", timeout_s=60)
    gpus = {(u.node, u.index) for u in job.uses}
    assert len(gpus) == 1, job
    (gpu,) = gpus
    assert gpu not in slow_emulated, (gpu, sub.stderr)
    assert "pal: class A job, single node" in sub.stderr, sub.stderr
    assert f"{gpu[0]}:{gpu[1]} x" in sub.stderr and "predicted slowdown" in sub.stderr
    deadline = time.monotonic() + 60
    while job_id in snapshot(cfg).jobs:
        assert time.monotonic() < deadline, f"job {job_id} still in the queue"
        time.sleep(0.5)
    print(f"pal job {job_id} ran on {gpu[0]}:{gpu[1]}; wattbatch said: {sub.stderr.strip()}")
    log = (tmp_path / f"train-{job_id}.out").read_text()
    assert f"(GPU speed factor {emulated[gpu][1][0]:.4f})" in log, log


def test_pal_queue_tier_reaches_slurms_nice_added_to_the_jobs_own(localcluster, tmp_path):
    """PAL orders its queue by class (the most variability-sensitive first) and, within a class,
    by the GPU-time asked: the tier reaches Slurm as ``--nice`` (100 per tier), added to the
    job's own ``--nice``. With the built-in Longhorn profile class A spreads most (rank 0) and B
    next (rank 1); 2 GPUs for 120 minutes are 4 h of GPU-time: size tier 3 (one per doubling
    over 1 h). So a class-B job asking that is in tier 1 x 13 + 3 = 16, a class-A one in 3."""
    cfg = localcluster.config()
    profile = Path(slurm_plugin.__file__).parent / "data" / "variability-longhorn-32gpu.csv"
    env = {**localcluster.env, "WATTBATCH_PAL_PROFILE": str(profile), "WATTBATCH_SERVER": "0"}
    ids = []
    try:
        for app, own in (("lstm", ["--nice=7"]), ("resnet18", [])):
            sub = run([sys.executable, "-m", "wrapper.cli", "--parsable", "--wb-policy=pal",
                       f"--wb-app={app}", "--gres=gpu:2", "-t", "120", "--hold", *own,
                       "-o", "/dev/null", "--wrap", "sleep 60"], env=env, timeout_s=60)
            ids.append(sub.stdout.strip().split(";")[0])
        shown = [actions.show_job(j, cfg) for j in ids]
        assert [s.get("Nice") for s in shown] == ["1607", "300"], shown
        assert all(s.get("JobState") == "PENDING" for s in shown), shown
    finally:
        for j in ids:
            actions.cancel(j, cfg)


def test_with_tier_age_s_a_waiting_job_moves_to_earlier_tiers_and_keeps_its_typed_gpu(
        localcluster, tmp_path):
    """``pal.tier_age_s`` live (15 s here): a class-B job asking one typed GPU for 120 minutes
    (tier 13 + 2 = 15, Nice 7 + 1500 with its own ``--nice=7``) waits on a full cluster; a
    reconcile pass moves it one tier earlier per 15 s waited: its Nice drops and keeps the 7,
    its request stays the typed GPU it asked for, and nothing else changes."""
    cfg = localcluster.config()
    profile = Path(slurm_plugin.__file__).parent / "data" / "variability-longhorn-32gpu.csv"
    state = tmp_path / "reconcile"
    state.mkdir()
    env = {**localcluster.env, "WATTBATCH_PAL_PROFILE": str(profile), "WATTBATCH_SERVER": "0",
           "WATTBATCH_PAL_TIER_AGE_S": "15", "WATTBATCH_RECONCILE_STATE_DIR": str(state)}
    job_id, fill = "", []
    try:
        fill = fill_every_gpu(cfg, env)
        job_id = run([sys.executable, "-m", "wrapper.cli", "--parsable", "--wb-policy=pal",
                      "--wb-app=lstm", "--gres=gpu:g1:1", "-t", "120", "--nice=7", "-o",
                      "/dev/null", "--wrap", "sleep 60"], env=env, timeout_s=60
                     ).stdout.strip().split(";")[0]
        shown = actions.show_job(job_id, cfg)
        assert shown["Nice"] == "1507" and shown["JobState"] == "PENDING", shown
        submitted = snapshot(cfg).jobs[job_id].submit_s
        time.sleep(max(0.0, submitted + 32 - time.time()))
        before = time.time()
        out = run([sys.executable, "-m", "slurm_plugin.cli", "reconcile", "--policy", "pal",
                   "--json"], env=env, timeout_s=120)
        after = time.time()
        acts = [a for a in json.loads(out.stdout)["actions"] if a["job_id"] == job_id]
        tiers = set(range(15 - int((after - submitted) // 15),
                          15 - int((before - submitted) // 15) + 1))
        assert [(a["kind"], a["status"], a["gpus"]) for a in acts] == [("resize", "done", 1)], \
            out.stdout
        assert acts[0]["nice"] in tiers and acts[0]["nice"] < 15, (acts, tiers)
        shown = actions.show_job(job_id, cfg)
        assert shown["Nice"] == str(7 + 100 * acts[0]["nice"]), shown
        assert shown["TresPerNode"] == "gres:gpu:g1:1", shown
        assert shown["JobState"] == "PENDING" and shown["Restarts"] == "0", shown
    finally:
        for other in (*fill, job_id):
            if other:
                actions.cancel(other, cfg)
