"""Job array tasks: ``wattctl report`` names a task ``A_T`` as ``sacct`` does (its records hold
the raw ``job_id`` only: Slurm gives the epilog no array ids) where it names a job (``--by
job``, ``--by run``, ``--json``, beside the raw id); ``--batches --job`` takes either form."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from slurm_plugin.cli import group as wattctl
from slurm_plugin.commands.report import table
from slurm_plugin.errors import CommandError, InputError
from slurm_plugin.report import batches
from slurm_plugin.report.aggregate import report
from slurm_plugin.report.job_names import array_names, job_selector, raw_ids, with_array_names
from slurm_plugin.report.records import EnergyRecord
from slurm_plugin.telemetry.influx import InfluxClient

NOW = 1_795_400_000.0


# --- report: the name where a job is named ----------------------------------------------------

def rec(job_id, array_task="", energy_j=3.6e6, **kw) -> EnergyRecord:
    return EnergyRecord(job_id=job_id, node=kw.pop("node", "gpu1"), end_s=kw.pop("end_s", NOW),
                        energy_j=energy_j, duration_s=3600.0, gpus=1, gpu_s=3600.0,
                        shared_gpu_s=0.0, array_task=array_task, **kw)


def test_names_of_sacct_lines_and_records_named_with_them():
    out = "14544|14543_1\n14545|14543_2\n14543|14543_6\n99|99\n98|98_[1-3]\nx|1_1\n\n|\n"
    names = array_names(out)
    assert names == {"14544": "14543_1", "14545": "14543_2", "14543": "14543_6"}
    rs = [rec("14544", cluster="c"), rec("99", cluster="c"), rec("14545", cluster="other"),
          rec("14543")]
    got = with_array_names(rs, names, "c")
    assert [(r.job_id, r.array_task, r.job_label) for r in got] == [
        ("14544", "14543_1", "14543_1"), ("99", "", "99"),
        ("14545", "", "14545"),            # another cluster's job 14545 is another job
        ("14543", "14543_6", "14543_6")]   # no cluster tag (an old epilog): this cluster's


def test_by_job_names_array_tasks_as_sacct_does_and_json_rows_keep_the_raw_id():
    rs = [rec("14544", "14543_1", energy_j=4e6), rec("14545", "14543_2", energy_j=3e6),
          rec("14543", "14543_6", energy_j=2e6), rec("99", energy_j=1e6)]
    rows = report(rs, "job")["rows"]
    assert [(r["key"], r["job_id"], r["array_task"]) for r in rows] == [
        ("14543_1", "14544", "14543_1"), ("14543_2", "14545", "14543_2"),
        ("14543_6", "14543", "14543_6"), ("99", "99", None)]
    # a multi-node task is one row; its records' name is the same
    two = report([rec("14544", "14543_1"), rec("14544", "14543_1", node="gpu2")], "job")
    assert [(r["key"], r["jobs"], r["records"]) for r in two["rows"]] == [("14543_1", 1, 2)]
    # several clusters: prefixed as raw ids are
    both = report([rec("14544", "14543_1", cluster="a"), rec("14544", cluster="b")], "job")
    assert sorted(r["key"] for r in both["rows"]) == ["a/14543_1", "b/14544"]
    # other groupings have no job fields
    assert "array_task" not in report(rs, "user")["rows"][0]
    text = table(report(rs, "job")).splitlines()
    assert [ln.split()[0] for ln in text[2:6]] == ["14543_1", "14543_2", "14543_6", "99"]


def test_by_run_labels_are_array_name_at_start():
    rows = report([rec("14544", "14543_1"), rec("99")], "run")["rows"]
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(NOW - 3600))
    assert sorted(r["key"] for r in rows) == [f"14543_1@{start}", f"99@{start}"]
    assert {r["job_id"]: r["array_task"] for r in rows} == {"14544": "14543_1", "99": None}


@pytest.fixture()
def no_site(monkeypatch, tmp_path):
    monkeypatch.setenv("WATTBATCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WATTBATCH_SITE_CONFIG", str(tmp_path / "site.toml"))
    (tmp_path / "site.toml").write_text("")
    monkeypatch.setenv("WATTBATCH_INFLUX_URL", "http://127.0.0.1:9")    # nothing listens


def test_report_by_job_names_array_tasks_from_sacct_and_keeps_the_raw_id(no_site,
                                                                            monkeypatch):
    from slurm_plugin.report import records
    rs = [rec("14544", end_s=time.time() - 60, cluster="wattbatch"),
          rec("99", end_s=time.time() - 60, cluster="wattbatch")]
    monkeypatch.setattr(records, "read_records", lambda client, since, until, cluster: rs)
    monkeypatch.setattr(records, "read_intensity", lambda client, zone, since, until: [(since, 200.0)])
    seen = _sacct(monkeypatch, lambda args: "14544|14543_1\n99|99\n")
    r = CliRunner().invoke(wattctl, ["report", "--by", "job", "--json"], catch_exceptions=False)
    out = json.loads(r.stdout)
    assert [(x["key"], x["job_id"], x["array_task"]) for x in out["rows"]] == [
        ("14543_1", "14544", "14543_1"), ("99", "99", None)]
    assert seen == [("sacct", ["-n", "-X", "-P", "-a", "-o", "JobIDRaw,JobID", "-j",
                               "14544,99"])]
    r = CliRunner().invoke(wattctl, ["report", "--by", "job"], catch_exceptions=False)
    assert "\n14543_1 " in r.stdout and "\n99 " in r.stdout and "14544" not in r.stdout
    # grouped by user: no job is named, sacct is not asked
    seen.clear()
    CliRunner().invoke(wattctl, ["report", "--by", "user"], catch_exceptions=False)
    assert seen == []


def test_without_sacct_the_report_names_raw_ids_and_says_why(no_site, monkeypatch):
    from slurm_plugin.report import records
    rs = [rec("14544", end_s=time.time() - 60, cluster="wattbatch")]
    monkeypatch.setattr(records, "read_records", lambda client, since, until, cluster: rs)
    monkeypatch.setattr(records, "read_intensity", lambda client, zone, since, until: [(since, 200.0)])

    def down(args):
        raise CommandError(["sacct", *args], 1, "sacct: error: Problem talking to the database")
    _sacct(monkeypatch, down)
    r = CliRunner().invoke(wattctl, ["report", "--by", "job", "--json"], catch_exceptions=False)
    assert [x["key"] for x in json.loads(r.stdout)["rows"]] == ["14544"]
    assert "sacct failed (sacct: error: Problem talking to the database)" in r.stderr


# --- report --batches --job: either form ------------------------------------------------------

@pytest.mark.parametrize("text", ["14544", "14543_1", "14543", " 7 "])
def test_job_selector_takes_raw_ids_array_tasks_and_array_ids(text):
    assert job_selector(text) == text.strip()


@pytest.mark.parametrize("text", ["", "14543_", "_1", "14543_1_2", "14543_[1-3]", "abc",
                                  "14543;1", "١٤٥"])
def test_job_selector_refuses_anything_else_naming_the_option(text):
    with pytest.raises(InputError, match=r"report: --job = .*expected a job id \(14544\), an "
                                         r"array task \(14543_1\)"):
        job_selector(text)


def test_raw_ids_of_sacct_output():
    assert raw_ids("14544\n14545\n14543\n14544\n\n") == ["14544", "14545", "14543"]
    assert raw_ids("") == []


class FakeInflux:
    def __init__(self):
        self.asked: list[str] = []

    def query(self, influxql):
        self.asked.append(influxql)
        return []


def test_batch_history_filters_on_every_raw_id():
    client = FakeInflux()
    assert batches.read_batch_history(client, 0.0, 10.0, ["14544", "14545"]) == {}
    assert """AND ("job_id" = '14544' OR "job_id" = '14545')""" in client.asked[0]
    one = FakeInflux()
    batches.read_batch_history(one, 0.0, 10.0, "7")
    assert """AND ("job_id" = '7')""" in one.asked[0]
    every = FakeInflux()
    batches.read_batch_history(every, 0.0, 10.0)
    assert "job_id\" =" not in every.asked[0]


class Done:
    def __init__(self, stdout):
        self.stdout = stdout


def _sacct(monkeypatch, answer):
    """sacct answers ``answer(argv)`` (a str, or raises); the argv it was given are kept."""
    from slurm_plugin.report import job_names as cli
    seen: list = []

    def slurm(cmd, args, cfg, **kw):
        seen.append((cmd, list(args)))
        return Done(answer(list(args)))
    monkeypatch.setattr(cli, "slurm", slurm)
    return seen


@pytest.mark.parametrize("given, sacct_out, want", [
    ("14543_1", "14544\n", ["14544"]),
    ("14543", "14544\n14545\n14546\n14543\n", ["14544", "14545", "14546", "14543"]),
    ("14544", "14544\n", ["14544"]),
    ("14544", "", ["14544"]),                  # no longer in the database: the id itself
])
def test_batches_job_filter_resolves_through_sacct(no_site, monkeypatch, given, sacct_out, want):
    seen = _sacct(monkeypatch, lambda args: sacct_out)
    client = FakeInflux()
    monkeypatch.setattr(InfluxClient, "query", lambda self, q: client.query(q))
    r = CliRunner().invoke(wattctl, ["report", "--batches", "--job", given, "--json"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert seen == [("sacct", ["-n", "-X", "-P", "-a", "-o", "JobIDRaw", "-j", given])]
    ids = " OR ".join(f"\"job_id\" = '{j}'" for j in want)
    assert f"AND ({ids})" in client.asked[0]


def test_an_array_task_sacct_does_not_know_is_an_error(no_site, monkeypatch):
    _sacct(monkeypatch, lambda args: "")
    r = CliRunner().invoke(wattctl, ["report", "--batches", "--job", "14543_9"])
    assert isinstance(r.exception, InputError)
    assert "--job 14543_9: sacct knows no such array task" in str(r.exception)


def test_without_sacct_a_raw_id_stands_alone_and_an_array_task_is_an_error(no_site,
                                                                            monkeypatch):
    def down(args):
        raise CommandError(["sacct", *args], 1, "sacct: error: Problem talking to the database")
    _sacct(monkeypatch, down)
    client = FakeInflux()
    monkeypatch.setattr(InfluxClient, "query", lambda self, q: client.query(q))
    r = CliRunner().invoke(wattctl, ["report", "--batches", "--job", "14543", "--json"])
    assert r.exit_code == 0, r.output
    assert "note: --job 14543: sacct failed (sacct: error: Problem talking" in r.stderr
    assert """AND ("job_id" = '14543')""" in client.asked[0]
    r = CliRunner().invoke(wattctl, ["report", "--batches", "--job", "14543_1"])
    assert isinstance(r.exception, InputError)
    assert "--job 14543_1: an array task's raw job id is asked of sacct" in str(r.exception)


def test_a_malformed_job_is_refused_before_slurm_or_influxdb(no_site, monkeypatch):
    seen = _sacct(monkeypatch, lambda args: "")
    r = CliRunner().invoke(wattctl, ["report", "--batches", "--job", "14543_[1-3]"])
    assert isinstance(r.exception, InputError) and "report: --job = '14543_[1-3]'" in \
        str(r.exception)
    assert seen == []
