"""A site running the four-stage stack (``policy.stages = ["pal", "eaco", "greenflow",
"elastic"]``) on the local cluster, with a carbon series whose low lies three hours ahead and a
budget already overspent (seeded in the reconcile history, so carbon weighs fully):

- a deferrable job is started later (greenflow's timing), neither shared nor pinned now;
- a sharing pair: the second job joins the first's GPU (eaco's sharing), where the placement
  stage then leaves it;
- an elastic job grows on a reconcile pass of the stack (elastic's sizing);
- every stage's ``why`` reaches ``--wb-explain``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from carbon_seed import HOUR_S, overspent, series
from cluster_waits import wait_job

from slurm_plugin.proc import run

pytestmark = pytest.mark.cluster
TRAIN = f"{sys.executable} -m slurm_plugin.emulated_train"


@pytest.fixture()
def env(localcluster, tmp_path) -> dict[str, str]:
    state = tmp_path / "reconcile"
    state.mkdir()
    series(tmp_path / "carbon.csv", time.time(), low_at_h=3)
    overspent(state, time.time())
    return {**localcluster.env, "WATTBATCH_RECONCILE_STATE_DIR": str(state),
            "WATTBATCH_POLICY_STAGES": "pal,eaco,greenflow,elastic",
            "WATTBATCH_POLICY_ALLOW_SHARE": "true",
            "WATTBATCH_CARBON_FILE": str(tmp_path / "carbon.csv"),
            "WATTBATCH_GREENFLOW_BUDGET_KG_PER_DAY": "1", "WATTBATCH_SERVER": "0",
            "WATTBATCH_ELASTIC_MIN_INTERVAL_S": "4", "WATTBATCH_ELASTIC_RESTART_COST_S": "5",
            "WATTBATCH_ELASTIC_MEASURE_RESTART_COST": "false"}


def wattbatch(env, tmp_path: Path, name: str, *argv: str) -> tuple[str, str]:
    """An emulated training job through wattbatch under the site's stack; (id, explanation)."""
    script = tmp_path / f"{name}.sh"
    script.write_text(f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --output=/dev/null\n"
                      f"{TRAIN} --steps 3000 --step-s 0.2 --steps-per-epoch 50 "
                      f'--checkpoint "${{WATTBATCH_CHECKPOINT_DIR:-{tmp_path}}}/{name}.ckpt"\n')
    done = run([sys.executable, "-m", "wrapper.cli", "--parsable", "--wb-explain", "-t", "30",
                *argv, str(script)], env=env, cwd=str(tmp_path), timeout_s=60)
    return done.stdout.strip().split(";")[0], done.stderr


def test_the_four_stages_decide_together(localcluster, env, tmp_path):
    cfg = localcluster.config()
    later, why = wattbatch(env, tmp_path, "deferrable", "--wb-slack=6h", "--wb-app=resnet18",
                           "--gres=gpu:1")
    assert "timing (greenflow): " in why and "sbatch options added: --begin=" in why, why
    assert "sharing (eaco): skipped: the job starts later" in why, why
    assert "placement (pal): skipped: the job starts later" in why, why
    job = wait_job(cfg, later, lambda j: j.pending)
    assert job.begin_s > time.time() + HOUR_S

    first, why_a = wattbatch(env, tmp_path, "alexnet", "--wb-app=alexnet", "--gres=gpu:1")
    a = wait_job(cfg, first, lambda j: j.running)
    assert all(u.shards > 0 for u in a.uses), why_a
    second, why_b = wattbatch(env, tmp_path, "resnet18", "--wb-app=resnet18", "--gres=gpu:1")
    b = wait_job(cfg, second, lambda j: j.running)
    assert {(u.node, u.index) for u in b.uses} == {(u.node, u.index) for u in a.uses}, why_b
    assert "placement (pal): skipped: the job shares a GPU" in why_b, why_b
    for kind in ("sizing (elastic): ", "timing (greenflow): ", "sharing (eaco): "):
        assert kind in why_b, why_b

    grows, why_e = wattbatch(env, tmp_path, "elastic", "--wb-app=resnet18",
                             "--wb-elastic=1-4", "--gres=gpu:1")
    wait_job(cfg, grows, lambda j: j.running)
    deadline, resized = time.monotonic() + 90, []
    while not resized:
        assert time.monotonic() < deadline, "no resize by the stack's reconcile passes"
        time.sleep(2)
        out = run([sys.executable, "-m", "slurm_plugin.cli", "reconcile", "--json"], env=env,
                  timeout_s=120).stdout
        done = json.loads(out)
        assert done["policy"] == "pal+eaco+greenflow+elastic"
        resized = [a for a in done["actions"] if a["kind"] == "resize" and a["job_id"] == grows
                   and a["status"] == "done"]
    assert resized[0]["policy"] == "elastic" and resized[0]["gpus"] > 1
    wait_job(cfg, grows, lambda j: j.running and len(j.uses) == resized[0]["gpus"],
             timeout_s=90)
    for job_id in (later, first, second, grows):
        run(["scancel", job_id], env=env, timeout_s=30)
