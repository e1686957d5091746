"""Rendering: golden scripts, the user's bytes kept, every value shell-quoted."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from wrapper.render import is_shell_script, render

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "render"
USER_SCRIPT = ("#!/bin/bash\n#SBATCH --job-name=train\n#SBATCH --gres=gpu:1\n\n# setup\n"
               "#SBATCH -t 10\necho \"start $1\"\npython train.py\n#SBATCH --ignored\n")
CASES = {
    "shared_shard": dict(template="shared_gpu.sbatch.j2", share_mode="shard", gpus=1,
                         mem_cap_mib=8192, mem_fraction=0.25,
                         env=[("WATTBATCH_JOB_POLICY", "eaco"), ("WATTBATCH_JOB_APP", "resnet50"),
                              ("WATTBATCH_SHARE_MODE", "shard"), ("WATTBATCH_SHARDS", "1"),
                              ("WATTBATCH_GPU_MEM_CAP_MIB", "8192"),
                              ("WATTBATCH_GPU_MEM_FRACTION", "0.25")]),
    "shared_mps": dict(template="shared_gpu.sbatch.j2", share_mode="mps", gpus=2,
                       mem_cap_mib=16000, mem_fraction=0.5,
                       env=[("WATTBATCH_JOB_POLICY", "eaco"), ("WATTBATCH_SHARE_MODE", "mps")]),
    "shared_mig": dict(template="shared_gpu.sbatch.j2", share_mode="mig", gpus=1,
                       env=[("WATTBATCH_JOB_POLICY", "eaco"), ("WATTBATCH_JOB_APP", "aps"),
                            ("WATTBATCH_SHARE_MODE", "mig"),
                            ("WATTBATCH_MIG_PROFILE", "3g.40gb")]),
    "elastic": dict(template="elastic.sbatch.j2", share_mode="exclusive", gpus=2,
                    env=[("WATTBATCH_JOB_POLICY", "elastic"), ("WATTBATCH_MIN_GPUS", "1"),
                         ("WATTBATCH_MAX_GPUS", "4")]),
    "ones_batch": dict(template="elastic.sbatch.j2", share_mode="exclusive", gpus=1,
                       env=[("WATTBATCH_JOB_POLICY", "ones"), ("WATTBATCH_BATCH_RANGE", "64-1024"),
                            ("WATTBATCH_LR_SCALING", "sqrt"), ("WATTBATCH_MIN_GPUS", "1"),
                            ("WATTBATCH_MAX_GPUS", "4")]),
    "base_hostile_values": dict(template="base.sbatch.j2",
                                env=[("WATTBATCH_JOB_POLICY", "x'; rm -rf / #"),
                                     ("WATTBATCH_JOB_APP", "$(reboot)\n`id`")]),
}


def _block(out: str) -> str:
    start = out.index("# >>> wattbatch")
    end = out.index("# <<< wattbatch\n") + len("# <<< wattbatch\n")
    return out[start:end]


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case):
    kw = dict(CASES[case])
    out = render(USER_SCRIPT, kw.pop("template"), kw.pop("env"), **kw)
    assert out == (GOLDEN / f"{case}.sbatch").read_text()


@pytest.mark.parametrize("case", sorted(CASES))
def test_user_bytes_kept_and_block_above_first_command(case):
    kw = dict(CASES[case])
    out = render(USER_SCRIPT, kw.pop("template"), kw.pop("env"), **kw)
    assert out.replace(_block(out), "") == USER_SCRIPT
    assert out.index("# >>> wattbatch") == USER_SCRIPT.index('echo "start')


def test_values_are_shell_quoted_and_evaluate_to_themselves(tmp_path):
    kw = dict(CASES["base_hostile_values"])
    out = render("#!/bin/bash\necho -n \"$WATTBATCH_JOB_APP|$WATTBATCH_JOB_POLICY\"\n",
                 kw["template"], kw["env"])
    script = tmp_path / "s.sh"
    script.write_text(out)
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=True)
    assert done.stdout == "$(reboot)\n`id`|x'; rm -rf / #"
    assert shlex.quote("x'; rm -rf / #") in out


def test_no_template_means_unchanged_and_odd_scripts():
    assert render(USER_SCRIPT, "", [("A", "1")]) == USER_SCRIPT
    no_cmd = "#!/bin/sh\n#SBATCH -J x"
    out = render(no_cmd, "base.sbatch.j2", [("A", "1")])
    assert out.startswith(no_cmd + "\n# >>> wattbatch") and out.endswith("# <<< wattbatch\n")
    raw = "#!/bin/sh\n# caf\udce9\ntrue\n"               # not UTF-8: kept byte for byte
    assert render(raw, "base.sbatch.j2", [("A", "1")]).replace("export A=1\n", "").count(
        "caf\udce9") == 1
    with pytest.raises(ValueError, match="invalid environment variable name"):
        render(USER_SCRIPT, "base.sbatch.j2", [("A; rm", "1")])


def test_shell_detection():
    assert is_shell_script("#!/bin/bash\n") and is_shell_script("#!/usr/bin/env zsh\n")
    assert not is_shell_script("#!/usr/bin/env python3\n") and not is_shell_script("echo\n")


def test_elastic_script_forwards_sigterm_to_the_child(tmp_path):
    body = ("trap 'echo caught-$WATTBATCH_RESTART_COUNT; exit 7' TERM\n"
            "echo started; while :; do sleep 0.05; done\n")
    kw = dict(CASES["elastic"])
    out = render("#!/bin/bash\n" + body, kw["template"], kw["env"])
    script = tmp_path / "job.sh"
    script.write_text(out)
    script.chmod(0o700)
    env = dict(os.environ, SLURM_SUBMIT_DIR=str(tmp_path), SLURM_JOB_ID="9")
    proc = subprocess.Popen([str(script)], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout.readline() == "started\n"
    proc.terminate()
    assert proc.stdout.read() == "caught-0\n" and proc.wait(5) == 7
    assert (tmp_path / ".wattbatch" / "checkpoints" / "9").is_dir()


def _signal(pid: int, sig: int) -> None:
    """As Slurm signals a job's processes: one that ended since the listing (the template's
    short-lived helpers) is no error."""
    import os
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _tree(root: int) -> set[int]:
    """``root`` and its descendants, by parent links in /proc (how proctrack/linuxproc finds
    a job's processes)."""
    import os

    parent = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    stat = fh.read()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if fields[0] != "Z":
                parent[int(name)] = int(fields[1])
    out, grew = {root}, True
    while grew:
        more = {pid for pid, ppid in parent.items() if ppid in out} - out
        out |= more
        grew = bool(more)
    return out


def test_elastic_program_stays_in_the_job_until_slurm_kills_it(tmp_path):
    """Slurm signals every process of the job with SIGTERM, then SIGKILLs those it still finds
    by parentage after KillWait. A program that takes longer to checkpoint (here: ignores
    SIGTERM) must still be found then, not orphaned by its shell and left training."""
    import os
    import signal
    import subprocess
    import sys
    import time

    pid_file = tmp_path / "child.pid"
    user = (f"#!/bin/bash\n{sys.executable} -c 'import os, signal, time; "
            f"signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            f"open(\"{pid_file}\", \"w\").write(str(os.getpid())); time.sleep(60)'\n")
    kw = dict(CASES["elastic"])
    script = tmp_path / "job.sh"
    script.write_text(render(user, kw.pop("template"), kw.pop("env"), **kw))
    env = {k: v for k, v in os.environ.items() if k != "WATTBATCH_ELASTIC_CHILD"}
    shell = subprocess.Popen(["bash", str(script)], env={**env, "SLURM_SUBMIT_DIR": str(tmp_path)})
    try:
        deadline = time.monotonic() + 20
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline, "the program never started"
            time.sleep(0.05)
        program = int(pid_file.read_text())
        for pid in _tree(shell.pid):               # requeue: SIGTERM to the job's processes
            _signal(pid, signal.SIGTERM)
        time.sleep(1.0)
        found = _tree(shell.pid)
        assert program in found, "the program lost its place in the job's process tree"
        for pid in found:                           # KillWait is over
            _signal(pid, signal.SIGKILL)
        shell.wait(10)
        deadline = time.monotonic() + 10      # a killed process is gone once it is scheduled
        while program in _tree(1) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert program not in _tree(1), f"the program (pid {program}) outlived its job"
    finally:
        shell.kill()
