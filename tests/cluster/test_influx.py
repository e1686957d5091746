"""InfluxDB round trips against a real server.

Uses the local cluster's InfluxDB when ``$WATTBATCH_INFLUX_URL`` is set (``wattctl localcluster
up``); otherwise starts a private ``influxd`` on loopback ports for this module and always stops
it at teardown. Every test works in a database of its own, dropped afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_plugin import proc
from slurm_plugin.cli import group as wattctl
from slurm_plugin.errors import TelemetryError
from slurm_plugin.model import GpuReading
from slurm_plugin.node.collector import collect_once
from slurm_plugin.node.jobenergy import finish, record_start
from slurm_plugin.node.ledger import CachedIntensity
from slurm_plugin.progress import report_progress
from slurm_plugin.telemetry.carbon import InfluxCarbon, SeriesCarbon
from slurm_plugin.formats.carbon_csv import load
from slurm_plugin.telemetry.influx import InfluxClient
from slurm_plugin.telemetry.lineproto import Point
from slurm_plugin.telemetry.readers import latest_gpu_readings, latest_progress, read_readings

pytestmark = pytest.mark.cluster

INFLUXD = "/usr/bin/influxd"
REPO = Path(__file__).resolve().parents[2]
CONF = """reporting-disabled = true
bind-address = "127.0.0.1:{rpc}"
[meta]
  dir = "{d}/meta"
[data]
  dir = "{d}/data"
  wal-dir = "{d}/wal"
  query-log-enabled = false
[monitor]
  store-enabled = false
[http]
  bind-address = "127.0.0.1:{http}"
  log-enabled = false
[logging]
  level = "warn"
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(pid_file: Path) -> None:
    try:
        pid = int(pid_file.read_text())
    except (OSError, ValueError):
        return
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.05)


@pytest.fixture(scope="module")
def influx_url(tmp_path_factory):
    url = os.environ.get("WATTBATCH_INFLUX_URL")
    if url:
        yield url
        return
    if not os.access(INFLUXD, os.X_OK):
        pytest.skip(f"no InfluxDB: $WATTBATCH_INFLUX_URL unset and {INFLUXD} missing "
                    "(apt-get install influxdb, or run `wattctl localcluster up`)")
    d = tmp_path_factory.mktemp("influxd")
    http = _free_port()
    (d / "influxdb.conf").write_text(CONF.format(d=d, rpc=_free_port(), http=http))
    pid_file = d / "influxd.pid"
    try:
        proc.run(["start-stop-daemon", "--start", "--background", "--make-pidfile",
                  "--pidfile", pid_file, "--output", d / "influxd.log", "--exec", INFLUXD,
                  "--", "-config", d / "influxdb.conf"], timeout_s=10)
        url = f"http://127.0.0.1:{http}"
        probe = InfluxClient(url, "_", timeout_s=0.5)
        deadline = time.monotonic() + 20
        while True:
            try:
                probe.ping()
                break
            except TelemetryError:
                if time.monotonic() > deadline:
                    raise RuntimeError("influxd did not answer /ping within 20 s:\n"
                                       + (d / "influxd.log").read_text()[-2000:]) from None
                time.sleep(0.1)
        yield url
    finally:
        _stop(pid_file)


@pytest.fixture()
def client(influx_url):
    c = InfluxClient(influx_url, f"wb_test_{uuid.uuid4().hex[:12]}", timeout_s=5.0)
    c.create_database()
    yield c
    c.drop_database()


@pytest.fixture()
def env(client):
    """Environment pointing wattctl and wattbatch-progress at the test database."""
    return {"WATTBATCH_INFLUX_URL": client.url, "WATTBATCH_INFLUX_DATABASE": client.database,
            "WATTBATCH_INFLUX_TIMEOUT_S": "5"}


def test_database_creation_is_idempotent(client):
    client.create_database()
    [s] = client.query("SHOW DATABASES")
    assert [client.database] in [list(v) for v in s.values]


def test_write_query_round_trip_with_awkward_tags(client):
    now = round(time.time(), 3)     # stored times are exact to the microsecond
    readings = [GpuReading("node a,b=c", i, 200.5 + i, 1e6 * i, 90.0, 4096.0, 300.0, now - 1)
                for i in range(3)]

    class Source:
        def read(self):
            return readings

    collect_once(Source(), client, "clu ster")
    got = latest_gpu_readings(client, now, cluster="clu ster")
    assert got == {("node a,b=c", i): readings[i] for i in range(3)}
    assert latest_gpu_readings(client, now, cluster="other") == {}
    assert latest_gpu_readings(client, now + 600, cluster="clu ster") == {}   # too old by then


def test_collect_command_writes_gpu_points(client, env, monkeypatch):
    from slurm_plugin.node import source as sources

    class Fake:
        def __init__(self, node, cfg):
            self.node = node

        def read(self):
            return [GpuReading(self.node, i, 50.0, 1.0, 10.0, 1.0, 250.0, time.time())
                    for i in range(2)]

    monkeypatch.setitem(sources.SOURCES, "fake", Fake)
    done = CliRunner().invoke(wattctl, ["collect", "--interval", "0.1", "--count", "2",
                                        "--source", "fake", "--node", "g1"], env=env)
    assert done.exit_code == 0, done.output
    [s] = client.query('SELECT count("power_w") FROM "gpu"')
    assert s.values[0][1] == 4
    assert set(latest_gpu_readings(client, time.time())) == {("g1", 0), ("g1", 1)}


def _em_csv(tmp_path, hours, bump=0.0):
    rows = ["Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
            "Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage"]
    for h in range(hours):
        v = 100.0 + h + (bump if h == 0 else 0.0)
        rows.append(f"2023-03-{1 + h // 24:02d} {h % 24:02d}:00:00,GB,GB,GB,{v - 20},{v},50")
    path = tmp_path / "GB_2023_hourly.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_carbon_import_twice_writes_nothing_new(client, env, tmp_path):
    path = _em_csv(tmp_path, 48)
    run = CliRunner().invoke
    first = run(wattctl, ["carbon", "import", str(path), "--zone", "GB", "--json"], env=env)
    assert first.exit_code == 0, first.output
    assert json.loads(first.output) | {"elapsed_s": 0} == json.loads(first.output) | {
        "new": 48, "present": 0, "written": 48, "elapsed_s": 0}
    second = run(wattctl, ["carbon", "import", str(path), "--zone", "GB"], env=env)
    assert second.exit_code == 0, second.output
    assert "0 new, 48 already present (0 updated); 0 written" in second.output
    [s] = client.query('SELECT count("gco2_per_kwh") FROM carbon_intensity')
    assert s.values[0][1] == 48
    fixed = run(wattctl, ["carbon", "import", str(_em_csv(tmp_path, 48, bump=5.0)), "--zone",
                          "GB", "--json"], env=env)
    assert json.loads(fixed.output)["updated"] == 1 and json.loads(fixed.output)["written"] == 1
    shown = json.loads(run(wattctl, ["carbon", "show", "--zone", "GB", "--json"], env=env).output)
    assert shown["points"] == 48 and shown["max"] == 147.0 and shown["min"] == 101.0


def test_a_past_series_shifted_to_now_is_current_for_the_ledger(client, env, tmp_path):
    """A 2023 series as it is leaves the collector no intensity (``carbon.max_age_s`` two
    days: stale), said once; ``--shift-to-now`` stores it later, covering now (whole days for
    a series of three days), and the collector then charges at it."""
    path = _em_csv(tmp_path, 72)
    run = CliRunner().invoke
    assert run(wattctl, ["carbon", "import", str(path), "--zone", "GB"], env=env).exit_code == 0
    db, said = InfluxCarbon(client, "GB"), []
    assert CachedIntensity(db, warn=said.append, max_age_s=2 * 86400)(time.time()) is None
    assert len(said) == 1 and "carbon.max_age_s" in said[0], said
    assert CachedIntensity(db)(time.time()) == 171.0        # no limit: the last 2023 value
    now = time.time()
    done = run(wattctl, ["carbon", "import", str(path), "--zone", "GB", "--shift-to-now",
                         "--json"], env=env)
    assert done.exit_code == 0, done.output
    got = json.loads(done.output)
    assert got["shifted_s"] > 0 and got["written"] == 72
    assert got["first_s"] <= now <= got["last_s"], got
    assert got["first_s"] - 1677628800 == got["shifted_s"]     # from 2023-03-01 00:00
    assert got["shifted_s"] % 86400 == 0                       # whole days
    said.clear()
    assert CachedIntensity(db, warn=said.append, max_age_s=2 * 86400)(time.time()) is not None
    assert not said
    [s] = client.query('SELECT count("gco2_per_kwh") FROM carbon_intensity')
    assert s.values[0][1] == 144


def test_carbon_import_of_the_current_export_header_with_gaps(client, env, tmp_path):
    """Electricity Maps' current header ("Zone id", "... (Life cycle)") imports; an hour with
    no value is skipped, counted and warned about, and not stored."""
    rows = ["Datetime (UTC),Country,Zone name,Zone id,Carbon intensity gCO₂eq/kWh (direct),"
            "Carbon intensity gCO₂eq/kWh (Life cycle),Carbon-free energy percentage (CFE%)"]
    for h in range(6):
        v = "" if h == 2 else f"{200.0 + h}"
        rows.append(f"2023-04-01 {h:02d}:00:00,Germany,Germany,DE-LU,{v},{v},50")
    path = tmp_path / "DE-LU_2023_hourly.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    done = CliRunner().invoke(wattctl, ["carbon", "import", str(path), "--zone", "DE-LU",
                                        "--json"], env=env)
    assert done.exit_code == 0, done.output
    assert "1 row(s) without a value skipped (line 4)" in done.output
    got = json.loads(done.output.splitlines()[-1])
    assert (got["points"], got["written"], got["skipped"]) == (5, 5, 1)
    [s] = client.query('SELECT "gco2_per_kwh" FROM carbon_intensity WHERE "zone" = \'DE-LU\'')
    assert [v for _, v in s.values] == [200.0, 201.0, 203.0, 204.0, 205.0]


def test_influx_and_csv_providers_agree(client, env, tmp_path):
    path = _em_csv(tmp_path, 30)
    CliRunner().invoke(wattctl, ["carbon", "import", str(path), "--zone", "GB"], env=env)
    from_db, from_csv = InfluxCarbon(client, "GB"), SeriesCarbon.from_series(load(path))
    t0 = from_csv.forecast(0, 2e9)[0][0]
    for t in (t0 - 1, t0, t0 + 1800, t0 + 5 * 3600, t0 + 40 * 3600):
        assert from_db.intensity_at(t) == from_csv.intensity_at(t)
    assert from_db.forecast(t0, t0 + 6 * 3600) == from_csv.forecast(t0, t0 + 6 * 3600)
    readings = read_readings(client, t0 + 3600, carbon=from_db, forecast_horizon_s=7200)
    assert readings.carbon_g_per_kwh == 101.0 and len(readings.carbon_forecast) == 2


def test_progress_api_and_cli_round_trip(client, env):
    now = time.time()
    report_progress(5, 120.0, epoch=1, steps_per_epoch=4, total_steps=20, job_id="901",
                    client=client, now_s=now - 2)
    report_progress(6, 130.0, epoch=1, steps_per_epoch=4, total_steps=20, job_id="901",
                    client=client, now_s=now - 1)
    done = proc.run([sys.executable, "-m", "slurm_plugin.progress", "--step", "3",
                     "--samples-per-s", "9.5"], env=env | {"SLURM_JOB_ID": "902"},
                    cwd=str(REPO), timeout_s=30)
    assert done.returncode == 0
    got = latest_progress(client, time.time() + 1)
    assert (got["901"].step, got["901"].samples_per_s, got["901"].epoch) == (6, 130.0, 1)
    assert got["901"].started_s == pytest.approx(now - 2, abs=1e-3)
    assert got["901"].taken_s == pytest.approx(now - 1, abs=1e-3)
    assert got["902"].step == 3
    assert set(latest_progress(client, time.time() + 1, job_ids=["902"])) == {"902"}


def test_emulated_training_reports_and_resumes(client, env, tmp_path):
    ckpt = tmp_path / "ckpt.json"
    argv = [sys.executable, "-m", "slurm_plugin.emulated_train", "--steps", "6",
            "--step-s", "0.01", "--steps-per-epoch", "4", "--checkpoint", str(ckpt)]
    job_env = env | {"SLURM_JOB_ID": "903", "PYTHONPATH": str(REPO)}
    proc.run(argv, env=job_env, timeout_s=60)
    assert json.loads(ckpt.read_text())["step"] == 6
    assert latest_progress(client, time.time() + 1)["903"].step == 6
    ckpt.write_text(json.dumps({"step": 4}))       # as if requeued after the first epoch
    again = proc.run(argv + ["--steps", "8"], env=job_env, timeout_s=60)
    assert "starting at step 4" in again.stdout
    assert latest_progress(client, time.time() + 1)["903"].step == 8


def test_job_energy_written_at_epilog(client, tmp_path):
    class Source:
        energy = 0.0

        def read(self):
            Source.energy += 7.2e6        # 2 kWh per read
            return [GpuReading("n1", 0, 1.0, Source.energy, 0, 0, 0, 0)]

    record_start(Source(), "904", (0,), tmp_path, now_s=1000.0)
    carbon = SeriesCarbon("GB", ())
    result = finish(Source(), "n1", "904", tmp_path, now_s=2000.0, carbon=carbon)
    client.write([result.point("alice", "c")])
    [s] = client.query('SELECT energy_j, co2_g, duration_s FROM job_energy WHERE "job_id" = '
                       "'904' AND \"user\" = 'alice'")
    assert s.rows()[0]["energy_j"] == 7.2e6 and s.rows()[0]["duration_s"] == 1000.0
    assert s.rows()[0]["co2_g"] is None         # no intensity known: left out, not zero


def test_unreachable_server_fails_quickly():
    port = _free_port()
    client = InfluxClient(f"http://127.0.0.1:{port}", "db", timeout_s=1.0)
    t0 = time.monotonic()
    with pytest.raises(TelemetryError, match=f"http://127.0.0.1:{port}/write"):
        client.write([Point("m", {}, {"v": 1.0})])
    assert time.monotonic() - t0 < 1.0


def test_batch_history_reads_raw_reports_only_where_the_batch_may_change(client):
    """``report --batches``: a job reports its batch at every step; the history reads the raw
    reports only in the hours where one differs from the report before it, and gives the
    same events as reading every report."""
    from slurm_plugin.report.batches import PROGRESS, _reports, batch_events, read_batch_history
    t0 = 3600.0 * (int(time.time() // 3600) - 12)        # on an hour, 12 h ago

    def batch_a(t: float) -> int:
        if 3 * 3600 + 1200 <= t < 3 * 3600 + 2400:
            return 128              # up and back inside one hour
        if t >= 6 * 3600:
            return 256              # changed exactly at an hour's start
        return 64

    points = []
    for k in range(0, 10 * 3600, 60):
        points.append(Point(PROGRESS, {"job_id": "7"}, {"step": k, "batch_size": batch_a(k)},
                            t0 + k))
        size = 0 if 8 * 3600 <= k < 8 * 3600 + 600 else 32     # invalid reports: skipped
        points.append(Point(PROGRESS, {"job_id": "8"}, {"step": k, "batch_size": size}, t0 + k))
    client.write(points)
    since, until = t0 - 1800, t0 + 10 * 3600
    got = read_batch_history(client, since, until)
    where = f"time >= {int(since * 1e9)} AND time <= {int(until * 1e9)}"
    every = {s.tags["job_id"]: batch_events([], s.rows()) for s in client.query(
        f'SELECT "batch_size" FROM "{PROGRESS}" WHERE {where} GROUP BY "job_id"')}
    assert got == {k: v for k, v in every.items() if v}
    assert [(e["time_s"] - t0, e["batch_size"]) for e in got["7"]] == \
        [(0, 64), (3 * 3600 + 1200, 128), (3 * 3600 + 2400, 64), (6 * 3600, 256)]
    assert [e["batch_size"] for e in got["8"]] == [32]
    read = _reports(client, since, until, where)
    # job 7: its first hour, the hour it went up and back, the hour starting on 256; job 8:
    # its first hour and the hour with the invalid reports (back on 32 inside it)
    assert sum(len(v) for v in read.values()) == 5 * 60 < len(points)
