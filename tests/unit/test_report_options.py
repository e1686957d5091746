"""`wattctl report`: options that do not apply together are a usage error, not ignored."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from slurm_plugin.cli import group as wattctl


@pytest.fixture(autouse=True)
def no_influx(monkeypatch, tmp_path):
    monkeypatch.setenv("WATTBATCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WATTBATCH_SITE_CONFIG", os.devnull)
    monkeypatch.setenv("WATTBATCH_INFLUX_URL", "http://127.0.0.1:9")    # nothing listens


@pytest.mark.parametrize("args, needle", [
    (["--job", "5"], "--job applies to --batches only"),
    (["--batches", "--by", "job"], "--by: not with --batches"),
    (["--batches", "--by", "user"], "--by: not with --batches"),
    (["--batches", "--job", "5", "--cluster", "all", "--plot", "x.png"],
     "--cluster, --plot: not with --batches"),
])
def test_options_that_would_be_ignored_are_a_usage_error(args, needle):
    r = CliRunner().invoke(wattctl, ["report", *args])
    assert r.exit_code == 2 and needle in r.output and "influx" not in r.output


def test_batches_with_its_own_options_goes_on_to_influxdb(monkeypatch):
    from types import SimpleNamespace

    from slurm_plugin.errors import TelemetryError
    from slurm_plugin.report import job_names as slurm_cli
    asked = []      # --job's raw ids come from sacct: a stand-in, no Slurm in this tier
    monkeypatch.setattr(slurm_cli, "slurm", lambda cmd, argv, cfg: asked.append([cmd, *argv])
                        or SimpleNamespace(stdout="5\n"))
    r = CliRunner().invoke(wattctl, ["report", "--batches", "--job", "5", "--since", "now-1days",
                                     "--json"])
    assert isinstance(r.exception, TelemetryError)
    assert asked and asked[0][0] == "sacct" and asked[0][-2:] == ["-j", "5"]


def test_a_note_says_when_the_zone_had_no_fresh_intensity_over_the_period():
    from slurm_plugin.commands.report import _stale_carbon

    class Client:
        def __init__(self, points):
            self.points, self.asked = points, []

        def query(self, influxql):
            self.asked.append(influxql)
            from slurm_plugin.telemetry.influx import Series
            return [Series("carbon_intensity", {}, ["time", "mean"], self.points)]
    day = 86400.0
    stale = _stale_carbon(Client([]), "GB", 10 * day, 11 * day, 2 * day, {"co2_kg": 1.5})
    assert len(stale) == 1 and "zone GB" in stale[0] and "wattctl carbon import" in stale[0]
    fresh = Client([[9 * day, 200.0]])
    assert _stale_carbon(fresh, "GB", 10 * day, 11 * day, 2 * day, {"co2_kg": 1.5}) == []
    assert str(int((8 * day) * 1e9)) in fresh.asked[0]      # from max_age_s before the period
    assert _stale_carbon(Client([]), "GB", 10 * day, 11 * day, 0.0, {"co2_kg": 1.5}) == []
    assert _stale_carbon(Client([]), "GB", 10 * day, 11 * day, 2 * day, {"co2_kg": None}) == []
    # the usual case now: stale data leaves the jobs' CO2 out, and the note says why
    missing = _stale_carbon(Client([]), "GB", 10 * day, 11 * day, 2 * day,
                            {"co2_kg": None, "co2_missing_records": 3})
    assert len(missing) == 1 and "no CO2 is charged at a stale intensity" in missing[0]
