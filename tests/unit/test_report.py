"""wattctl report's pure parts: Slurm times, job_energy rows, the aggregation and its
exclusive-GPU counterfactual, per-day split, the table, the plot's missing-matplotlib error."""

from __future__ import annotations

import builtins
import os
import time

import pytest

from click.testing import CliRunner

from slurm_plugin.cli import group as wattctl
from slurm_plugin.commands.report import table
from slurm_plugin.errors import InputError, TelemetryError
from slurm_plugin.physics import group_slowdowns, job_class
from slurm_plugin.report.aggregate import co_runners, counterfactual, report
from slurm_plugin.report.daily import DAY_S, per_day
from slurm_plugin.report.period import parse_time_s
from slurm_plugin.report.records import EnergyRecord, record_from_row

NOW = 1_795_400_000.0      # 2026-11-22T22:13:20 UTC


@pytest.fixture()
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def rec(job_id="1", node="gpu1", end_s=NOW, energy_j=3.6e6, duration_s=3600.0, gpus=1,
        shared=0.0, co2_g=None, app="", **tags) -> EnergyRecord:
    return EnergyRecord(job_id=job_id, node=node, end_s=end_s, energy_j=energy_j,
                        duration_s=duration_s, gpus=gpus, gpu_s=gpus * duration_s,
                        shared_gpu_s=shared, co2_g=co2_g, app=app, **tags)


# --- period ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text,want", [
    ("now", NOW), ("now-1days", NOW - 86400), ("now-3hours", NOW - 3 * 3600),
    ("now+2weeks", NOW + 14 * 86400), ("now-90", NOW - 90),
    ("2026-11-01", 1_793_491_200.0), ("2026-11-01T10:00", 1_793_491_200.0 + 36000),
    ("2026-11-01T10:00:30", 1_793_491_200.0 + 36030), ("today", 1_795_392_000.0),
    ("midnight", 1_795_392_000.0), ("noon", 1_795_392_000.0 + 43200),
    ("10:30", 1_795_392_000.0 + 37800), ("110126", 1_793_491_200.0), ("11/01/26", 1_793_491_200.0),
    ("11.01", 1_793_491_200.0),
])
def test_slurm_times(text, want, utc):
    assert parse_time_s(text, NOW) == want


@pytest.mark.parametrize("text", ["yesterday", "now-1fortnight", "2026-13-01", "13/01", "", "-1"])
def test_bad_time_names_option_and_forms(text, utc):
    with pytest.raises(InputError, match=r"report: --until = .*not a Slurm time; use one of now-1days"):
        parse_time_s(text, NOW, "--until")


# --- records --------------------------------------------------------------------------------

def test_row_of_the_contract_and_of_the_first_epilog():
    full = record_from_row({"time": NOW, "job_id": "7", "user": "u", "account": "a",
                            "partition": "p", "cluster": "c", "node": "n", "app": "LSTM",
                            "energy_j": 10.0, "co2_g": 1.0, "duration_s": 5.0, "gpus": 2,
                            "gpu_s": 10.0, "shared_gpu_s": 4.0, "idle_j": 2.0, "split": "util"})
    assert (full.app, full.gpu_s, full.shared_gpu_s, full.split, full.start_s) == \
        ("lstm", 10.0, 4.0, "util", NOW - 5)
    old = record_from_row({"time": NOW, "job_id": "8", "node": "n", "energy_j": 10.0,
                           "duration_s": 5.0, "gpus": 2, "co2_g": None})
    assert (old.gpu_s, old.shared_gpu_s, old.co2_g, old.account) == (10.0, 0.0, None, "")


def test_bad_rows_are_errors_that_name_the_record():
    with pytest.raises(InputError, match="job_id='9' node='n'.*needs job_id, energy_j"):
        record_from_row({"time": NOW, "job_id": "9", "node": "n", "energy_j": 1.0})
    with pytest.raises(InputError, match="field energy_j = 'x': expected a number"):
        record_from_row({"time": NOW, "job_id": "9", "energy_j": "x", "duration_s": 1.0})


# --- counterfactual -------------------------------------------------------------------------

def test_exclusive_job_keeps_its_measured_energy():
    r = rec(energy_j=5e5, co2_g=30.0, app="lstm")
    cf = counterfactual(r, [], "vgg16")
    assert (cf.energy_j, cf.co2_g, cf.slowdown) == (5e5, 30.0, 1.0)


def test_shared_job_alone_runs_faster_at_its_class_power():
    a = rec("1", shared=3600.0, energy_j=2e5, co2_g=10.0, app="lstm")
    b = rec("2", shared=3600.0, energy_j=1e5, app="vgg16")
    slow = group_slowdowns(["lstm", "vgg16"])[0]
    assert slow > 1.0
    cf = counterfactual(a, [b], "resnet18")
    assert cf.slowdown == pytest.approx(slow)
    assert cf.energy_j == pytest.approx(job_class("lstm").power_at(1) * 3600 / slow)
    assert cf.co2_g == pytest.approx(10.0 / 2e5 * cf.energy_j)
    # half the time shared: the other half keeps its measured energy
    half = rec("1", shared=1800.0, energy_j=2e5, app="lstm")
    assert counterfactual(half, [b], "resnet18").energy_j == pytest.approx(
        1e5 + job_class("lstm").power_at(1) * 1800 / slow)
    # no app: the default class; no co-runner found: no speed-up claimed
    lone = counterfactual(rec("3", shared=3600.0), [], "aps")
    assert (lone.app, lone.slowdown) == ("aps", 1.0)
    assert lone.energy_j == pytest.approx(job_class("aps").power_at(1) * 3600)


def test_co_runners_same_node_overlapping_and_shared_only():
    rs = [rec("1", shared=10.0), rec("2", shared=10.0), rec("3", shared=0.0),
          rec("4", node="gpu2", shared=10.0), rec("5", end_s=NOW - 7200, shared=10.0),
          rec("1", node="gpu1", shared=10.0, cluster="other")]
    peers = co_runners(rs)
    assert peers[0] == [1] and peers[1] == [0] and 2 not in peers
    assert peers[3] == [] and peers[4] == [] and peers[5] == []


def test_co_runners_share_a_gpu_where_the_records_say_which():
    """Two pairs of jobs on one node, each pair on its own GPU: each job's co-runner is its
    GPU's partner only (the counterfactual claims one partner's slowdown, not three); a record
    from an older epilog, with no GPUs named, still counts every shared record of its node."""
    rs = [rec("1", shared=10.0, gpu_indexes=(0,)), rec("2", shared=10.0, gpu_indexes=(0,)),
          rec("3", shared=10.0, gpu_indexes=(1,)), rec("4", shared=10.0, gpu_indexes=(1, 2)),
          rec("5", shared=10.0)]
    peers = co_runners(rs)
    assert peers == {0: [1, 4], 1: [0, 4], 2: [3, 4], 3: [2, 4], 4: [0, 1, 2, 3]}
    one = counterfactual(rs[0], [rs[1]], "lstm")
    three = counterfactual(rs[0], [rs[1], rs[2], rs[3]], "lstm")
    assert 1.0 < one.slowdown < three.slowdown


def test_gpu_indexes_read_from_the_record_and_malformed_ones_ignored():
    row = {"time": NOW, "job_id": "7", "node": "n", "energy_j": 1.0, "duration_s": 1.0}
    assert record_from_row({**row, "gpu_indexes": "2,0"}).gpu_indexes == (0, 2)
    for bad in (None, "", "a,1", "1,,2", 3, "1;2"):
        assert record_from_row({**row, "gpu_indexes": bad}).gpu_indexes is None


def test_report_groups_and_totals():
    rs = [rec("1", energy_j=3.6e6, co2_g=100.0, user="ann", account="x"),
          rec("1", node="gpu2", energy_j=3.6e6, co2_g=100.0, user="ann", account="x"),
          rec("2", energy_j=7.2e6, shared=3600.0, user="bo", account="y", app="resnet18"),
          rec("3", energy_j=1.8e6, shared=3600.0, user="bo", account="x", app="lstm")]
    out = report(rs, "user")
    first = out["rows"][0]                 # the largest energy first
    assert (first["key"], first["jobs"], first["records"], first["energy_kwh"]) == \
        ("bo", 2, 2, 2.5)
    by = {r["key"]: r for r in out["rows"]}
    assert by["ann"]["jobs"] == 1 and by["ann"]["energy_kwh"] == 2.0
    assert by["ann"]["co2_kg"] == pytest.approx(0.2) and by["ann"]["saved_kwh"] == 0.0
    assert by["bo"]["shared_pct"] == 100.0 and by["bo"]["co2_kg"] is None
    assert by["bo"]["co2_missing_records"] == 2
    t = out["total"]
    assert (t["jobs"], t["records"], t["energy_kwh"], t["gpu_hours"]) == (3, 4, 4.5, 4.0)
    assert t["shared_pct"] == 50.0
    assert t["saved_kwh"] == pytest.approx(t["exclusive_kwh"] - 4.5)
    assert [r["key"] for r in report(rs, "account")["rows"]] == ["x", "y"]
    assert [r["key"] for r in report(rs, "job")["rows"]] == ["1", "2", "3"]   # ties by key
    with pytest.raises(InputError, match="not a known job class"):
        report(rs, "user", default_app="nope")
    two = [rec("1", cluster="a"), rec("1", cluster="b")]
    assert [r["key"] for r in report(two, "job")["rows"]] == ["a/1", "b/1"]


# --- per day, table, plot -------------------------------------------------------------------

def test_per_day_splits_a_job_over_midnight_and_keeps_the_totals():
    midnight = NOW - NOW % DAY_S
    rs = [rec("1", end_s=midnight + 3600, duration_s=4 * 3600, energy_j=4 * 3.6e6,
              co2_g=400.0, account="x"),
          rec("2", end_s=midnight + 7200, energy_j=3.6e6, account="y"),
          rec("3", end_s=midnight + 60, duration_s=0.0, energy_j=3.6e6, account="y")]
    d = per_day(rs, midnight - 3600, midnight + 86000)
    assert d["days"] == [midnight - DAY_S, midnight]
    assert d["energy_kwh"]["x"] == pytest.approx([3.0, 1.0])
    assert d["co2_kg"]["x"] == pytest.approx([0.3, 0.1])
    assert d["energy_kwh"]["y"] == pytest.approx([0.0, 2.0]) and d["accounts"] == ["x", "y"]
    # a job that started before --since is shown whole: its first day is added
    assert per_day(rs, midnight, midnight + 86000)["days"][0] == midnight - DAY_S


def test_table_has_a_row_per_group_and_a_total():
    out = report([rec("1", user="ann", co2_g=5.0), rec("2", user="bo")], "user")
    text = table(out).splitlines()
    assert text[0].split()[:4] == ["user", "jobs", "kWh", "kgCO2"]
    assert [ln.split()[0] for ln in text if not ln.startswith("-")][1:] == ["ann", "bo", "total"]
    assert text[-1].split()[1:3] == ["2", "2.000"]
    assert text[3].split()[3] == "-"       # bo has no co2_g
    small = table(report([rec("1", energy_j=4932.0)], "job")).splitlines()
    assert small[2].split()[2] == "0.00137"     # a short test job's kWh stays readable


def test_plot_without_matplotlib_says_how_to_get_it(monkeypatch):
    from slurm_plugin.report import plot
    real = builtins.__import__

    def no_mpl(name, *a, **kw):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *a, **kw)
    monkeypatch.setattr(builtins, "__import__", no_mpl)
    with pytest.raises(InputError, match=r"--plot needs matplotlib.*wattbatch\[plot\]"):
        plot._pyplot()


def test_command_with_influxdb_down_names_it(monkeypatch):
    monkeypatch.setenv("WATTBATCH_SITE_CONFIG", os.devnull)
    monkeypatch.setenv("WATTBATCH_INFLUX_URL", "http://127.0.0.1:9")
    with pytest.raises(TelemetryError, match=r"influx: GET http://127\.0\.0\.1:9/query.*check "
                                             "that InfluxDB runs there"):
        CliRunner().invoke(wattctl, ["report", "--since", "now-1days"], catch_exceptions=False)
    r = CliRunner().invoke(wattctl, ["report", "--since", "now", "--until", "now-1days"])
    assert isinstance(r.exception, InputError) and "is not before --until" in str(r.exception)


def test_by_run_splits_a_resized_job_into_its_runs():
    first = rec("9", end_s=NOW - 600, duration_s=300.0, gpus=1)
    second = [rec("9", node=n, end_s=NOW, duration_s=500.0, gpus=2) for n in ("gpu1", "gpu2")]
    rows = {r["key"]: r for r in report([first, *second], "run")["rows"]}
    assert len(rows) == 2 and all(k.startswith("9@") for k in rows)
    assert sorted(r["gpu_hours"] * 3600 for r in rows.values()) == [300.0, 2000.0]
    assert [r["key"] for r in report([first, *second], "job")["rows"]] == ["9"]


def test_an_app_that_is_no_known_class_is_counted_as_the_default_app():
    # a researcher may declare any app name; one such job must not fail the admin's report
    odd = rec("7", shared=3600.0, energy_j=2e5, app="resnet50-custom")
    peer = rec("8", shared=3600.0, energy_j=1e5, app="no-such-app")
    cf = counterfactual(odd, [peer], "lstm")
    assert cf.app == "lstm"
    assert cf.slowdown == pytest.approx(group_slowdowns(["lstm", "lstm"])[0])
    out = report([odd, peer], "job", default_app="lstm")
    assert {r["key"] for r in out["rows"]} == {"7", "8"}
