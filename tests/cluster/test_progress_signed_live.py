"""Signed progress end to end on the local cluster: the prolog (run as slurmd would) gives the
job its key, the job signs its progress into the authenticated InfluxDB, and the reconciler's
reader attributes it; a point someone else writes for the job is not attributed."""

from __future__ import annotations

import os
import sys
import time

import pytest
from cluster_waits import wait_job

from slurm_plugin import live
from slurm_plugin.proc import run
from slurm_plugin.telemetry.influx import InfluxClient
from slurm_plugin.telemetry.lineproto import Point

pytestmark = pytest.mark.cluster


def test_progress_counts_only_when_signed_by_the_jobs_owner(localcluster, tmp_path):
    site_key = tmp_path / "site.key"
    site_key.write_bytes(os.urandom(32).hex().encode())
    site_key.chmod(0o400)
    keys = tmp_path / "jobs"
    env = {**localcluster.env, "WATTBATCH_PROGRESS_SITE_KEY_FILE": str(site_key),
           "WATTBATCH_PROGRESS_JOB_KEY_DIR": str(keys)}
    script = (f"#!/bin/bash\n{sys.executable} -m slurm_plugin.progress --step 40 "
              "--samples-per-s 120 --total-steps 100\nsleep 600\n")
    job_id = run(["sbatch", "--parsable", "--hold", "--output=/dev/null", f"--chdir={tmp_path}",
                  "--gres=gpu:1", "-J", "signed-progress"], input_text=script,
                 env=env).stdout.strip()
    # the prolog, as slurmd runs it at the job's start (its environment, as root)
    run([sys.executable, "-m", "slurm_plugin.node.prolog"], env={
        **env, "SLURM_JOB_ID": job_id, "SLURM_JOB_UID": str(os.getuid()),
        "SLURM_JOB_GID": str(os.getgid()), "SLURM_JOB_GPUS": ""})
    assert oct((keys / f"{job_id}.key").stat().st_mode & 0o777) == "0o400"
    run(["scontrol", "release", job_id], env=env)

    cfg = localcluster.config().with_overrides(
        {"progress.site_key_file": str(site_key), "progress.job_key_dir": str(keys)})
    wait_job(cfg, job_id, lambda j: j.running)
    deadline = time.monotonic() + 30
    while True:
        reads = live.readings(cfg, live.snapshot(cfg))
        if job_id in reads.progress:
            break
        assert time.monotonic() < deadline, reads.warnings
        time.sleep(1)
    assert reads.progress[job_id].step == 40 and reads.progress[job_id].samples_per_s == 120

    # a newer point for the job without its key (anyone with InfluxDB access could write it)
    InfluxClient.from_config(cfg).write([Point("job_progress", {"job_id": job_id},
                                               {"step": 99, "samples_per_s": 5000.0},
                                               time.time())])
    reads = live.readings(cfg, live.snapshot(cfg))
    assert job_id not in reads.progress
    assert any(f"job_id={job_id}: not signed" in w for w in reads.warnings)
