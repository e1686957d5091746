"""One reconcile pass that acts on one job and is struck by a fault at a chosen point, for
``test_crash_matrix``: ``python crash_driver.py STATE_DIR ACTION_JSON FAULT N [CTLD_PID_FILE]``.

FAULT ``kill-after-command``: SIGKILL this process right after the Nth mutating Slurm command
(scontrol requeuehold/update/release, scancel) returned; ``kill-after-line``: right after the
Nth journal line; ``ctld-after-command``: SIGKILL slurmctld after the Nth mutating command and
let the pass go on. Exit 0 when the pass ended, printing it with how many mutating commands
and journal lines it had: fewer than N when Slurm's state made a step unnecessary (a released
job that Slurm started at once needs no ``StartTime=now``)."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from slurm_plugin import config, live, proc
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


def main(state_dir: str, action_json: str, fault: str, n: str, ctld_pid_file: str = "") -> int:
    cfg = config.load()
    count = {"cmd": 0, "line": 0}
    target = int(n)

    def strike() -> None:
        if fault == "ctld-after-command":
            os.kill(int(Path(ctld_pid_file).read_text().split()[0]), signal.SIGKILL)
        else:
            os.kill(os.getpid(), signal.SIGKILL)

    real_run = proc.run

    def run(argv, **kw):
        done = real_run(argv, **kw)
        name = os.path.basename(str(argv[0]))
        if name == "scancel" or (name == "scontrol" and str(argv[1]) in MUTATING):
            count["cmd"] += 1
            if fault.endswith("after-command") and count["cmd"] == target:
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

    result = reconcile_pass(policy=Fixed(Action(**json.loads(action_json))),
                            snapshot=lambda: live.snapshot(cfg), readings=Readings,
                            actuator=live.SlurmActuator(cfg), state_dir=Path(state_dir))
    print(json.dumps({**result.as_dict(), "mutating_commands": count["cmd"],
                      "journal_lines": count["line"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
