"""The local cluster's collector runs under keepalive: killed, it is started again and GPU
readings keep coming."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from slurm_plugin.localcluster import procs
from slurm_plugin.telemetry.influx import InfluxClient
from slurm_plugin.telemetry.readers import latest_gpu_readings

pytestmark = pytest.mark.cluster


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def test_killed_collector_is_started_again(localcluster):
    supervisor = procs.running_pid(localcluster.spec.pid_file("collector"), "python")
    assert supervisor, "no collector supervisor"
    first, = _children(supervisor)
    os.kill(first, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while not [c for c in _children(supervisor) if c != first]:
        assert time.monotonic() < deadline, "collector not started again"
        time.sleep(0.2)
    client = InfluxClient.from_config(localcluster.config())
    since = time.time()
    while not [r for r in latest_gpu_readings(client, time.time()).values() if r.taken_s > since]:
        assert time.monotonic() < deadline + 20, "no GPU reading after the restart"
        time.sleep(1)
    assert "exited with status -9" in localcluster.spec.log_file("collector").read_text()
