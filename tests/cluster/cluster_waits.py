"""Polling helpers shared by the real-cluster tests, and a cluster of a module's own."""

from __future__ import annotations

import dataclasses
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from slurm_plugin.localcluster import cancel_all_jobs, down, up
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


@contextmanager
def own_cluster(session, suffix: str, **changes):
    """A local cluster of a test module's own, while the session's is down (``session_down``):
    the session's spec with ``changes`` (gpu_model, gpu_source, share_gres), the same ports,
    the state directory ``<session's>-<suffix>``; up, the environment pointing at it, and
    down after."""
    main = session.spec
    spec = dataclasses.replace(main, state_dir=Path(f"{main.state_dir}-{suffix}"), **changes)
    patch = pytest.MonkeyPatch()
    try:
        up(spec, install=False)
        for name, value in spec.env().items():
            patch.setenv(name, value)
        yield dataclasses.replace(session, spec=spec, state_dir=spec.state_dir,
                                  slurm_conf=spec.slurm_conf, site_toml=spec.site_toml,
                                  env=spec.env())
    finally:
        patch.undo()
        cancel_all_jobs(spec)
        down(spec)
