"""What-if replay of the local cluster's own history: a small workload, `wattctl history export`
(the installed command, real sacct), then `wattctl simulate --from-sacct` through two policies.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from slurm_plugin import proc
from slurm_plugin.slurm import actions
from slurm_plugin.slurm.cli import slurm
from slurm_plugin.sim.trace_sacct import FIELDS

pytestmark = pytest.mark.cluster


def _wattctl(localcluster, *args: str) -> proc.Completed:
    """The installed command, beside this interpreter (a new process, as an admin runs it)."""
    return proc.run([str(Path(sys.executable).with_name("wattctl")), *args],
                    env=localcluster.env, timeout_s=120)


def test_export_and_replay_the_clusters_own_history(localcluster, tmp_path):
    cfg = localcluster.config()
    time.sleep(1.1)       # jobs the fixture cancelled ended before this second
    since = datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    opts = ["--output=/dev/null", f"--chdir={tmp_path}"]
    ids = {
        "bar": actions.submit([*opts, "-J", "train|v2", "--comment=app=lstm|seed 1", "-G", "1",
                               "-t", "5", "--wrap", "sleep 2"], None, cfg),
        "two": actions.submit([*opts, "-J", "two", "--gres=gpu:2", "-t", "5", "--wrap",
                               "sleep 2"], None, cfg),
        "shard": actions.submit([*opts, "-J", "shard", "--gres=shard:2", "-t", "5", "--wrap",
                                 "sleep 2"], None, cfg),
        "cpu": actions.submit([*opts, "-J", "cpu", "-t", "5", "--wrap", "sleep 1"], None, cfg),
        "running": actions.submit([*opts, "-J", "running", "-G", "1", "-t", "10", "--wrap",
                                   "sleep 600"], None, cfg),
        "waiting": actions.submit([*opts, "-J", "waiting", "-G", "1", "--begin=now+1hour",
                                   "--wrap", "sleep 1"], None, cfg),
        "killed": actions.submit([*opts, "-J", "killed", "-G", "1", "-t", "10", "--wrap",
                                  "sleep 600"], None, cfg),
    }
    ended = {ids[k] for k in ("bar", "two", "shard", "cpu")}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:     # (no JobName here: it holds a '|')
        state = dict(ln.split("|", 1) for ln in slurm(
            "sacct", ["-X", "-P", "-n", "-o", "JobIDRaw,State", "-j", ",".join(ids.values())],
            cfg).stdout.split())
        if all(state.get(i) == "COMPLETED" for i in ended) and \
                state.get(ids["killed"]) == "RUNNING":
            break
        time.sleep(0.5)
    time.sleep(1)         # the killed job has run a few seconds
    actions.cancel(ids["killed"], cfg)
    actions.cancel(ids["waiting"], cfg)
    time.sleep(2)

    out = tmp_path / "history.txt"
    _wattctl(localcluster, "history", "export", "--since", since, "--until", "now+2hours",
             "-o", str(out))
    lines = out.read_text().splitlines()
    assert lines[0] == "|".join(FIELDS)
    assert {ln.split("|", 1)[0] for ln in lines[1:]} == set(ids.values())
    assert any("|train|v2|" in ln and ln.endswith("|app=lstm|seed 1") for ln in lines)

    done = _wattctl(localcluster, "simulate", "--from-sacct", str(out), "--compare",
                    "slurm-default,eaco", "--nodes", "4", "--gpus-per-node", "4", "--json")
    results = json.loads(done.stdout)
    assert [r["policy"] for r in results] == ["slurm-default", "eaco"]
    summary = results[0]["sacct"]
    assert summary["rows"] == 7 and summary["replayed"] == 4 and summary["from_shards"] == 1
    assert summary["rows_with_bar"] == 1
    assert summary["skipped"] == {"no_gpus": 1, "still_running": 1, "pending": 0,
                               "cancelled_before_start": 1,
                                  "never_started": 0, "zero_runtime": 0}
    assert summary["skipped_job_ids"]["cancelled_before_start"] == [ids["waiting"]]
    assert summary["skipped_job_ids"]["still_running"] == [ids["running"]]
    assert all(r["jobs"] == 4 and r["jobs_finished"] == 4 for r in results)

    table = _wattctl(localcluster, "simulate", "--from-sacct", str(out), "--policy",
                     "slurm-default", "--nodes", "4", "--gpus-per-node", "4").stdout
    assert "7 jobs, 4 GPU jobs replayed" in table and "1 cancelled before start" in table
