"""Polling helpers shared by the real-cluster tests."""

from __future__ import annotations

import time

import pytest

from slurm_plugin.model import Job
from slurm_plugin.slurm.snapshot import snapshot


def wait_job(cfg, job_id: str, ok, timeout_s: float = 60.0) -> Job:
    """Poll the snapshot until ``ok(job)``; fail with the job's last state."""
    deadline = time.monotonic() + timeout_s
    while True:
        job = snapshot(cfg).jobs.get(job_id)
        if job is not None and ok(job):
            return job
        if time.monotonic() > deadline:
            pytest.fail(f"job {job_id} not as expected after {timeout_s:g} s: {job}")
        time.sleep(0.5)


def file_holds(path, data: bytes) -> bool:
    """Whether the file holds ``data``. slurmctld replaces its state files by renaming
    (job_state -> job_state.old, job_state.new -> job_state), so between two renames there is
    none: read that as not saved yet."""
    try:
        return data in path.read_bytes()
    except FileNotFoundError:
        return False


def fill_every_gpu(cfg, env: dict) -> list[str]:
    """One plain job on all the GPUs of each node (10-minute limit), each running when this
    returns: a job submitted next waits. The caller cancels them."""
    from slurm_plugin.proc import run
    fill = [run(["sbatch", "--parsable", "-w", n.name, f"--gres=gpu:{len(n.gpus)}", "-t", "10",
                 "--output=/dev/null", "--wrap=sleep 600"], env=env, timeout_s=30)
            .stdout.strip().split(";")[0] for n in snapshot(cfg).nodes]
    for job_id in fill:
        wait_job(cfg, job_id, lambda j: j.running)
    return fill


# the crash matrix's cases as (kind, fault, n, lost, held, traceback), printed by conftest
CRASH_TALLY = pytest.StashKey[list]()
CRASH_RUNAWAY = pytest.StashKey[int]()    # accounting records the lost requeues left open
