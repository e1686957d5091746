"""Progress is attributed only when the job's owner wrote it (signed with the job's key) and
only while the job's GPUs are busy: a forged point changes nothing."""

from __future__ import annotations

import json
import os
import stat

import pytest

from slurm_plugin import progress_key
from slurm_plugin.model import GpuReading, Progress
from slurm_plugin.progress import report_progress
from slurm_plugin.telemetry.influx import parse_results
from slurm_plugin.telemetry.readers import START_GRACE_S, latest_progress, plausible_progress

SITE_KEY = b"0123456789abcdef0123456789abcdef"
NOW_S = 1_800_000_000.0


class Store:
    """Keeps written points and answers the reader's query the way InfluxDB does (JSON, ints
    for whole numbers, times in ns)."""

    def __init__(self):
        self.points = []

    def write(self, points):
        self.points.extend(points)
        return len(self.points)

    def query(self, influxql):
        series = []
        for p in self.points:
            columns = ["time", *sorted(p.fields)]
            values = [int(round(p.time_s * 1e9))] + [
                int(v) if isinstance(v, float) and v.is_integer() else v
                for v in (p.fields[c] for c in columns[1:])]
            series.append({"name": p.measurement, "tags": dict(p.tags), "columns": columns,
                           "values": [values]})
        doc = {"results": [{"statement_id": 0, "series": series}]}
        return parse_results(json.dumps(doc).encode(), "GET test/query")


@pytest.fixture()
def keys(tmp_path, monkeypatch):
    site = tmp_path / "site.key"
    site.write_bytes(SITE_KEY)
    path = progress_key.write_job_key(str(site), str(tmp_path / "jobs"), "42", os.getuid(),
                                      os.getgid())
    monkeypatch.setenv("WATTBATCH_PROGRESS_KEY_FILE", path)
    return path


def test_job_key_file_is_for_the_job_user_only(keys):
    st = os.stat(keys)
    assert stat.S_IMODE(st.st_mode) == 0o400 and st.st_uid == os.getuid()
    assert stat.S_IMODE(os.stat(os.path.dirname(keys)).st_mode) == 0o711


def test_signed_point_is_attributed_and_forged_ones_are_not(keys, monkeypatch):
    store = Store()
    report_progress(10, 250.0, total_steps=100, job_id="42", client=store, now_s=NOW_S + 0.1234)
    verifier = progress_key.Verifier(SITE_KEY)
    warnings: list[str] = []
    got = latest_progress(store, NOW_S + 10, job_ids=["42"], verify=verifier.ok,
                          warnings=warnings)
    assert got["42"].samples_per_s == 250.0 and warnings == []

    # someone else writes for job 42: unsigned, signed with their own job's key, or altered
    monkeypatch.delenv("WATTBATCH_PROGRESS_KEY_FILE")
    for forged in (_unsigned(store), _other_job_key(store), _altered(store)):
        warnings = []
        got = latest_progress(forged, NOW_S + 10, job_ids=["42"], verify=verifier.ok,
                              warnings=warnings)
        assert got == {} and "not signed with the job's key" in warnings[0]


def _unsigned(store):
    s = Store()
    s.points = [type(p)(p.measurement, p.tags, {k: v for k, v in p.fields.items()
                                                 if k != "sig"}, p.time_s)
                for p in store.points]
    return s


def _other_job_key(store):
    s = Store()
    key = progress_key.job_key(SITE_KEY, "43").hex().encode()
    for p in store.points:
        fields = {k: v for k, v in p.fields.items() if k != "sig"}
        fields["samples_per_s"] = 9999.0
        fields["sig"] = progress_key.sign(key, "43", p.time_s, fields)
        s.points.append(type(p)(p.measurement, p.tags, fields, p.time_s))
    return s


def _altered(store):
    s = Store()
    s.points = [type(p)(p.measurement, p.tags, {**p.fields, "samples_per_s": 9999.0},
                        p.time_s) for p in store.points]
    return s


def test_progress_of_a_job_whose_gpus_are_idle_is_not_used():
    p = Progress("42", 10, 250.0, 0, 0, 0, NOW_S, NOW_S)
    idle = {("gpu1", 0): GpuReading("gpu1", 0, 60.0, 1.0, 0.0, 0.0, 300.0, NOW_S)}
    busy = {("gpu1", 0): GpuReading("gpu1", 0, 250.0, 1.0, 95.0, 0.0, 300.0, NOW_S)}
    warnings: list[str] = []
    assert plausible_progress({"42": p}, {"42": [("gpu1", 0)]}, idle, warnings) == {}
    assert "while its GPUs are idle (gpu1:0)" in warnings[0]
    assert plausible_progress({"42": p}, {"42": [("gpu1", 0)]}, busy) == {"42": p}
    assert plausible_progress({"42": p}, {"42": [("gpu2", 0)]}, idle) == {"42": p}  # unseen


def test_a_gpu_reading_from_before_the_first_step_proves_nothing():
    """The collector's newest reading may predate the job's first step (it was loading): idle
    then is no lie. A first step claimed long after the Slurm start is held to the grace."""
    first_step_s = NOW_S - 2
    p = Progress("42", 10, 250.0, 0, 0, 0, NOW_S, first_step_s)
    before = {("gpu1", 0): GpuReading("gpu1", 0, 60.0, 1.0, 0.0, 0.0, 300.0, NOW_S - 3)}
    after = {("gpu1", 0): GpuReading("gpu1", 0, 60.0, 1.0, 0.0, 0.0, 300.0, NOW_S - 1)}
    gpus_of = {"42": [("gpu1", 0)]}
    assert plausible_progress({"42": p}, gpus_of, before) == {"42": p}
    assert plausible_progress({"42": p}, gpus_of, after) == {}
    started_s = {"42": NOW_S - 10}                       # Slurm started it 10 s ago
    assert plausible_progress({"42": p}, gpus_of, before, job_start_s=started_s) == {"42": p}
    long_ago = {"42": NOW_S - START_GRACE_S - 60}
    assert plausible_progress({"42": p}, gpus_of, before, job_start_s=long_ago) == {}


def test_short_site_key_is_refused(tmp_path):
    (tmp_path / "k").write_bytes(b"short")
    with pytest.raises(Exception, match="expected at least 16"):
        progress_key.write_job_key(str(tmp_path / "k"), str(tmp_path), "1", 0, 0)


def test_prolog_writes_the_job_key_and_epilog_removes_it(tmp_path):
    from slurm_plugin.node.epilog import epilog
    from slurm_plugin.node.prolog import prolog

    site = tmp_path / "site.key"
    site.write_bytes(SITE_KEY)
    (tmp_path / "site.toml").write_text("")
    env = {"SLURM_JOB_ID": "77", "SLURM_JOB_UID": str(os.getuid()),
           "SLURM_JOB_GID": str(os.getgid()), "SLURM_JOB_GPUS": "",
           "WATTBATCH_PROGRESS_SITE_KEY_FILE": str(site),
           "WATTBATCH_PROGRESS_JOB_KEY_DIR": str(tmp_path / "jobs"),
           "WATTBATCH_SITE_CONFIG": str(tmp_path / "site.toml")}
    said = prolog(env)
    path = tmp_path / "jobs" / "77.key"
    assert f"progress key {path}" in said
    assert path.read_bytes() == progress_key.job_key(SITE_KEY, "77").hex().encode()
    assert epilog(env) is None and not path.exists()
