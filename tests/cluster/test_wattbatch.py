"""wattbatch on the real local cluster: sbatch options and #SBATCH scripts through wattbatch,
checked with `scontrol show job`; sbatch's own output and exit codes; fail-open."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]
# A policy that reads the snapshot and the telemetry, to exercise both providers for real.
RUNNER = """
import sys
from slurm_plugin.model import Placement
from slurm_plugin.policy import registry
class Pin:
    name = "test-pin"
    def advise(self, request, ctx):
        ctx.readings.gpus
        node = sorted(n.name for n in ctx.cluster.nodes)[-1]
        return Placement(self.name, request.gpus, nodes=(node,), gpu_indexes=(3,),
                         share_mode="shard", shards=1, why=(f"pin {node} gpu 3",))
    def reconcile(self, ctx):
        return ()
registry.register("test-pin", Pin)
from wrapper.cli import main
main(sys.argv[1:])
"""
SCRIPT = """#!/bin/bash
#SBATCH --job-name=from-script
#SBATCH --time=0-00:07:00 --comment="script comment"
#SBATCH -o {out}/%x-%j.out

# a comment does not stop the header
#SBATCH --partition=gpu
#WATTBATCH app=resnet18
echo "args: $*"
#SBATCH --job-name=ignored-after-command
"""


def wattbatch(args: list[str], *, stdin: str | None = None, env: dict | None = None,
              cwd: Path | None = None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", RUNNER, *args], input=stdin, text=True,
                          capture_output=True, env=full_env, cwd=cwd, timeout=60)


def sbatch(args: list[str], stdin: str | None = None, cwd: Path | None = None):
    return subprocess.run(["sbatch", *args], input=stdin, text=True, capture_output=True,
                          cwd=cwd, timeout=60)


def show(job_id: str) -> dict[str, str]:
    """``scontrol show job`` fields; Comment, Command and paths fill their own lines.
    ``TresPerNode`` in the ``gres:`` spelling whatever the release (24.11+: ``gres/gpu:2``)."""
    text = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True,
                          check=True).stdout
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, rest = line.strip().partition("=")
        if key in ("Comment", "AdminComment", "Command", "StdOut", "StdErr", "StdIn", "WorkDir"):
            fields[key] = rest.strip()
            continue
        for m in re.finditer(r"([\w:/]+)=(.*?)(?=\s+[\w:/]+=|$)", line.strip()):
            fields.setdefault(m.group(1), m.group(2).strip())
    if "TresPerNode" in fields:
        fields["TresPerNode"] = fields["TresPerNode"].replace("gres/", "gres:")
    return fields


def job_id(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, done.stderr
    m = re.fullmatch(r"Submitted batch job (\d+)\n", done.stdout)
    assert m, done.stdout
    return m.group(1)


@pytest.fixture()
def script(tmp_path) -> Path:
    path = tmp_path / "train.sh"
    path.write_text(SCRIPT.format(out=tmp_path))
    return path


def test_script_directives_and_command_line(localcluster, script, tmp_path):
    done = wattbatch(["--hold", "-t", "3", "--gres=gpu:2", str(script), "a", "b"], cwd=tmp_path)
    job = show(job_id(done))
    assert done.stderr == ""
    assert job["JobName"] == "from-script" and job["TimeLimit"] == "00:03:00"
    assert job["Partition"] == "gpu" and job["TresPerNode"] == "gres:gpu:2"
    assert job["Comment"] == "script comment"         # job_submit.lua took the wb: tag out
    assert job["AdminComment"].endswith("declared_app=resnet18;tagged=1;policy=slurm-default")
    assert job["StdOut"] == f"{tmp_path}/from-script-{job['JobId']}.out"
    assert job["Command"].split()[0] == str(script)   # 24.11+ show no arguments here
    subprocess.run(["scontrol", "release", job["JobId"]], check=True, timeout=30)
    out, deadline = Path(job["StdOut"]), time.monotonic() + 60
    while not (out.exists() and "args:" in out.read_text()):   # the arguments reach the job
        assert time.monotonic() < deadline, f"job {job['JobId']} printed nothing"
        time.sleep(0.5)
    assert "args: a b\n" in out.read_text()


def test_spread_of_sbatch_options(localcluster, tmp_path):
    done = wattbatch(["-J", "opts", "--array=1-3%2", "-N1", "--ntasks=2", "-c", "1", "--mem=100",
                      "--nodelist=gpu2", "-o", "/dev/null", "--exclusive", "--nice=5", "-H",
                      "--requeue", "--gres", "gpu:1", "--wrap", "hostname"], cwd=tmp_path)
    job = show(job_id(done))
    assert job["JobName"] == "opts" and job["ArrayTaskId"] == "1-3%2"
    assert job["ReqNodeList"] == "gpu2" and job["NumTasks"] == "2" and job["Nice"] == "5"
    assert job["OverSubscribe"] == "NO" and job["Requeue"] == "1"
    assert job["TresPerNode"] == "gres:gpu:1" and "Comment" not in job
    assert job["AdminComment"].endswith(";tagged=1;policy=slurm-default")


def test_parsable_stdin_and_pinned_shards(localcluster, script, tmp_path):
    plain = sbatch(["--parsable", "--hold", "-o", "/dev/null", "--wrap", "true"])
    ours = wattbatch(["--parsable", "--hold", "-o", "/dev/null", "--wrap", "true"])
    assert re.fullmatch(r"\d+\n", plain.stdout) and re.fullmatch(r"\d+\n", ours.stdout)
    assert ours.stderr == "" and show(ours.stdout.strip())["JobName"] == "wrap"
    piped = wattbatch(["--hold", "--parsable", "--wb-policy", "test-pin", "--wb-explain"],
                      stdin=script.read_text(), cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    job = show(piped.stdout.strip())
    assert job["TresPerNode"] == "gres:shard:g3:1" and job["ReqNodeList"] == "gpu4"
    assert job["JobName"] == "from-script" and job["Comment"] == "script comment"
    assert job["AdminComment"].endswith(";policy=test-pin;share=shard:1")
    assert "wattbatch: explain: pin gpu4 gpu 3" in piped.stderr


def test_an_array_is_not_pinned_to_the_place_chosen_for_one_job(localcluster):
    """The same pinning policy on an array: its tasks would all wait for (or stack on) GPU 3 of
    gpu4; wattbatch leaves their placement to Slurm and says so."""
    done = wattbatch(["--hold", "--parsable", "--array=1-4", "--gres=gpu:1", "-o", "/dev/null",
                      "--wb-policy", "test-pin", "--wb-explain", "--wrap", "true"])
    assert done.returncode == 0, done.stderr
    array_id = done.stdout.strip()
    try:
        job = show(array_id)
        assert job["TresPerNode"] == "gres:gpu:1", job
        assert job.get("ReqNodeList", "(null)") == "(null)", job
        assert "array of 4 tasks: placement dropped" in done.stderr
    finally:
        subprocess.run(["scancel", array_id], timeout=30)


def test_a_pending_elastic_arrays_tasks_are_one_record_that_nothing_resizes(localcluster):
    """Four tasks of an elastic array fill the four nodes; the two left wait as one squeue
    record (``A_[4-5]``). The snapshot says it stands for two tasks and keeps no GPU range on it
    (a resize there would resize both); each started task is its own elastic job."""
    from slurm_plugin.slurm.snapshot import snapshot
    done = wattbatch(["--parsable", "--array=0-5", "-N1", "--gres=gpu:4", "-t", "5",
                      "-o", "/dev/null", "--wb-policy", "elastic", "--wb-elastic=1-4",
                      "--wrap", "sleep 120"])
    assert done.returncode == 0, done.stderr
    array_id = done.stdout.strip()
    try:
        deadline = time.monotonic() + 60
        while True:
            jobs = snapshot(localcluster.config()).jobs.values()
            tasks = [j for j in jobs if j.running]
            record = [j for j in jobs if j.pending and j.job_id == array_id]
            if len(tasks) == 4 and record:
                break
            assert time.monotonic() < deadline, f"four tasks never ran: {list(jobs)}"
            time.sleep(1)
        assert (record[0].array_tasks, record[0].min_gpus, record[0].max_gpus) == (2, None, None)
        assert "elastic=1-4" in show(array_id)["AdminComment"]
        assert all((t.array_tasks, t.min_gpus, t.max_gpus) == (1, 1, 4) for t in tasks), tasks
    finally:
        subprocess.run(["scancel", array_id], timeout=30)


def test_bad_sbatch_option_exit_code_is_sbatchs(localcluster, script):
    ours, plain = wattbatch(["--bogus", str(script)]), sbatch(["--bogus", str(script)])
    assert (ours.returncode, ours.stdout, ours.stderr) == (
        plain.returncode, plain.stdout, plain.stderr)
    assert ours.returncode == 255
    missing = wattbatch(["/nonexistent/job.sh"])
    assert (missing.returncode, missing.stderr) == (1, sbatch(["/nonexistent/job.sh"]).stderr)


def test_bad_wattbatch_settings(localcluster, tmp_path):
    """On the command line: exit 255 (sbatch's code for a bad option), nothing submitted. In a
    #WATTBATCH line: one warning, the job submitted unchanged."""
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/bin/bash\n#SBATCH -J bad\n#WATTBATCH opt-out=everything\ntrue\n")
    unknown = wattbatch(["--wb-shar", str(bad)])
    assert unknown.returncode == 255 and "valid options:" in unknown.stderr
    queue = subprocess.run(["squeue", "-h", "-n", "bad"], capture_output=True, text=True)
    assert queue.stdout == ""
    done = wattbatch(["--hold", str(bad)], cwd=tmp_path)
    job = show(job_id(done))
    assert done.stderr == ("wattbatch: warning: script line 3: --wb-opt-out='everything': "
                           "unknown action 'everything'; choose from share, defer, resize, "
                           "place, power, batch, all; submitting the job unchanged\n")
    assert job["JobName"] == "bad" and "Comment" not in job


def test_a_batch_range_no_advice_can_use_is_said_and_the_job_goes_in(localcluster, tmp_path):
    """A range outside the application's profiled batch sizes: one warning, and the job is in
    Slurm with its range recorded as asked (advice would never come for it)."""
    job_sh = tmp_path / "b.sh"
    job_sh.write_text("#!/bin/bash\n#SBATCH -J outrange\ntrue\n")
    done = wattbatch(["--hold", "--wb-app=cifar10", "--wb-batch-size=8-64", str(job_sh)],
                     cwd=tmp_path)
    job = show(job_id(done))
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("wattbatch: warning: ")
    assert "outside cifar10's profiled global batch sizes (128-4096)" in done.stderr
    assert job["JobName"] == "outrange" and "batch=8-64" in job.get("AdminComment", ""), job


def test_fail_open_when_influxdb_is_unreachable(localcluster, script):
    done = wattbatch(["--hold", "--wb-policy", "test-pin", str(script)],
                     env={"WATTBATCH_INFLUX_URL": "http://127.0.0.1:9", "WATTBATCH_INFLUX_TIMEOUT_S": "0.5"})
    job = show(job_id(done))
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("wattbatch: warning:")
    assert job["Comment"] == "script comment" and "TresPerNode" not in job   # unchanged
    assert job["AdminComment"].endswith(";tagged=0")


def test_a_hanging_influxdb_is_waited_on_once_then_skipped(localcluster, script, tmp_path):
    """The cluster's own influxd stopped (SIGSTOP: it accepts connections and never answers):
    the first submission waits its read timeout and says so; the next skips InfluxDB at once,
    saying until when; both jobs go in. The memory is the user's runtime directory's."""
    import signal

    from slurm_plugin.localcluster import procs
    pid = procs.running_pid(localcluster.spec.pid_file("influxd"), "influxd")
    assert pid, "influxd is not running"
    env = {"WATTBATCH_INFLUX_TIMEOUT_S": "1", "XDG_RUNTIME_DIR": str(tmp_path)}
    os.kill(pid, signal.SIGSTOP)
    try:
        first = wattbatch(["--hold", "--wb-policy", "test-pin", str(script)], env=env)
        second = wattbatch(["--hold", "--wb-policy", "test-pin", str(script)], env=env)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert "timed out" in first.stderr and "later calls skip it until" in first.stderr, \
        first.stderr
    assert "skipped until" in second.stderr and "timed out" in second.stderr, second.stderr
    for done in (first, second):
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("wattbatch: warning:")
        assert show(job_id(done))["AdminComment"].endswith(";tagged=0")   # submitted unchanged


def test_controller_down_is_reported_as_sbatch_reports_it(localcluster, script, tmp_path):
    etc = tmp_path / "etc"
    shutil.copytree(Path(localcluster.slurm_conf).parent, etc)
    conf = etc / "slurm.conf"
    conf.write_text(re.sub(r"(?m)^SlurmctldPort=\d+", "SlurmctldPort=9", conf.read_text()))
    env = {"SLURM_CONF": str(conf), "WATTBATCH_SLURM_CONF": str(conf)}
    ours = wattbatch([str(script)], env=env)
    plain = subprocess.run(["sbatch", str(script)], capture_output=True, text=True,
                           env=dict(os.environ, **env), timeout=120)
    assert ours.returncode == plain.returncode == 1
    assert "Unable to contact slurm controller" in ours.stderr
    assert ours.stderr == plain.stderr and ours.stdout == ""
