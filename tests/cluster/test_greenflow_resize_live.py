"""GreenFlow's sizing live: a running elastic job (``--wb-elastic=1-4``, started on 1 GPU) is
grown into its node's free GPUs by ``wattctl reconcile --policy greenflow`` through the
journaled requeue, and resumes from its checkpoint on 4 GPUs. No budget: carbon has no weight,
so the JCT gain decides (``policy/greenflow/size.py``); the policy's 6-hour interval is
shortened to the test's seconds and a restart counts as free (the test's job is too short to
repay the real one)."""

from __future__ import annotations

import json
import sys
import time

import pytest
from cluster_waits import wait_job
from test_greenflow_live import _series

from slurm_plugin.history import FILE_NAME, History
from slurm_plugin.policy.greenflow.observe import LAST_S
from slurm_plugin.proc import run
from slurm_plugin.slurm.snapshot import snapshot

pytestmark = pytest.mark.cluster
TRAIN = f"{sys.executable} -m slurm_plugin.emulated_train"
HOUR_S = 3600.0


def test_a_running_elastic_job_grows_into_free_gpus_and_resumes(localcluster, tmp_path):
    cfg = localcluster.config()
    state = tmp_path / "reconcile"
    state.mkdir()
    seed = History(state / FILE_NAME)
    seed.add(LAST_S, time.time() - 2 * HOUR_S)     # the hourly observation is due
    seed.save()
    _series(tmp_path / "carbon.csv", time.time(), low_at_h=3)
    env = {**localcluster.env, "WATTBATCH_RECONCILE_STATE_DIR": str(state),
           "WATTBATCH_CARBON_FILE": str(tmp_path / "carbon.csv"), "WATTBATCH_SERVER": "0",
           "WATTBATCH_GREENFLOW_BUDGET_KG_PER_DAY": "0",
           "WATTBATCH_GREENFLOW_RESIZE_INTERVAL_S": "3",
           "WATTBATCH_GREENFLOW_RESTART_COST_S": "0"}
    script = tmp_path / "grow.sh"
    script.write_text(
        f"#!/bin/bash\n#SBATCH --output={tmp_path}/grow.out\n#SBATCH --open-mode=append\n"
        f"{TRAIN} --steps 400 --step-s 0.3 --steps-per-epoch 20 --gpu-scaling 0.8 "
        '--checkpoint "$WATTBATCH_CHECKPOINT_DIR/ckpt.json"\n')
    done = run([sys.executable, "-m", "wrapper.cli", "--parsable", "--wb-policy=elastic",
                "--wb-elastic=1-4", "--wb-app=resnet18", "--gres=gpu:1", "-t", "20",
                str(script)], env=env, cwd=str(tmp_path), timeout_s=60)
    job_id = done.stdout.strip().split(";")[0]
    job = wait_job(cfg, job_id, lambda j: j.running and len(j.uses) == 1)
    node = job.nodes[0]
    seen = snapshot(cfg)
    busy = {g.index for n in seen.nodes if n.name == node for g in n.gpus
            if g.job_ids and job_id not in g.job_ids}
    queued = [j.job_id for j in seen.jobs.values() if j.pending]
    assert not busy and not queued, f"GPUs of {node} held: {busy}; jobs queued: {queued}"
    time.sleep(4)                                   # past the (shortened) resize interval
    out = run([sys.executable, "-m", "slurm_plugin.cli", "reconcile", "--policy", "greenflow",
               "--json"], env=env, timeout_s=180)
    resized = [a for a in json.loads(out.stdout)["actions"] if a["kind"] == "resize"]
    assert [(a["job_id"], a["gpus"], a["status"]) for a in resized] == [(job_id, 4, "done")], \
        out.stdout
    job = wait_job(cfg, job_id, lambda j: j.running and len(j.uses) == 4, timeout_s=120)
    assert job.restart_count == 1
    log = tmp_path / "grow.out"
    deadline = time.monotonic() + 60
    while len(starts := [int(line.split()[4]) for line in log.read_text().splitlines()
                         if line.startswith("emulated_train: starting at step")]) < 2 \
            and time.monotonic() < deadline:
        time.sleep(1)
    # the second run resumes from the first one's checkpoint
    assert len(starts) == 2 and starts[0] == 0 and starts[1] > 0, log.read_text()
    run(["scancel", job_id], env=env, timeout_s=30)
