"""The collector's supervisor starts its command again after every exit, and stops on request."""

from __future__ import annotations

import sys
import time

from slurm_plugin.node.keepalive import supervise


def test_command_that_dies_is_started_again(tmp_path):
    log = tmp_path / "collector.log"
    starts = supervise([sys.executable, "-c", "raise SystemExit(3)"], str(log), 0.0,
                       lambda: False, max_starts=3)
    assert starts == 3
    assert log.read_text().count("exited with status 3; starting it again") == 3


def test_stop_ends_a_running_command(tmp_path):
    t0 = time.monotonic()
    starts = supervise([sys.executable, "-c", "import time; time.sleep(60)"],
                       str(tmp_path / "log"), 0.0, lambda: time.monotonic() - t0 > 1.0)
    assert starts == 1 and time.monotonic() - t0 < 15
