"""Bad input on the real cluster: names and comments holding sacct's "|", a damaged journal,
telemetry out of bounds. ``wattctl reconcile`` warns and exits 0, never a traceback."""

from __future__ import annotations

import json
import math
import sys
import time

import pytest

from slurm_plugin.proc import run
from slurm_plugin.slurm import actions
from slurm_plugin.slurm.snapshot import history
from slurm_plugin.telemetry.influx import InfluxClient
from slurm_plugin.telemetry.lineproto import Point
from slurm_plugin.telemetry.readers import read_readings

pytestmark = pytest.mark.cluster


def test_sacct_rows_with_the_delimiter_in_name_and_comment(localcluster, tmp_path):
    cfg = localcluster.config()
    job_id = actions.submit(["--output=/dev/null", f"--chdir={tmp_path}", "-J", "a|b",
                             "--comment=note x|y;app=bert"], "#!/bin/bash\ntrue\n", cfg)
    deadline = time.monotonic() + 30          # the comment reaches sacct when the job ends
    while not (found := [r for r in history(cfg, since="now-1hours")
                         if r.job_id == job_id and r.state == "COMPLETED"]):
        assert time.monotonic() < deadline, "sacct never showed the job"
        time.sleep(1)
    assert found[0].name == "a|b" and found[0].comment == "note x|y;app=bert"


def test_reconcile_warns_on_a_damaged_journal_and_bad_telemetry(localcluster, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "journal.jsonl").write_bytes(b'{"action_id": "\xff\xfe", "event": "begin"}\n')
    client = InfluxClient.from_config(localcluster.config())
    now = time.time()
    client.write([Point("job_progress", {"job_id": "999999"},
                        {"step": 5, "samples_per_s": 1e12}, now),
                  Point("gpu", {"cluster": localcluster.config()["cluster.name"],
                                "node": "gpu4", "gpu": "3"},
                        {"power_w": -40.0, "energy_j": 1.0, "util_pct": 10.0,
                         "mem_used_mib": 1.0, "power_limit_w": 300.0}, now + 5)])
    reads = read_readings(client, now + 6, job_ids=["999999"],
                          cluster=localcluster.config()["cluster.name"])
    assert "999999" not in reads.progress and ("gpu4", 3) not in reads.gpus
    assert any("samples_per_s = 1000000000000" in w for w in reads.warnings)
    assert any("power_w = -40" in w for w in reads.warnings)
    assert not any(math.isnan(r.power_w) for r in reads.gpus.values())

    env = {**localcluster.env, "WATTBATCH_RECONCILE_STATE_DIR": str(state)}
    done = run([sys.executable, "-m", "slurm_plugin.cli", "reconcile", "--json"], env=env,
               timeout_s=60)
    out = json.loads(done.stdout)
    assert out["ran"] and "Traceback" not in done.stderr
    assert any("line 1 skipped" in w and "UnicodeDecodeError" in w for w in out["warnings"])


def test_an_elastic_range_the_cluster_cannot_hold_is_refused_before_submission(localcluster):
    env = {**localcluster.env, "WATTBATCH_SERVER": "0"}
    argv = [sys.executable, "-m", "wrapper.cli", "--wb-policy=elastic", "--gres=gpu:1", "-t", "1",
            "--output=/dev/null", "--wrap=true"]
    done = run([*argv, "--wb-elastic=1-999"], env=env, check=False, timeout_s=60)
    assert done.returncode == 255 and "the cluster has 16 GPUs" in done.stderr, done.stderr
    assert done.stdout == ""                                 # nothing submitted
    for bad in ("4-2", "0-2"):
        done = run([*argv, f"--wb-elastic={bad}"], env=env, check=False, timeout_s=60)
        assert done.returncode == 255 and "1 <= MIN <= MAX" in done.stderr, done.stderr
    # from the environment: one warning, the job goes in unchanged
    done = run(argv, env={**env, "WATTBATCH_ELASTIC": "1-999"}, check=False, timeout_s=60)
    assert done.returncode == 0 and "Submitted batch job" in done.stdout
    assert "warning: $WATTBATCH_ELASTIC: --wb-elastic=1-999" in done.stderr, done.stderr
