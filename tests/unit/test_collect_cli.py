"""`wattctl collect` and the node hooks: a bad GPU source is blamed on where it came from."""

from __future__ import annotations

import os

import pytest
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


def test_make_source_names_where_the_value_came_from():
    from slurm_plugin.node.source import make_source
    with pytest.raises(ConfigError) as exc:
        make_source("nvm", "g1", None, "$WATTBATCH_NODE_GPU_SOURCE")
    assert str(exc.value) == ("config: $WATTBATCH_NODE_GPU_SOURCE: node.gpu_source = 'nvm': "
                              "choose one of: emulated, nvml")
    with pytest.raises(ConfigError, match="^config: site config: node.gpu_source = 'nvm'"):
        make_source("nvm", "g1", None)      # a caller that does not know


def test_a_bad_source_from_the_environment_is_blamed_on_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("WATTBATCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WATTBATCH_SITE_CONFIG", os.devnull)
    monkeypatch.setenv("WATTBATCH_NODE_GPU_SOURCE", "nvm")
    r = CliRunner().invoke(wattctl, ["collect", "--once"])
    assert isinstance(r.exception, ConfigError)
    assert "config: $WATTBATCH_NODE_GPU_SOURCE: node.gpu_source = 'nvm'" in str(r.exception)


def test_the_prolog_blames_a_bad_source_on_where_it_came_from(tmp_path):
    from slurm_plugin.node.prolog import prolog
    site = tmp_path / "site.toml"
    site.write_text('[node]\ngpu_source = "nvm"\n')
    env = {"SLURM_JOB_ID": "77", "SLURM_JOB_GPUS": "0", "WATTBATCH_SITE_CONFIG": str(site),
           "WATTBATCH_NODE_STATE_DIR": str(tmp_path / "state")}
    with pytest.raises(ConfigError, match=f"^config: {site}: node.gpu_source = 'nvm'"):
        prolog(env)
    with pytest.raises(ConfigError, match="^config: \\$WATTBATCH_NODE_GPU_SOURCE: "):
        prolog({**env, "WATTBATCH_NODE_GPU_SOURCE": "nvm"})
