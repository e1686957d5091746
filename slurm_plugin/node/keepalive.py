"""A minimal service supervisor: run a command, start it again whenever it exits.

The local cluster runs its collector under it (``python -m slurm_plugin.node.keepalive --log F
--restart-delay-s S -- wattctl collect ...``); a site runs the collector under systemd
(``contrib/systemd/wattbatch-collector.service``, ``Restart=always``), which does the same.
SIGTERM stops the command and then the supervisor. Each restart is logged with the exit status.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Callable

from .. import proc


def supervise(argv: list[str], log_path: str, restart_delay_s: float,
              should_stop: Callable[[], bool], *, max_starts: int | None = None) -> int:
    """Start ``argv`` and start it again ``restart_delay_s`` after each exit, until
    ``should_stop()``; returns how many times it was started."""
    starts = 0
    while not should_stop() and (max_starts is None or starts < max_starts):
        child = proc.start(argv, log_path=log_path)
        starts += 1
        while child.poll() is None:
            if should_stop():
                proc.stop(child)
                return starts
            time.sleep(0.2)
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"wattbatch keepalive: {argv[0]} exited with status {child.returncode}; "
                      f"starting it again in {restart_delay_s:g} s\n")
        deadline = time.monotonic() + restart_delay_s
        while time.monotonic() < deadline and not should_stop():
            time.sleep(0.1)
    return starts


def main(args: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slurm_plugin.node.keepalive")
    parser.add_argument("--log", required=True, help="file that gets the command's output")
    parser.add_argument("--restart-delay-s", type=float, default=2.0)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    ns = parser.parse_args(args)
    argv = ns.command[1:] if ns.command[:1] == ["--"] else ns.command
    if not argv:
        parser.error("no command given after --")
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__("now", True))
    signal.signal(signal.SIGINT, lambda *_: stop.__setitem__("now", True))
    supervise(argv, ns.log, ns.restart_delay_s, lambda: stop["now"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
