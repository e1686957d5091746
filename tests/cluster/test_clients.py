"""Real clients that submit through ``sbatch`` (submitit, dask-jobqueue, the Maestro workflow
manager), with wattbatch installed as ``sbatch`` by contrib's shim first on PATH and no bin-dir
setting at all: their jobs run, and each went through wattbatch (its ``wb:`` comment in
accounting)."""

from __future__ import annotations

import getpass
import operator
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sbatch_shim import env_with_shim, make_shim

pytestmark = pytest.mark.cluster


@pytest.fixture()
def through_shim(tmp_path, monkeypatch):
    """This process's PATH with the shim first (the clients run sbatch from it)."""
    shim = make_shim(tmp_path / "shim").parent
    for name, value in env_with_shim(shim).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("WATTBATCH_SLURM_BIN_DIR", raising=False)
    monkeypatch.setenv("USER", getpass.getuser())    # Maestro polls `squeue -u $USER`
    return shim


def _policy(admin_comment: str) -> str:
    """``policy=P`` from job_submit.lua's record (``wb:uid=..;..;policy=P``), else ""."""
    parts = admin_comment.replace(" ", ";").split(";")
    return next((p for p in parts if p.startswith("policy=")), "")


def comments(job_ids: list[str], timeout_s: float = 30) -> dict[str, str]:
    """Job id -> ``COMMENT|policy=P`` as accounting recorded them once the jobs ended (sacct):
    the job's Comment (the user's own: job_submit.lua takes wattbatch's ``wb:`` tag out of it)
    and the policy of that tag, which job_submit.lua recorded in the AdminComment."""
    deadline = time.monotonic() + timeout_s
    while True:
        out = subprocess.run(["sacct", "-n", "-P", "-X", "-o", "JobID,AdminComment,Comment",
                              "-j", ",".join(job_ids)], capture_output=True, text=True).stdout
        rows = [line.split("|", 2) for line in out.splitlines() if line.count("|") >= 2]
        base = {j.split("_")[0]: f"{c}|{_policy(admin)}" for j, admin, c in rows if admin}
        if all(base.get(j) for j in job_ids) or time.monotonic() > deadline:
            return base
        time.sleep(0.5)


def test_submitit_plain_gres_and_array(localcluster, through_shim, tmp_path):
    submitit = pytest.importorskip("submitit", reason="pip install '.[test]'")
    executor = submitit.AutoExecutor(folder=tmp_path / "submitit")
    assert executor.cluster == "slurm"
    executor.update_parameters(timeout_min=5, slurm_partition="gpu", slurm_gres="gpu:1")
    job = executor.submit(operator.mul, 7, 7)      # a function the job can import
    jobs = executor.map_array(operator.mul, [1, 2, 3], [1, 2, 3])
    assert job.result() == 49 and [j.result() for j in jobs] == [1, 4, 9]
    tags = comments([job.job_id, jobs[0].job_id.split("_")[0]])
    assert set(tags.values()) == {"|policy=slurm-default"}, tags


def test_dask_jobqueue_cluster(localcluster, through_shim, tmp_path):
    dask_jobqueue = pytest.importorskip("dask_jobqueue", reason="pip install '.[test]'")
    distributed = pytest.importorskip("distributed")
    with dask_jobqueue.SLURMCluster(cores=1, memory="1GB", processes=1, queue="gpu",
                                    walltime="00:05:00", log_directory=str(tmp_path),
                                    job_extra_directives=["--gres=gpu:1"],
                                    scheduler_options={"host": "127.0.0.1"}) as cluster:
        cluster.scale(jobs=1)
        with distributed.Client(cluster) as client:
            assert client.submit(operator.mul, 5, 5).result(timeout=120) == 25
            ids = [w.job_id for w in cluster.workers.values()]
            shown = subprocess.run(["scontrol", "-o", "show", "job"], capture_output=True
                                   ).stdout.decode(errors="replace").splitlines()
        records = [re.search(r"AdminComment=(\S*)", line).group(1) for line in shown
                   if line.split()[0].removeprefix("JobId=") in ids]
        assert ids and [_policy(a) for a in records] == ["policy=slurm-default"] * len(ids)


MAESTRO_SPEC = """
description:
  name: wbflow
  description: two dependent steps submitted through sbatch
batch:
  type: slurm
  host: localhost
  bank: wattbatch
  queue: gpu
study:
  - name: first
    description: writes a file
    run:
      cmd: echo "from first" > first.txt
      nodes: 1
      procs: 1
      walltime: "00:02:00"
  - name: second
    description: reads it after first ended
    run:
      cmd: cat ../first/first.txt > second.txt
      depends: [first]
      nodes: 1
      procs: 1
      walltime: "00:02:00"
"""


@pytest.mark.xfail(sys.version_info >= (3, 14), strict=True,
                   reason="maestrowf calls pkgutil.get_loader, which Python 3.14 removed: "
                          "Maestro itself does not start there (Debian sid's Python)")
def test_maestro_workflow_through_the_shim(localcluster, through_shim, tmp_path):
    """A workflow manager that submits every step with ``sbatch`` (then polls squeue/sacct)."""
    maestro = Path(sys.executable).parent / "maestro"
    if not maestro.exists():
        pytest.skip("maestrowf not installed: pip install '.[test]'")
    spec = tmp_path / "flow.yaml"
    spec.write_text(MAESTRO_SPEC)
    out = tmp_path / "study"
    done = subprocess.run([str(maestro), "run", "-y", "-fg", "-s", "1", "-o", str(out),
                           str(spec)], capture_output=True, text=True, timeout=300,
                          env=os.environ.copy(), cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (out / "second" / "second.txt").read_text() == "from first\n"
    rows = [line.split(",") for line in (out / "status.csv").read_text().splitlines()[1:]]
    ids = {row[0]: row[1] for row in rows}                      # step name -> job id
    tags = comments(list(ids.values()))
    assert tags[ids["first"]] == "writes a file|policy=slurm-default", tags
    assert tags[ids["second"]] == "reads it after first ended|policy=slurm-default", tags
