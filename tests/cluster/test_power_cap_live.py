"""GPU power caps live: a job's cap, recorded in its AdminComment by job_submit.lua, reaches its
emulated GPU (the GPU draws at most the cap, its job runs slower, and InfluxDB's ``gpu`` points
show the limit); reconcile's ``power_cap`` action changes it on the running job, and raises the job's time limit
when it says so; once the job has ended the GPU is back at the board's limit."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from cluster_waits import wait_job

from slurm_plugin.actuate import execute
from slurm_plugin.journal import Journal
from slurm_plugin.live import SlurmActuator
from slurm_plugin.model import Action
from slurm_plugin.node.emulated import slowdown_path
from slurm_plugin.physics import max_power_w
from slurm_plugin.physics.job_cap import capped_job
from slurm_plugin.proc import run
from slurm_plugin.slurm.cli import slurm_json
from slurm_plugin.formats.admin_comment import recorded_cap
from slurm_plugin.slurm.snapshot import snapshot
from slurm_plugin.telemetry.influx import InfluxClient
from slurm_plugin.telemetry.readers import latest_gpu_readings

pytestmark = pytest.mark.cluster
TRAIN = f"{sys.executable} -m slurm_plugin.emulated_train"


def _limit_reaches(cfg, gpu: tuple[str, int], want_w: float, timeout_s: float = 30.0):
    """The newest ``gpu`` point of ``gpu`` once its power limit is ``want_w``."""
    client = InfluxClient.from_config(cfg)
    deadline, seen = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        seen = latest_gpu_readings(client, time.time(), max_age_s=10).get(gpu)
        if seen is not None and abs(seen.power_limit_w - want_w) < 0.5:
            return seen
        time.sleep(1)
    pytest.fail(f"GPU {gpu}: power limit not {want_w} W after {timeout_s} s: {seen}")


def _admin_comment(cfg, job_id: str) -> str:
    jobs = slurm_json("squeue", [f"--jobs={job_id}"], cfg)["jobs"]   # 22.05: every job
    return next(str(j.get("admin_comment") or "") for j in jobs
                if str(j.get("job_id")) == job_id)


def test_a_cap_reaches_the_gpu_follows_reconcile_and_is_gone_after_the_job(localcluster,
                                                                           tmp_path: Path):
    cfg = localcluster.config()
    script = tmp_path / "capped.sh"
    script.write_text(f"#!/bin/bash\n{TRAIN} --steps 400 --step-s 0.2 --steps-per-epoch 50 "
                      f"--checkpoint {tmp_path}/capped.ckpt\n")
    done = run(["sbatch", "--parsable", "--gres=gpu:1", "--job-name=capped", "-t", "20",
                f"--output={tmp_path}/capped-%j.out", "--comment=wb:app=nas;cap=150",
                str(script)], env=localcluster.env, timeout_s=30)
    job_id = done.stdout.strip().split(";")[0]
    job = wait_job(cfg, job_id, lambda j: j.running and j.uses)
    assert job.power_cap_w == 150.0 and recorded_cap(_admin_comment(cfg, job_id)) == 150.0
    gpu = (job.uses[0].node, job.uses[0].index)

    reading = _limit_reaches(cfg, gpu, 150.0)
    assert reading.power_w <= 150.0 + 1e-6
    _, cap_slow = capped_job("nas", 1, 150.0)
    slowdown = float(slowdown_path(cfg["node.state_dir"], job_id).read_text())
    assert slowdown == pytest.approx(cap_slow, rel=0.01) and slowdown > 1.1

    action = Action(kind="power_cap", job_id=job_id, policy="greenflow", power_cap_w=200.0,
                    time_limit_s=30 * 60 - 20, why="test")
    outcome = execute(Journal(tmp_path / "journal.jsonl"), SlurmActuator(cfg), "a1", action, [], False)
    assert outcome.status == "done", outcome.detail
    assert recorded_cap(_admin_comment(cfg, job_id)) == 200.0
    assert snapshot(cfg).jobs[job_id].time_limit_s == 30 * 60     # whole minutes, rounded up
    assert "declared_app=nas" in _admin_comment(cfg, job_id)       # the lua record kept
    _limit_reaches(cfg, gpu, 200.0)

    run(["scancel", job_id], env=localcluster.env, timeout_s=30)
    _limit_reaches(cfg, gpu, max_power_w())


def test_a_shared_gpu_holds_one_limit_and_past_it_every_job_slows(localcluster, tmp_path: Path):
    """Two jobs time-sliced on one GPU, each asking for a 150 W cap: the GPU holds one limit
    (150 W: every job asks, the highest wins), draws at most it, and both jobs slow by the
    same throttle past their co-location slowdown, as the simulator prices it
    (``physics.shared_gpu_throttle``)."""
    from slurm_plugin.physics import group_slowdowns, job_class, shared_gpu_throttle
    cfg = localcluster.config()
    ids = []
    for k in range(2):
        script = tmp_path / f"pair{k}.sh"
        script.write_text(f"#!/bin/bash\n{TRAIN} --steps 2000 --step-s 0.2 --steps-per-epoch 50 "
                          f"--checkpoint {tmp_path}/pair{k}.ckpt\n")
        done = run(["sbatch", "--parsable", "--gres=shard:g2:2", "-w", "gpu3", "-t", "20",
                    f"--job-name=pair{k}", f"--output={tmp_path}/pair{k}-%j.out",
                    "--comment=wb:app=nas;cap=150", str(script)], env=localcluster.env,
                   timeout_s=30)
        ids.append(done.stdout.strip().split(";")[0])
    try:
        for job_id in ids:
            job = wait_job(cfg, job_id, lambda j: j.running and j.uses)
            assert job.power_cap_w == 150.0
            assert [(u.node, u.index) for u in job.uses] == [("gpu3", 2)]
        reading = _limit_reaches(cfg, ("gpu3", 2), 150.0)
        assert reading.power_w <= 150.0 + 1e-6
        apart = group_slowdowns(["nas", "nas"])[0]
        dyn = [job_class("nas").dynamic_power_at(1, "V100")] * 2
        capped = apart * shared_gpu_throttle(dyn, [1 / apart] * 2, 150.0, "V100")
        board = apart * shared_gpu_throttle(dyn, [1 / apart] * 2, None, "V100")
        deadline = time.monotonic() + 30
        while True:
            got = [float(slowdown_path(cfg["node.state_dir"], j).read_text())
                   if slowdown_path(cfg["node.state_dir"], j).exists() else 0.0 for j in ids]
            if all(g == pytest.approx(capped, rel=0.01) for g in got) or \
                    time.monotonic() > deadline:
                break
            time.sleep(1)
        assert got == [pytest.approx(capped, rel=0.01)] * 2, (got, capped)
        assert capped > board * 1.05 and board >= apart      # the cap binds past the board's
    finally:
        run(["scancel", *ids], env=localcluster.env, timeout_s=30)
