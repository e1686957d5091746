"""`wattctl collect`: a bad GPU source is blamed on where it came from."""

from __future__ import annotations

import os

from click.testing import CliRunner

from slurm_plugin.cli import group as wattctl
from slurm_plugin.errors import ConfigError


def test_a_bad_source_option_is_a_usage_error_not_the_site_configs(monkeypatch, tmp_path):
    monkeypatch.setenv("WATTBATCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WATTBATCH_SITE_CONFIG", os.devnull)
    r = CliRunner().invoke(wattctl, ["collect", "--once", "--source", "bogus"])
    assert r.exit_code == 2 and "Invalid value for '--source'" in r.output
    assert "'emulated'" in r.output and "'nvml'" in r.output and "site config" not in r.output


def test_a_bad_site_source_names_the_layer_that_set_it(monkeypatch, tmp_path):
    monkeypatch.setenv("WATTBATCH_CACHE_DIR", str(tmp_path / "cache"))
    site = tmp_path / "site.toml"
    site.write_text('[node]\ngpu_source = "nvm"\n')
    monkeypatch.setenv("WATTBATCH_SITE_CONFIG", str(site))
    r = CliRunner().invoke(wattctl, ["collect", "--once"])
    assert isinstance(r.exception, ConfigError)
    assert f"{site}: node.gpu_source = 'nvm': choose one of: emulated, nvml" in str(r.exception)


def test_a_source_registered_at_run_time_is_accepted(monkeypatch, tmp_path):
    """The choice is read when the command runs (the real-cluster test adds a fake source)."""
    from slurm_plugin.node import source as sources
    monkeypatch.setenv("WATTBATCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WATTBATCH_SITE_CONFIG", os.devnull)
    seen = []

    class Fake:
        def __init__(self, node, cfg):
            seen.append(node)
            raise RuntimeError("stop here")
    monkeypatch.setitem(sources.SOURCES, "fake", Fake)
    r = CliRunner().invoke(wattctl, ["collect", "--once", "--source", "fake", "--node", "g1"])
    assert seen == ["g1"] and "stop here" in str(r.exception)
