"""``localcluster down``/``up`` keeps Slurm's jobs; ``up --fresh`` starts with none."""

from __future__ import annotations

import pytest
from cluster_waits import wait_job

from slurm_plugin.localcluster import down, up
from slurm_plugin.slurm import actions
from slurm_plugin.slurm.snapshot import snapshot

pytestmark = pytest.mark.cluster
SLEEP = "#!/bin/bash\nsleep 600\n"


def test_jobs_survive_down_and_up_and_fresh_clears_them(localcluster, tmp_path):
    cfg = localcluster.config()
    opts = ["--output=/dev/null", f"--chdir={tmp_path}", "--gres=gpu:1"]
    running = actions.submit([*opts, "-J", "restart-running"], SLEEP, cfg)
    held = actions.submit([*opts, "-J", "restart-held", "--hold"], SLEEP, cfg)
    wait_job(cfg, running, lambda j: j.running)

    result = down(localcluster.spec)
    assert result["cancelled_jobs"] == 0 and result["requeued_jobs"] == 1
    up(localcluster.spec, install=False)
    jobs = snapshot(cfg).jobs
    assert jobs[held].pending and jobs[held].reason.startswith("JobHeld")
    again = wait_job(cfg, running, lambda j: j.running, timeout_s=90)
    assert again.restart_count == 1          # requeued by down, started again after up

    down(localcluster.spec)
    up(localcluster.spec, install=False, fresh=True)
    assert snapshot(cfg).jobs == {}
