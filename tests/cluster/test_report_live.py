"""`wattctl report` (the installed command) on job_energy and carbon_intensity points written
to the local cluster's real InfluxDB (tests/cluster/energy_data.py), and on the points the
epilog wrote for a job array's tasks (named as sacct names them)."""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from energy_data import stored as stored_data
from slurm_plugin import proc
from slurm_plugin.localcluster.energy_check import wait_records
from slurm_plugin.slurm import actions
from slurm_plugin.slurm.cli import slurm

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def stored(localcluster):
    with stored_data(localcluster, "wb_test_report") as got:
        yield got


def _report(localcluster, db: str, *args: str, check: bool = True) -> proc.Completed:
    env = {**localcluster.env, "WATTBATCH_INFLUX_DATABASE": db}
    return proc.run([str(Path(sys.executable).with_name("wattctl")), "report", *args], env=env,
                    timeout_s=120, check=check)


def test_report_by_account_sums_the_records(localcluster, stored):
    db, data = stored
    out = json.loads(_report(localcluster, db, "--by", "account", "--since", "now-4days",
                             "--json").stdout)
    want = defaultdict(lambda: defaultdict(float))
    for records in data.jobs.values():
        for r in records:
            w = want[r["account"]]
            w["energy_kwh"] += r["energy_j"] / 3.6e6
            w["gpu_hours"] += r["gpu_s"] / 3600
            w["shared"] += r["shared_gpu_s"]
            w["gpu_s"] += r["gpu_s"]
    rows = {r["key"]: r for r in out["rows"]}
    assert set(rows) == set(want)
    for account, w in want.items():
        assert rows[account]["energy_kwh"] == pytest.approx(w["energy_kwh"])
        assert rows[account]["gpu_hours"] == pytest.approx(w["gpu_hours"])
        assert rows[account]["shared_pct"] == pytest.approx(100 * w["shared"] / w["gpu_s"])
    t = out["total"]
    assert t["jobs"] == len(data.jobs) and t["records"] == sum(map(len, data.jobs.values()))
    assert t["co2_missing_records"] == 1
    # the shared jobs would have used more alone: sharing saved energy, exclusive jobs nothing
    assert t["saved_kwh"] > 0 and rows["cs"]["shared_pct"] == 0 and rows["cs"]["saved_kwh"] == 0


def test_period_and_grouping(localcluster, stored):
    db, data = stored
    by_job = json.loads(_report(localcluster, db, "--by", "job", "--since", "now-4days",
                                "--json").stdout)
    assert {r["key"] for r in by_job["rows"]} == set(data.jobs)
    two_node = [r for r in by_job["rows"] if r["records"] == 2]
    assert len(two_node) == 1 and two_node[0]["gpu_hours"] == pytest.approx(8.0)
    # only the last day: the jobs that ended in it
    since = data.end_s - 86400
    last_day = {j for j, rs in data.jobs.items() if rs[0]["time"] >= since}
    day = json.loads(_report(localcluster, db, "--by", "job", "--since",
                             time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since)),
                             "--json").stdout)
    assert {r["key"] for r in day["rows"]} == last_day and 0 < len(last_day) < len(data.jobs)
    bad = _report(localcluster, db, "--since", "last tuesday", check=False)
    assert bad.returncode == 2 and "--since = 'last tuesday': not a Slurm time" in bad.stderr


def test_table_and_plot(localcluster, stored, tmp_path):
    db, _ = stored
    png = tmp_path / "report.png"
    done = _report(localcluster, db, "--by", "user", "--since", "now-4days", "--plot", str(png))
    lines = done.stdout.splitlines()
    assert lines[1].split()[:3] == ["user", "jobs", "kWh"]
    assert any(ln.startswith("total") for ln in lines) and "sharing saved" in done.stdout
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    assert width > 800 and height > 500


def _array_tasks(cfg, array_id: str) -> dict[str, tuple[str, str]]:
    """``sacct``'s rows of a job array: JobID (``A_T``) -> (JobIDRaw, State)."""
    out = slurm("sacct", ["-X", "-P", "-n", "-o", "JobID,JobIDRaw,State", "-j", array_id],
                cfg).stdout
    rows = (ln.split("|") for ln in out.splitlines() if ln.count("|") == 2)
    return {job: (raw, state.split()[0] if state else "") for job, raw, state in rows}


def test_array_tasks_are_named_as_sacct_names_them(localcluster):
    cfg = localcluster.config()
    array_id = actions.submit(["-J", "report-array", "--array=1-3", "--gres=gpu:1", "-t", "5",
                               "-o", "/dev/null", "--wrap", "sleep 15"], None, cfg)
    names = {f"{array_id}_{t}" for t in (1, 2, 3)}
    deadline = time.monotonic() + 180
    while True:
        tasks = _array_tasks(cfg, array_id)
        if set(tasks) == names and all(s == "COMPLETED" for _, s in tasks.values()):
            break
        assert time.monotonic() < deadline, f"array {array_id} not done: {tasks}"
        time.sleep(1.0)
    raw = {name: tasks[name][0] for name in names}
    assert len(set(raw.values())) == 3 and array_id in raw.values()   # one task has the array's id
    records = wait_records(cfg, sorted(raw.values()), timeout_s=120)
    assert set(records) == set(raw.values()), records
    out = json.loads(_report(localcluster, localcluster.influx_database, "--by", "job",
                             "--since", "now-1hours", "--json").stdout)
    rows = {r["key"]: r for r in out["rows"] if r["job_id"] in raw.values()}
    assert set(rows) == names, out["rows"]
    for name, row in rows.items():
        assert (row["job_id"], row["array_task"]) == (raw[name], name)
        assert row["jobs"] == 1 and row["energy_kwh"] > 0
