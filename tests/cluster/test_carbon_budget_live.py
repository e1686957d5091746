"""``wattctl carbon budget --json`` against the local cluster's real InfluxDB holding known
accounting data (tests/cluster/energy_data.py: job_energy records of 30 jobs over three days,
three accounts, reconcile actions): what it says was spent is the sum of the records' carbon
in the budget period, per account and in total, and it lists the jobs reconcile deferred."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from energy_data import stored as stored_data

from slurm_plugin import proc

pytestmark = pytest.mark.cluster


@pytest.fixture()
def stored(localcluster):
    with stored_data(localcluster, "wb_test_budget") as got:
        yield got


def test_spent_is_the_sum_of_job_carbon_in_the_period(localcluster, stored, tmp_path):
    db, data = stored
    env = {**localcluster.env, "WATTBATCH_INFLUX_DATABASE": db,
           "WATTBATCH_GREENFLOW_BUDGET_KG_PER_WEEK": "50",
           "WATTBATCH_GREENFLOW_ACCOUNTS": "physics=20,nobody=1",
           "WATTBATCH_RECONCILE_STATE_DIR": str(tmp_path)}     # no greenflow pass yet
    wattctl = str(Path(sys.executable).with_name("wattctl"))
    report = json.loads(proc.run([wattctl, "carbon", "budget", "--json"], env=env,
                                 timeout_s=60).stdout)
    assert report["pacing"] is None and any("no greenflow pass" in w
                                            for w in report["warnings"])
    start_s, now_s = report["period"]["start_s"], report["now_s"]
    assert report["budget_kg"] == 50.0 and report["period"]["end_s"] - start_s == 7 * 86400
    want: dict[str, float] = {}
    for records in data.jobs.values():
        for r in records:
            if start_s < r["time"] <= now_s and "co2_g" in r:
                want[r["account"]] = want.get(r["account"], 0.0) + r["co2_g"]
    assert report["spent_kg"] == pytest.approx(sum(want.values()) / 1000, abs=1e-6)
    got = {a["account"]: a["spent_kg"] for a in report["accounts"] if a["spent_kg"]}
    assert got == pytest.approx({a: g / 1000 for a, g in want.items()}, abs=1e-6)
    budgets = {a["account"]: a["budget_kg"] for a in report["accounts"]}
    assert budgets["physics"] == 20.0 and budgets["nobody"] == 1.0   # from the site config
    deferred = {a["job_id"] for a in data.actions
                if a["kind"] == "defer" and start_s < a["time"] <= now_s}
    assert {m["job_id"] for m in report["deferred"]} == deferred
    assert report["capped"] == [] and report["forecast_kg"] >= report["spent_kg"]

    # the reconciler's history holds greenflow's last pass in this period: shown as pacing
    (tmp_path / "history.json").write_text(json.dumps({
        "greenflow.last_s": {"value": now_s - 60, "n": 1},
        "greenflow.period_start_s": {"value": start_s, "n": 1},
        "greenflow.owed_g": {"value": 12_345.0, "n": 1},
        "greenflow.weight": {"value": 0.8, "n": 1},
        "greenflow.weight@physics": {"value": 1.0, "n": 1},
        "greenflow.limit_use": {"value": 0.25, "n": 1},
        "greenflow.floor_g": {"value": 900.0, "n": 1}}))
    report = json.loads(proc.run([wattctl, "carbon", "budget", "--json"], env=env,
                                 timeout_s=60).stdout)
    assert report["pacing"] == {"at_s": now_s - 60, "owed_kg": 12.345, "limit_use": 0.25,
                                "floor_kg": 0.9, "weight": 0.8,
                                "accounts": {"nobody": None, "physics": 1.0}}
    text = proc.run([wattctl, "carbon", "budget"], env=env, timeout_s=60).stdout
    assert "12.345 kg owed by queued and running jobs" in text and "weight 0.80" in text
    assert "25% of their time limits, as jobs use them" in text
    assert "account physics: spent" in text and "carbon weight 1.00" in text


def test_greenflows_first_pass_paces_from_what_jobs_spent_in_the_period(localcluster, stored,
                                                                        tmp_path):
    """A reconciler with a fresh state directory in the middle of a budget period: greenflow's
    first pass starts the period's spend, the cluster's and each account's, from the
    ``job_energy`` records ``wattctl carbon budget`` counts, not from 0."""
    from slurm_plugin.policy.greenflow.observe import FLOOR_G, SPENT_G, WEIGHT, account_spent_key
    db, _ = stored
    env = {**localcluster.env, "WATTBATCH_INFLUX_DATABASE": db,
           "WATTBATCH_GREENFLOW_BUDGET_KG_PER_WEEK": "0.001",
           "WATTBATCH_GREENFLOW_ACCOUNTS": "physics=20,nobody=1",
           "WATTBATCH_RECONCILE_STATE_DIR": str(tmp_path)}
    wattctl = str(Path(sys.executable).with_name("wattctl"))
    report = json.loads(proc.run([wattctl, "carbon", "budget", "--json"], env=env,
                                 timeout_s=60).stdout)
    assert report["spent_kg"] > 0.001            # the week's records are over the tiny budget
    proc.run([wattctl, "reconcile", "--policy", "greenflow", "--json"], env=env, timeout_s=120)
    hist = {k: v["value"] for k, v in json.loads((tmp_path / "history.json").read_text()).items()}
    assert hist[SPENT_G] == pytest.approx(report["spent_kg"] * 1000, abs=1e-3)
    spent = {a["account"]: a["spent_kg"] for a in report["accounts"]}
    assert hist[account_spent_key("physics")] == pytest.approx(spent["physics"] * 1000, abs=1e-3)
    assert hist[WEIGHT] == 1.0                   # overspent: carbon is all that counts
    # the budget is below what any schedule can reach: said at once, beside the floor
    assert hist[FLOOR_G] >= hist[SPENT_G]
    said = proc.run([wattctl, "carbon", "budget"], env=env, timeout_s=60)
    assert f"floor {hist[FLOOR_G] / 1000:,.3f} kg" in said.stdout
    assert "is below the floor: it cannot be kept" in said.stderr
