"""`wattctl carbon show` shows what the policies read: the site's carbon.file where one is set."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from slurm_plugin.cli import group as wattctl
from slurm_plugin.errors import ConfigError
from slurm_plugin.resources import data_dir

GB = data_dir() / "carbon-GB-2023-01.csv"


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.setenv("WATTBATCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WATTBATCH_INFLUX_URL", "http://127.0.0.1:9")    # nothing listens

    def write(text: str):
        p = tmp_path / "site.toml"
        p.write_text(text)
        monkeypatch.setenv("WATTBATCH_SITE_CONFIG", str(p))
        return p
    return write


def test_show_reads_the_carbon_file_the_policies_read(site):
    site(f'[carbon]\nzone = "GB"\nfile = "{GB}"\n')
    r = CliRunner().invoke(wattctl, ["carbon", "show", "--json"])
    assert r.exit_code == 0, r.output
    shown = json.loads(r.output)
    assert shown["source"] == "carbon.file" and shown["file"] == str(GB)
    assert shown["zone"] == "GB" and shown["points"] == 744
    assert 0 < shown["min"] <= shown["mean"] <= shown["max"]
    r = CliRunner().invoke(wattctl, ["carbon", "show"])
    assert r.exit_code == 0, r.output
    assert f"carbon.file {GB} (what the policies read" in r.output and "744 points" in r.output
    assert "no carbon intensity stored" not in r.output


def test_an_unreadable_carbon_file_is_an_error_naming_file_key_and_fix(site, tmp_path):
    p = site('[carbon]\nfile = "/nonexistent/carbon.csv"\n')
    r = CliRunner().invoke(wattctl, ["carbon", "show"])
    assert isinstance(r.exception, ConfigError)
    msg = str(r.exception)
    assert f"{p}: carbon.file = '/nonexistent/carbon.csv'" in msg and "cannot read" in msg
    assert 'carbon.file = ""' in msg


def test_another_zone_than_the_files_is_read_from_influxdb(site):
    from slurm_plugin.errors import TelemetryError
    site(f'[carbon]\nzone = "GB"\nfile = "{GB}"\n')
    r = CliRunner().invoke(wattctl, ["carbon", "show", "--zone", "DE-LU"])
    assert isinstance(r.exception, TelemetryError)      # InfluxDB asked (none runs here)
