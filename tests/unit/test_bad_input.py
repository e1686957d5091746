"""No traceback from bad data: telemetry of unexpected shape or out of bounds, damaged journal
lines, a full disk. Each becomes a warning naming the source and the value; the pass decides
without it and still recovers unfinished actions."""

from __future__ import annotations

import errno
import json
import math
import os
from pathlib import Path

import pytest
from test_reconcile import CLUSTER, RESIZE, Fixed, Recorder

from slurm_plugin import journal as journal_mod
from slurm_plugin.journal import Journal, PassLock, action_to_dict
from slurm_plugin.model import Readings
from slurm_plugin.policy.baseline import SlurmDefault
from slurm_plugin.reconcile import reconcile_pass
from slurm_plugin.telemetry.carbon import InfluxCarbon
from slurm_plugin.telemetry.influx import parse_results
from slurm_plugin.telemetry.readers import read_readings

NOW_S = 1_800_000_000.0
T_NS = int((NOW_S - 10) * 1e9)


class Answers:
    """An InfluxDB client whose answers are raw JSON (as the server sends it), by measurement."""

    def __init__(self, **by_measurement: dict) -> None:
        self.by = by_measurement

    def query(self, influxql: str):
        for name, doc in self.by.items():
            if f'"{name}"' in influxql:
                return parse_results(json.dumps(doc).encode(), "GET test/query")
        return []


def series(name, columns, values, tags=None):
    return {"results": [{"statement_id": 0, "series": [
        {"name": name, "tags": tags or {}, "columns": columns, "values": values}]}]}


GPU_COLUMNS = ["time", "energy_j", "mem_used_mib", "power_limit_w", "power_w", "util_pct"]


def gpu_doc(*rows):
    return {"results": [{"statement_id": 0, "series": [
        {"name": "gpu", "tags": {"node": "gpu1", "gpu": str(i)}, "columns": GPU_COLUMNS,
         "values": [row]} for i, row in enumerate(rows)]}]}


@pytest.mark.parametrize("field, value", [
    ("power_w", math.nan), ("power_w", math.inf), ("power_w", -5.0), ("power_w", 1e9),
    ("energy_j", -1.0), ("energy_j", math.inf), ("util_pct", 250.0), ("power_w", "300"),
    ("time", None)])
def test_gpu_reading_out_of_bounds_is_left_out_with_a_warning(field, value):
    good = [T_NS, 1000.0, 10.0, 300.0, 250.0, 90.0]
    bad = list(good)
    bad[GPU_COLUMNS.index(field)] = value
    reads = read_readings(Answers(gpu=gpu_doc(good, bad)), NOW_S)
    assert list(reads.gpus) == [("gpu1", 0)]
    assert len(reads.warnings) == 1
    assert f"{field} = {value!r}" in reads.warnings[0] and "gpu=1" in reads.warnings[0]


@pytest.mark.parametrize("value", [math.nan, -1.0, 1e12, math.inf])
def test_progress_with_absurd_samples_per_s_is_not_used(value):
    doc = series("job_progress", ["time", "samples_per_s", "step"], [[T_NS, value, 10]],
                 {"job_id": "7"})
    reads = read_readings(Answers(job_progress=doc), NOW_S, job_ids=["7"])
    assert reads.progress == {} and "samples_per_s" in reads.warnings[0]
    assert "job_id=7" in reads.warnings[0]


def test_carbon_with_extra_column_null_time_and_bad_values():
    doc = series("carbon_intensity", ["time", "gco2_per_kwh", "gco2_per_kwh_direct"],
                 [[T_NS, 200.0, 150.0], [None, 210.0, 1.0], [T_NS + 10**9, -3.0, 1.0],
                  [T_NS + 2 * 10**9, math.nan, 1.0], [T_NS + 3 * 10**9, 220.0, None]])
    last = series("carbon_intensity", ["time", "last"], [[0, 1e6]])

    class Both(Answers):
        def query(self, influxql):
            d = last if "last(" in influxql else doc
            return parse_results(json.dumps(d).encode(), "GET test/query")
    client = Both()
    reads = read_readings(client, NOW_S - 20, carbon=InfluxCarbon(client, "GB"))
    assert reads.carbon_g_per_kwh is None                     # 1e6 g/kWh: rejected
    assert [g for _, g in reads.carbon_forecast] == [200.0, 220.0]
    text = "\n".join(reads.warnings)
    assert "1000000.0" in text and "-3.0" in text and "nan" in text and "None" in text


def test_stale_carbon_data_is_not_planned_with_and_says_so():
    """The newest stored point older than ``carbon_max_age_s``: no intensity, no forecast (the
    policies fall back to slurm-default), one warning naming the zone, the age and the fix;
    recent data, or no limit, is read as before."""
    from slurm_plugin.formats.carbon_series import SeriesCarbon
    from slurm_plugin.formats.carbon_csv import CarbonPoint
    from slurm_plugin.formats.carbon_forecast import StoredThenForecast
    old = SeriesCarbon("GB", tuple(CarbonPoint(NOW_S - 5 * 86400 - k * 3600, 200.0 + k)
                                   for k in range(24 * 40, -1, -1)))
    for carbon in (old, StoredThenForecast(old)):
        reads = read_readings(Answers(), NOW_S, carbon=carbon, carbon_max_age_s=2 * 86400)
        assert reads.carbon_g_per_kwh is None and reads.carbon_forecast == ()
        assert len(reads.warnings) == 1 and "zone=GB" in reads.warnings[0]
        assert "48 h" in reads.warnings[0] and "wattctl carbon import" in reads.warnings[0]
        kept = read_readings(Answers(), NOW_S, carbon=carbon, carbon_max_age_s=0)
        assert kept.carbon_g_per_kwh == 200.0
    recent = read_readings(Answers(), NOW_S - 5 * 86400 + 60, carbon=StoredThenForecast(old),
                           carbon_max_age_s=2 * 86400)
    assert recent.carbon_g_per_kwh == 200.0 and recent.carbon_forecast
    # a carbon policy's fall-back says why: the reader's warning, not "no intensity"
    from slurm_plugin.policy.base import carbon_missing
    said = carbon_missing(read_readings(Answers(), NOW_S, carbon=old, carbon_max_age_s=2 * 86400))
    assert "carbon.max_age_s" in said and "stale" in said and "at or before now" not in said
    assert "at or before now" in carbon_missing(Readings())


def test_a_source_of_the_wrong_shape_leaves_the_others():
    reads = read_readings(Answers(gpu=gpu_doc([T_NS, 1.0, 1.0, 300.0, 100.0, 50.0]),
                                  job_progress={"results": [{"error": "shard down"}]}), NOW_S)
    assert len(reads.gpus) == 1 and reads.progress == {}
    assert any("job progress not read" in w and "shard down" in w for w in reads.warnings)


def _pass(tmp_path, policy, act, readings=Readings):
    return reconcile_pass(policy=policy, snapshot=lambda: CLUSTER, readings=readings,
                          actuator=act, state_dir=tmp_path)


def test_journal_line_that_is_not_utf8_is_skipped_and_recovery_still_runs(tmp_path):
    act = Recorder(crash_on="requeue_hold")
    with pytest.raises(KeyboardInterrupt):
        _pass(tmp_path, Fixed(RESIZE), act)
    with open(tmp_path / "journal.jsonl", "ab") as fh:
        fh.write(b'{"action_id": "x\xff\xfe", "event": "begin"}\n')
        fh.write(b'[1, 2]\n{"action_id": "y", "event": "begin", "t_s": 1, "detail": "",'
                 b' "action": {"kind": "resize", "bogus": 1}}\n')
    act.crash_on, act.calls = "", []
    for _ in range(2):                  # every later pass too, not only the first
        res = _pass(tmp_path, SlurmDefault(), act)
        text = "\n".join(res.warnings)
        assert "line 2 skipped" in text and "UnicodeDecodeError" in text
        assert "line 3 skipped" in text and "action 'y' skipped" in text
    assert [c[0] for c in act.calls] == ["set_gpus", "release", "start_now"]
    assert not act.job.held


def test_full_disk_under_the_lock_and_journal_is_a_warning(tmp_path, monkeypatch):
    (tmp_path / "reconcile.lock").symlink_to("/dev/full")     # every write: ENOSPC
    with PassLock(tmp_path / "reconcile.lock") as lock:
        assert lock.acquired

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(journal_mod.os, "fsync", full)          # the journal's disk is full
    act = Recorder()
    res = _pass(tmp_path, Fixed(RESIZE), act)
    assert res.ran and act.calls == []                  # nothing done that is not journaled
    assert any("cannot write begin" in w and "No space left" in w for w in res.warnings)


def test_history_that_is_not_utf8_or_of_another_shape_starts_afresh(tmp_path):
    for content in (b"\xff\xfe{}", b'{"pair:a+b": 3}', b"[1, 2]"):
        (tmp_path / "history.json").write_bytes(content)
        (tmp_path / "history.json.corrupt").unlink(missing_ok=True)
        res = _pass(tmp_path, SlurmDefault(), Recorder())
        assert res.ran and "starting afresh" in res.warnings[0]


def test_unfinished_action_of_bad_shape_in_journal_does_not_stop_the_pass(tmp_path):
    entry = {"action_id": "a1", "event": "begin", "t_s": 1.0, "detail": "",
             "action": {**action_to_dict(RESIZE), "gpus": "two", "extra": [1]}}
    (tmp_path / "journal.jsonl").write_text(json.dumps(entry) + "\n")
    res = _pass(tmp_path, SlurmDefault(), Recorder())
    assert res.ran and any("action 'a1' skipped" in w for w in res.warnings)
    assert Journal(Path(tmp_path) / "journal.jsonl").unfinished() == []
