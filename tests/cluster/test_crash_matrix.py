"""Crash matrix on the real local cluster (issue: no job left held or lost after any crash).

For every action kind: the pass SIGKILLed right after each mutating Slurm command and right
after each journal line, and slurmctld SIGKILLed right after each mutating command (then
started again). For the actions that stop or change a running job (resize, move, cap) also
slurmctld SIGKILLed right after each command *before it saved it*: its saved state is put back
as it was before the command. Later passes, one every few seconds for at most
``SETTLE_S``, must bring the job back to where it should be (running again after a resize,
move or cap; pending after a defer; gone after a cancel), never held, never lost, nothing
unfinished in the journal. Each case is bounded: the pass by ``DRIVER_TIMEOUT_S``, Slurm
commands while slurmctld is gone by ``WATTBATCH_SLURM_TIMEOUT_S``. The run's tally (cases,
jobs lost, left held, tracebacks) is printed at the end of the session.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

import pytest
from cluster_waits import CRASH_RUNAWAY, CRASH_TALLY, file_holds, wait_job

from slurm_plugin import live
from slurm_plugin.actuate import ENDED
from slurm_plugin.journal import Journal, action_to_dict
from slurm_plugin.localcluster import procs, up
from slurm_plugin.model import Action, Readings
from slurm_plugin.policy.baseline import SlurmDefault
from slurm_plugin.proc import run
from slurm_plugin.reconcile import reconcile_pass
from slurm_plugin.slurm import actions

pytestmark = pytest.mark.cluster
SLEEP = "#!/bin/bash\nsleep 600\n"
DRIVER = Path(__file__).with_name("crash_driver.py")
DRIVER_TIMEOUT_S = 90
SETTLE_S = 60
# mutating commands and journal lines of each action
COMMANDS = {"resize": 4, "move_exclusive": 4, "power_cap": 2, "defer": 1, "cancel": 1}
LINES = {"resize": 6, "move_exclusive": 6, "power_cap": 4, "defer": 3, "cancel": 3}
BEFORE_SAVE = ("resize", "move_exclusive", "power_cap")


def _cases():
    for kind, n_cmd in COMMANDS.items():
        for n in range(1, n_cmd + 1):
            yield kind, "kill-after-command", n
            yield kind, "ctld-after-command", n
            if kind in BEFORE_SAVE:
                yield kind, "ctld-before-save", n
        for n in range(1, LINES[kind] + 1):
            yield kind, "kill-after-line", n


CASES = list(_cases())


@pytest.fixture(scope="module", autouse=True)
def _runaway_records_fixed(localcluster, request):
    """A requeue slurmctld lost before saving it leaves the accounting an open record of the
    requeued job (slurmdbd had it, slurmctld never did): Slurm's runaway jobs. After the
    matrix they are counted (the tally prints them) and closed, so that later tests, which
    read the accounting of a time window, see only their own jobs."""
    yield
    listed = run(["sacctmgr", "-n", "-P", "show", "runawayjobs", "format=ID"],
                 env=localcluster.env, input_text="n\n", check=False).stdout
    request.config.stash[CRASH_RUNAWAY] = sum(ln.strip().isdigit() for ln in listed.splitlines())
    run(["sacctmgr", "-i", "show", "runawayjobs"], env=localcluster.env, check=False)


def _job_and_action(kind: str, cfg, tmp_path) -> tuple[str, Action]:
    opts = ["--output=/dev/null", f"--chdir={tmp_path}", "-J", f"crash-{kind}"]
    if kind == "defer":
        job_id = actions.submit([*opts, "--gres=gpu:1", "--begin=now+3600"], SLEEP, cfg)
        return job_id, Action("defer", job_id, "crash-test", begin_s=time.time() + 7200)
    gres = "--gres=shard:2" if kind == "move_exclusive" else "--gres=gpu:1"
    job_id = actions.submit([*opts, gres], SLEEP, cfg)
    wait_job(cfg, job_id, lambda j: j.running)
    if kind == "power_cap":       # a cap that raises the time limit: two commands
        return job_id, Action(kind, job_id, "crash-test", power_cap_w=150.0,
                              time_limit_s=7200.0, why="crash matrix")
    gpus = 2 if kind == "resize" else (1 if kind == "move_exclusive" else None)
    return job_id, Action(kind, job_id, "crash-test", gpus=gpus, why="crash matrix")


def test_matrix_covers_every_command_and_journal_line():
    assert len(CASES) == 2 * sum(COMMANDS.values()) + sum(LINES.values()) + \
        sum(COMMANDS[k] for k in BEFORE_SAVE) == 56


def _where_it_should_be(kind: str, now, restarted: bool) -> bool:
    """Whether the job is back: gone after a cancel, pending after a defer, running after the
    others; with ``restarted`` False (slurmctld never died, so its state is whole) a job
    released and waiting for its start time counts too."""
    if kind == "cancel":
        return now is None or now.state in ("CANCELLED", "COMPLETED")
    if now is None or now.held:
        return False
    return now.state == "RUNNING" or (now.state == "PENDING" and
                                      (kind == "defer" or not restarted))


def _wait_state_saved(localcluster, job_id: str, timeout_s: float = 30.0) -> None:
    """Until slurmctld has saved the job to its state file: a SIGKILLed slurmctld forgets what
    it had not saved yet (even the job itself), which no reconciler can undo. A fresh comment
    on the job is looked for in the (packed, uncompressed) state file."""
    mark = f"saved-{uuid.uuid4().hex[:8]}"
    run(["scontrol", "update", f"jobid={job_id}", f"Comment={mark}"], env=localcluster.env)
    saved = localcluster.state_dir / "slurmctld" / "job_state"
    deadline = time.monotonic() + timeout_s
    while not file_holds(saved, mark.encode()):
        assert time.monotonic() < deadline, f"slurmctld did not save job {job_id} in {saved}"
        time.sleep(0.2)


@pytest.mark.parametrize("kind, fault, n", CASES)
def test_no_job_lost_or_left_held(localcluster, request, tmp_path, kind, fault, n):
    cfg = localcluster.config()
    job_id, action = _job_and_action(kind, cfg, tmp_path)
    if fault == "ctld-after-command":            # the driver waits for ctld-before-save
        _wait_state_saved(localcluster, job_id)
    state = tmp_path / "state"
    env = {**localcluster.env, "WATTBATCH_SLURM_TIMEOUT_S": "3"}
    ctld = localcluster.spec.pid_file("slurmctld")
    done = run([sys.executable, str(DRIVER), str(state), json.dumps(action_to_dict(action)),
                fault, str(n), str(ctld), str(localcluster.state_dir / "slurmctld")],
               env=env, timeout_s=DRIVER_TIMEOUT_S, check=False)
    tally = request.config.stash.setdefault(CRASH_TALLY, [])
    traceback = "Traceback" in done.stderr
    counted = "journal_lines" if fault.endswith("line") else "mutating_commands"
    struck = done.returncode == -9 if fault.startswith("kill") else done.returncode == 0 and \
        json.loads(done.stdout)[counted] >= n
    if not struck:
        # the pass ended before the Nth command: a step Slurm's state made unnecessary was
        # skipped (start_now of a job Slurm started at once); it must have ended cleanly
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        assert out[counted] < n
        assert [a["status"] for a in out["actions"]] == ["done"], out
    elif fault.startswith("ctld"):
        deadline = time.monotonic() + 10          # SIGKILL is delivered; exiting takes a while
        while procs.running_pid(ctld, "slurmctld"):
            assert time.monotonic() < deadline, "slurmctld outlived its SIGKILL"
            time.sleep(0.1)
        assert "slurmctld" in up(localcluster.spec, install=False).started

    passes = []
    restarted = fault.startswith("ctld") and struck
    deadline, last = time.monotonic() + SETTLE_S, -1e9
    while True:
        now = actions.job_now(job_id, cfg)
        if not Journal(state / "journal.jsonl").unfinished() and \
                _where_it_should_be(kind, now, restarted) or time.monotonic() > deadline:
            break
        if time.monotonic() - last >= 2:                     # a pass every 2 s at most
            passes.append(reconcile_pass(
                policy=SlurmDefault(), snapshot=lambda: live.snapshot(cfg), readings=Readings,
                actuator=live.SlurmActuator(cfg), state_dir=state).as_dict())
            last = time.monotonic()
        time.sleep(0.5)
    lost = kind != "cancel" and (now is None or now.state in ENDED)
    held = bool(now and now.held)
    tally.append((kind, fault, n, lost, held, traceback))
    shown = f"job {job_id}: {now}; passes: {passes}"
    assert not traceback, done.stderr
    assert Journal(state / "journal.jsonl").unfinished() == [], shown
    assert not held, f"left held: {shown}"
    assert not lost, f"lost: {shown}"
    assert _where_it_should_be(kind, now, restarted), f"not back after {SETTLE_S} s: {shown}"
