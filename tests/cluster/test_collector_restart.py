"""The local cluster's collector runs under keepalive: killed, it is started again and GPU
readings keep coming; ``up`` replaces a collector that another checkout left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurm_plugin.localcluster import cluster, procs, up
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


def test_up_replaces_a_collector_left_by_another_checkout(localcluster, tmp_path):
    """A cluster left up by another checkout (or a removed virtualenv) keeps that checkout's
    collector; ``up`` from this one replaces it, and leaves its own alone."""
    spec = localcluster.spec
    pid_file = spec.pid_file("collector")
    ours = procs.running_pid(pid_file, "python")
    code = str(Path(cluster.__file__).resolve().parents[2])
    assert cluster._collector_is_ours(ours, sys.executable, code), procs.cmdline(ours)
    assert "collector" not in up(spec, install=False).started
    assert procs.running_pid(pid_file, "python") == ours

    procs.stop_pid(ours)
    other = tmp_path / "python3"            # another interpreter, another checkout's code
    other.symlink_to(sys.executable)
    stray = subprocess.Popen([str(other), "-c", "import time; time.sleep(600)"],
                             env={**os.environ, "PYTHONPATH": str(tmp_path)},
                             start_new_session=True)
    try:
        pid_file.write_text(f"{stray.pid}\n")
        assert procs.running_pid(pid_file, "python") == stray.pid
        assert "collector" in up(spec, install=False).started
        assert stray.wait(timeout=20) is not None
        new = procs.running_pid(pid_file, "python")
        assert new not in (None, stray.pid)
        assert cluster._collector_is_ours(new, sys.executable, code)
    finally:
        if stray.poll() is None:
            stray.kill()
            stray.wait()
    client = InfluxClient.from_config(localcluster.config())
    since, deadline = time.time(), time.monotonic() + 30
    while not [r for r in latest_gpu_readings(client, time.time()).values() if r.taken_s > since]:
        assert time.monotonic() < deadline, "no GPU reading from the collector that replaced it"
        time.sleep(1)
