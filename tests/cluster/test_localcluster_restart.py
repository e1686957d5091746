"""``localcluster down``/``up`` keeps Slurm's jobs; ``up --fresh`` starts with none; ``up``
brings back a SIGKILLed slurmctld."""

from __future__ import annotations

import os
import signal
import time

import pytest
from cluster_waits import file_holds, wait_job

from slurm_plugin.localcluster import down, procs, up
from slurm_plugin.localcluster.cluster import usage_lost
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


def test_up_restarts_a_slurmctld_killed_before_its_first_clean_shutdown(localcluster, tmp_path):
    """slurmctld writes ``assoc_usage`` only on a clean shutdown; one SIGKILLed before that
    left a state dir that Slurm 26.05 refuses to start from. ``up`` must still bring it back,
    with its jobs."""
    cfg = localcluster.config()
    job = actions.submit(["--output=/dev/null", f"--chdir={tmp_path}", "--hold", "-J",
                          "restart-killed"], SLEEP, cfg)
    state = localcluster.spec.path("slurmctld")
    pid_file = localcluster.spec.pid_file("slurmctld")
    saved = state / "job_state"
    deadline = time.monotonic() + 30
    while not file_holds(saved, b"restart-killed"):
        assert time.monotonic() < deadline, f"slurmctld did not save job {job} in {saved}"
        time.sleep(0.2)
    pid = procs.running_pid(pid_file, "slurmctld")
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while procs.running_pid(pid_file, "slurmctld"):
        assert time.monotonic() < deadline, "slurmctld outlived its SIGKILL"
        time.sleep(0.1)
    (state / "assoc_usage").unlink(missing_ok=True)
    assert usage_lost(state)

    assert "slurmctld" in up(localcluster.spec, install=False).started
    assert job in snapshot(cfg).jobs
    actions.cancel(job, cfg)
