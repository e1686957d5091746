"""The sacct trace reader (``simulate --from-sacct``) on a real 22.05 export and on bad rows.

tests/golden/sacct_export/22.05-workload.txt is `wattctl history export`'s sacct command run on
the local cluster after a workload with a job of each kind: exclusive (one with '|' in its name
and comment), two GPUs, shards, CPU only, failed at once, still running, cancelled running,
cancelled while waiting for --begin.
"""

from __future__ import annotations

import dataclasses
import io
import json
import time

import pytest
from click.testing import CliRunner

from slurm_plugin.commands.simulate import simulate
from slurm_plugin.errors import InputError
from slurm_plugin.sim.trace_sacct import FIELDS, read_sacct, read_sacct_lines

HEADER = "|".join(FIELDS)
ROW = ("{id}|{name}|alice|physics|gpu|2026-11-23T07:12:51|2026-11-23T07:12:51|"
       "2026-11-23T08:12:51|01:00:00|02:00:00|COMPLETED|0:0|billing=1,cpu=1,gres/gpu=2,node=1|"
       "billing=1,cpu=1,gres/gpu=2,node=1|gpu1|{admin}|{comment}")


def row(admin: str = "", **fields: object) -> str:
    return ROW.format(admin=admin, **fields)


@pytest.fixture()
def utc(monkeypatch):
    """sacct prints local time; the golden export was recorded in UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _read(*rows: str, **kw):
    return read_sacct_lines([HEADER, *rows], "t.txt", **kw)


def test_golden_export(golden_dir, utc):
    jobs, summary = read_sacct(golden_dir / "sacct_export" / "22.05-workload.txt")
    got = {"jobs": [dataclasses.asdict(j) for j in jobs],
           "summary": {k: v for k, v in summary.as_dict().items() if k != "path"}}
    want = json.loads((golden_dir / "sacct_export" / "22.05-workload.expected.json").read_text())
    assert got == want
    # what the workload held, said outright
    assert [j.job_id for j in jobs] == ["1", "2", "3", "8"]
    assert summary.skipped == {"no_gpus": 1, "still_running": 1, "pending": 0,
                               "cancelled_before_start": 2,
                               "never_started": 0, "zero_runtime": 1}
    assert summary.rows == 9 and summary.rows_with_bar == 2 and summary.from_shards == 1
    assert jobs[0].app == "resnet18" and jobs[1].num_gpus == 2 and jobs[1].app == "lstm"


@pytest.mark.parametrize("name,comment", [
    ("a|b", ""), ("plain", "app=vgg16 x|y"), ("a|b|c", "app=vgg16|d|e"), ("|", "|"),
    ("x|alice|physics", "gpu1|q"),
])
def test_bars_in_free_text_are_placed(name, comment, utc):
    jobs, summary = _read(row(id=7, name=name, comment=comment))
    assert len(jobs) == 1 and jobs[0].num_gpus == 2 and jobs[0].duration_s == 3600
    assert jobs[0].user == "alice"
    assert jobs[0].app == ("vgg16" if "vgg16" in comment else "")
    assert summary.rows_with_bar == (1 if "|" in name + comment else 0)


def test_the_class_job_submit_lua_recorded_wins_over_the_comment(utc):
    record = "wb:uid=1000;declared_app=lstm;tagged=1;policy=eaco"
    jobs, _ = _read(row(id=1, name="n", admin=record, comment="app=vgg16"),
                    row(id=2, name="n", admin="wb:uid=1000;declared_app=;tagged=0",
                               comment="app=vgg16"),
                    row(id=3, name="n", comment="app=vgg16"))
    assert [j.app for j in jobs] == ["lstm", "", "vgg16"]


def test_an_export_from_before_admin_comment_is_read(utc):
    header = "|".join(f for f in FIELDS if f != "AdminComment")
    old = row(id=4, name="n", comment="app=vgg16").replace("|gpu1||", "|gpu1|")
    jobs, _ = read_sacct_lines([header, old], "t.txt")
    assert [j.app for j in jobs] == ["vgg16"]


def test_unreadable_row_names_its_line():
    bad = row(id=7, name="n", comment="").replace("01:00:00", "an hour")
    with pytest.raises(InputError, match=r"t\.txt: line 3: .*Elapsed = 'an hour'"):
        _read(row(id=6, name="ok", comment=""), bad)


def test_short_row_and_bad_header_and_duplicates():
    with pytest.raises(InputError, match="line 2: 3 fields, expected 17"):
        _read("1|a|b")
    with pytest.raises(InputError, match="line 1: header"):
        read_sacct_lines(["JobID|JobName", "1|x"], "t.txt")
    with pytest.raises(InputError, match="line 3: JobIDRaw 7 appears twice"):
        _read(row(id=7, name="a", comment=""), row(id=7, name="b", comment=""))


def test_shards_become_whole_gpus():
    shards = row(id=1, name="s", comment="").replace("gres/gpu=2", "gres/shard=6")
    jobs, summary = _read(shards, shards_per_gpu=4)
    assert jobs[0].num_gpus == 2 and summary.from_shards == 1


def test_nothing_to_replay_is_an_error_that_counts():
    cpu_only = row(id=1, name="c", comment="").replace("gres/gpu=2,", "")
    with pytest.raises(InputError, match="nothing to replay .*1 no gpus"):
        _read(cpu_only)


def test_simulate_from_sacct_stdin_reports_skipped(golden_dir, utc):
    text = (golden_dir / "sacct_export" / "22.05-workload.txt").read_text()
    r = CliRunner().invoke(simulate, ["--from-sacct", "-", "--compare", "slurm-default,eaco",
                                      "--nodes", "4", "--gpus-per-node", "4", "--json"],
                           input=text)
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert [x["policy"] for x in out] == ["slurm-default", "eaco"]
    assert all(x["jobs"] == 4 and x["jobs_finished"] == 4 for x in out)
    assert out[0]["sacct"]["skipped"]["cancelled_before_start"] == 2


def test_simulate_from_sacct_refuses_trace_too_and_too_large_jobs(golden_dir, utc, tmp_path):
    path = golden_dir / "sacct_export" / "22.05-workload.txt"
    r = CliRunner().invoke(simulate, ["--from-sacct", str(path), "--trace", str(path),
                                      "--policy", "slurm-default"])
    assert r.exit_code != 0 and "not both" in r.output
    with pytest.raises(InputError, match="line 3: job 2: 2 GPUs is larger than the cluster"):
        CliRunner().invoke(simulate, ["--from-sacct", str(path), "--policy", "slurm-default",
                                      "--nodes", "1", "--gpus-per-node", "1"],
                           catch_exceptions=False)


def test_stream_is_read_as_stdin(utc):
    text = "\n".join([HEADER, row(id=3, name="a", comment="")]) + "\n"
    jobs, summary = read_sacct(io.StringIO(text))
    assert summary.path == "<stdin>" and jobs[0].job_id == "3"


@pytest.mark.parametrize("state,start,end,nodes,alloc,reason", [
    ("PENDING", "Unknown", "Unknown", "None assigned", "", "pending"),
    ("RUNNING", "2026-11-23T07:12:51", "Unknown", "gpu1", None, "still_running"),
    ("SUSPENDED", "2026-11-23T07:12:51", "Unknown", "gpu1", None, "still_running"),
    ("CANCELLED by 0", "None", "2026-11-23T07:13:01", "None assigned", "", "cancelled_before_start"),
    ("NODE_FAIL", "None", "2026-11-23T07:13:01", "None assigned", "", "never_started"),
    ("FAILED", "2026-11-23T07:12:51", "2026-11-23T07:12:51", "gpu1", None, "zero_runtime"),
])
def test_rows_not_replayed_are_counted_by_reason(state, start, end, nodes, alloc, reason):
    cells = row(id=1, name="j", comment="").split("|")
    cells[6], cells[7], cells[10], cells[14] = start, end, state, nodes
    if alloc is not None:
        cells[13] = alloc
    if reason == "zero_runtime":
        cells[8] = "00:00:00"
    keep = row(id=2, name="k", comment="")
    jobs, summary = _read("|".join(cells), keep)
    assert [j.job_id for j in jobs] == ["2"]
    assert {k: v for k, v in summary.skipped.items() if v} == {reason: 1}
    assert summary.examples == {reason: ["1"]}
