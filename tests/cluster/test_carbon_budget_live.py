"""``wattctl carbon budget --json`` on the local cluster: what it says jobs spent is the sum of
their ``job_energy`` carbon in InfluxDB (the epilog's points), per account and in total."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from slurm_plugin.localcluster.energy_check import submit_group, wait_records
from slurm_plugin.proc import run
from slurm_plugin.telemetry.influx import InfluxClient
from slurm_plugin.telemetry.lineproto import time_ns

pytestmark = pytest.mark.cluster


def test_spent_is_the_sum_of_job_carbon(localcluster):
    cfg = localcluster.config()
    jobs = submit_group(cfg, ["vgg16", "lstm"], "gpu3", "g2", 8)
    assert set(wait_records(cfg, jobs, timeout_s=120)) == set(jobs)
    env = dict(localcluster.env, WATTBATCH_GREENFLOW_BUDGET_KG_PER_DAY="5")
    wattctl = str(Path(sys.executable).with_name("wattctl"))
    report = json.loads(run([wattctl, "carbon", "budget", "--json"], env=env).stdout)
    start_s = report["period"]["start_s"]
    assert report["budget_kg"] == 5.0 and report["warnings"] == []
    rows = InfluxClient.from_config(cfg).query(
        f'SELECT "co2_g", "account" FROM "job_energy" WHERE time > {time_ns(start_s)} '
        f'AND time <= {time_ns(report["now_s"])}')
    per_account: dict[str, float] = {}
    for s in rows:
        for r in s.rows():
            per_account[r["account"]] = per_account.get(r["account"], 0.0) + r["co2_g"]
    assert per_account and report["spent_kg"] == pytest.approx(
        sum(per_account.values()) / 1000, rel=1e-6, abs=1e-6)
    assert {a["account"]: a["spent_kg"] for a in report["accounts"]} == pytest.approx(
        {a: g / 1000 for a, g in per_account.items()}, rel=1e-6, abs=1e-6)
    assert report["forecast_kg"] >= report["spent_kg"]
    assert report["period"]["end_s"] - start_s == 86400 and start_s <= time.time()
