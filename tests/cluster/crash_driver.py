"""One reconcile pass that acts on one job and is struck by a fault at a chosen point, for
``test_crash_matrix``:
``python crash_driver.py STATE_DIR ACTION_JSON FAULT N [CTLD_PID_FILE CTLD_STATE_DIR]``.

FAULT ``kill-after-command``: SIGKILL this process right after the Nth mutating Slurm command
(scontrol requeuehold/update/release, scancel) returned; ``kill-after-line``: right after the
Nth journal line; ``ctld-after-command``: SIGKILL slurmctld after the Nth mutating command and
let the pass go on; ``ctld-before-save``: the same, with slurmctld's saved state put back as it
was before that command (as when slurmctld dies before it saves the change: its state is
copied once it has saved everything before the command, and restored once it is dead). Exit 0 when the pass ended, printing it with how many mutating commands
and journal lines it had: fewer than N when Slurm's state made a step unnecessary (a released
job that Slurm started at once needs no ``StartTime=now``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
import uuid
from pathlib import Path

from cluster_waits import file_holds

from slurm_plugin import config, live, proc
from slurm_plugin.localcluster import procs
from slurm_plugin.journal import Journal
from slurm_plugin.model import Action, Readings
from slurm_plugin.reconcile import reconcile_pass

MUTATING = ("requeuehold", "update", "release")


class Fixed:
    name = "crash-test"

    def __init__(self, action: Action) -> None:
        self.action = action

    def advise(self, request, ctx):  # pragma: no cover - not used
        raise AssertionError

    def reconcile(self, ctx):
        return (self.action,)


def _saved_copy(run, job_id: str, ctld_state: Path, copy: Path) -> None:
    """Once slurmctld has saved all it has (a fresh comment on the job is in its state
    file), a copy of its state directory. slurmctld writes each file as ``X.new`` and renames
    it (``X`` -> ``X.old``, ``X.new`` -> ``X``) at any time: ``.new`` files are left out, and a
    copy taken while a file was renamed away is taken again."""
    mark = f"saved-{uuid.uuid4().hex[:8]}".encode()
    run(["scontrol", "update", f"jobid={job_id}", f"Comment={mark.decode()}"])
    deadline = time.monotonic() + 30
    while True:
        if file_holds(ctld_state / "job_state", mark):
            shutil.rmtree(copy, ignore_errors=True)
            try:
                shutil.copytree(ctld_state, copy, ignore=shutil.ignore_patterns("*.new"))
                if file_holds(copy / "job_state", mark):
                    return
            except (shutil.Error, FileNotFoundError):
                pass
        if time.monotonic() > deadline:
            raise SystemExit(f"slurmctld did not save job {job_id} in {ctld_state}")
        time.sleep(0.05)


def main(state_dir: str, action_json: str, fault: str, n: str, ctld_pid_file: str = "",
         ctld_state_dir: str = "") -> int:
    cfg = config.load()
    count = {"cmd": 0, "line": 0}
    target = int(n)
    action = Action(**json.loads(action_json))
    copy = Path(state_dir) / "slurmctld-saved"

    def strike() -> None:
        if not fault.startswith("ctld"):
            os.kill(os.getpid(), signal.SIGKILL)
        pid_file = Path(ctld_pid_file)
        os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
        if fault == "ctld-before-save":
            while procs.running_pid(pid_file, "slurmctld"):
                time.sleep(0.05)
            shutil.rmtree(ctld_state_dir)
            shutil.copytree(copy, ctld_state_dir)

    real_run = proc.run

    def run(argv, **kw):
        name = os.path.basename(str(argv[0]))
        mutating = name == "scancel" or (name == "scontrol" and str(argv[1]) in MUTATING)
        if mutating and fault == "ctld-before-save" and count["cmd"] + 1 == target:
            _saved_copy(real_run, action.job_id, Path(ctld_state_dir), copy)
        done = real_run(argv, **kw)
        if mutating:
            count["cmd"] += 1
            if fault.startswith("ctld") or fault == "kill-after-command":
                if count["cmd"] == target:
                    strike()
        return done
    proc.run = run

    real_write = Journal.write

    def write(self, *a, **kw):
        entry = real_write(self, *a, **kw)
        count["line"] += 1
        if fault == "kill-after-line" and count["line"] == target:
            strike()
        return entry
    Journal.write = write

    result = reconcile_pass(policy=Fixed(action),
                            snapshot=lambda: live.snapshot(cfg), readings=Readings,
                            actuator=live.SlurmActuator(cfg), state_dir=Path(state_dir))
    print(json.dumps({**result.as_dict(), "mutating_commands": count["cmd"],
                      "journal_lines": count["line"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
