"""A job whose name is not UTF-8 (any user can submit one with plain sbatch) stops nothing:
snapshot, reconcile, the collector and ``localcluster up`` all go on."""

from __future__ import annotations

import json
import sys
import time

import pytest
from cluster_waits import wait_job

from slurm_plugin.localcluster import up
from slurm_plugin.proc import run
from slurm_plugin.slurm import actions
from slurm_plugin.slurm.snapshot import history, snapshot
from slurm_plugin.telemetry.influx import InfluxClient
from slurm_plugin.telemetry.readers import latest_gpu_readings

pytestmark = pytest.mark.cluster
# "\udcff\udcfe" is written to sbatch's stdin as the raw bytes 0xff 0xfe
SCRIPT = "#!/bin/bash\n#SBATCH -J bad\udcff\udcfename\nsleep 600\n"


def test_job_name_that_is_not_utf8_stops_nothing(localcluster, tmp_path):
    log_file = localcluster.spec.log_file("collector")
    log_start = log_file.stat().st_size if log_file.exists() else 0   # only this test's lines
    cfg = localcluster.config()
    job_id = actions.submit(["--output=/dev/null", f"--chdir={tmp_path}", "--gres=gpu:1"],
                            SCRIPT, cfg)
    try:
        _stops_nothing(localcluster, cfg, job_id, log_file, log_start, tmp_path)
    finally:       # its name would reach every later squeue reader, a client's included
        actions.cancel(job_id, cfg)


def _stops_nothing(localcluster, cfg, job_id, log_file, log_start, tmp_path):
    raw = run(["squeue", "-h", "-j", job_id, "-o", "%j"], env=localcluster.env).stdout
    assert "\ufffd" in raw                     # Slurm does hold the bytes 0xff 0xfe

    job = wait_job(cfg, job_id, lambda j: j.running)
    assert job.name == "bad\ufffd\ufffdname"
    deadline = time.monotonic() + 20          # sacct: once slurmdbd has the job
    while not (names := [r.name for r in history(cfg, since="now-1hours")
                         if r.job_id == job_id]) and time.monotonic() < deadline:
        time.sleep(1)
    assert len(names) == 1 and names[0].startswith("bad") and names[0].endswith("name")

    env = {**localcluster.env, "WATTBATCH_RECONCILE_STATE_DIR": str(tmp_path / "state")}
    done = run([sys.executable, "-m", "slurm_plugin.cli", "reconcile", "--json"], env=env,
               timeout_s=60)
    assert json.loads(done.stdout)["jobs_seen"] >= 1 and "Traceback" not in done.stderr

    # the collector keeps writing GPU readings while the job exists (it reads squeue too)
    client = InfluxClient.from_config(cfg)
    since = time.time()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        fresh = [r for r in latest_gpu_readings(client, time.time()).values()
                 if r.taken_s > since]
        if len(fresh) == 16:
            break
        time.sleep(1)
    assert len(fresh) == 16
    with open(log_file, "rb") as fh:
        fh.seek(log_start)
        log = fh.read().decode("utf-8", "replace")
    assert "UnicodeDecodeError" not in log

    assert "slurmctld" in up(localcluster.spec, install=False).step_s     # up still works
    assert snapshot(cfg).jobs[job_id].running
