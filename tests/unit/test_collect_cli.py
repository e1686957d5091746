"""`wattctl collect` and the node hooks: a bad GPU source is blamed on where it came from;
one pass of the NVML source printed as JSON without InfluxDB."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_plugin import config
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
    assert f"{site}: node.gpu_source = 'nvm': choose one of: emulated, emulated-nvml, nvml" in str(r.exception)


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
                              "choose one of: emulated, emulated-nvml, nvml")
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


# --- one pass of the real NVML source, on a replayed GPU node ---------------------------------
DATA = Path(__file__).resolve().parents[1] / "data" / "nvml"


@pytest.fixture()
def replayed_node(monkeypatch, tmp_path):
    """``--source nvml`` as the site builds it (``source._nvml``), with pynvml, Slurm's job
    list and each process's job answered by a replayed MPS node (pass 15: three jobs)."""
    from slurm_plugin.node import source as sources
    from slurm_plugin.node.nvml_replay import NvmlReplay
    from slurm_plugin.telemetry import nvml

    def replay(doc=None):
        r = NvmlReplay(doc or json.loads((DATA / "h100-mps-3.json").read_text()))
        r.at = 15
        monkeypatch.setattr(nvml, "import_pynvml", lambda: r)
        monkeypatch.setattr(sources, "node_jobs", lambda cfg, node: r.node_jobs())
        monkeypatch.setattr(sources, "job_of_pid", r.job_of)
        return r
    monkeypatch.setenv("WATTBATCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WATTBATCH_SITE_CONFIG", os.devnull)
    monkeypatch.setenv("WATTBATCH_NODE_STATE_DIR", str(tmp_path / "state"))
    return replay


def no_influxdb(monkeypatch):
    from slurm_plugin.telemetry.influx import InfluxClient

    def refuse(*args, **kwargs):
        raise AssertionError("InfluxDB was asked")
    for name in ("from_config", "write", "write_lines", "query"):
        monkeypatch.setattr(InfluxClient, name, refuse)


def test_once_json_prints_one_nvml_pass_without_influxdb(replayed_node, monkeypatch, tmp_path):
    replayed_node()
    no_influxdb(monkeypatch)
    r = CliRunner().invoke(wattctl, ["collect", "--once", "--source", "nvml", "--json",
                                     "--node", "n1"])
    assert r.exit_code == 0, r.output
    (reading,) = json.loads(r.stdout)
    assert reading["node"] == "n1" and reading["model"] == "H100-80GB-HBM3"
    assert reading["power_w"] > 72.5 and reading["degraded"] == {}
    assert [(x["job_id"], x["shares"], x["app"]) for x in reading["residents"]] == [
        ("101", 33, "lstm"), ("102", 33, "resnet18"), ("103", 33, "transformer")]
    assert sum(x["util_pct"] for x in reading["residents"]) > 0
    assert not (tmp_path / "state" / "ledger").exists()        # nothing written, not even here


def test_once_json_gives_null_and_why_for_a_reading_the_gpu_cannot_give(replayed_node,
                                                                         monkeypatch):
    doc = json.loads((DATA / "h100-mps-3.json").read_text())
    doc["passes"][15]["gpus"][0]["nvmlDeviceGetMemoryInfo"] = {"error": "NVML_ERROR_NOT_SUPPORTED"}
    replayed_node(doc)
    no_influxdb(monkeypatch)
    r = CliRunner().invoke(wattctl, ["collect", "--once", "--source", "nvml", "--json",
                                     "--node", "n1"])
    assert r.exit_code == 0, r.output

    def no_nan(text):
        raise AssertionError(f"{text} in the JSON")
    (reading,) = json.loads(r.stdout, parse_constant=no_nan)
    assert reading["mem_used_mib"] is None and reading["power_w"] > 0
    assert list(reading["degraded"]) == ["mem_used_mib"]
    assert "nvmlDeviceGetMemoryInfo on GPU 0: Not Supported" in reading["degraded"]["mem_used_mib"]
    assert "readings degraded: GPU 0 mem_used_mib" in r.stderr


def test_once_without_json_still_writes_influxdb_and_the_ledger(replayed_node, monkeypatch,
                                                                tmp_path):
    from slurm_plugin.telemetry.influx import InfluxClient

    class Client:
        points: list = []
        def write(self, points): self.points.extend(points)
        def write_lines(self, lines): return 0
        def query(self, q): return []
    monkeypatch.setattr(InfluxClient, "from_config", classmethod(lambda cls, cfg: Client()))
    replayed_node()
    r = CliRunner().invoke(wattctl, ["collect", "--once", "--source", "nvml", "--node", "n1"])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("n1 gpu0: ") and "cap 700 W" in r.stdout
    assert [p.tags["gpu"] for p in Client.points] == ["0"]
    assert (tmp_path / "state" / "ledger" / "_gpus.json").exists()


def test_the_site_nvml_source_asks_slurm_once_for_caps_and_residents(replayed_node,
                                                                      monkeypatch):
    from slurm_plugin.node import source as sources
    replay = replayed_node()
    asked = []
    monkeypatch.setattr(sources, "node_jobs",
                        lambda cfg, node: asked.append(node) or replay.node_jobs())
    src = sources.make_source("nvml", "n1", config.load())
    for _ in range(3):
        (reading,) = src.read()
    assert asked == ["n1"] and {r.app for r in reading.residents} == {"lstm", "resnet18",
                                                                       "transformer"}
