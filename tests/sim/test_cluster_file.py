"""The ``--cluster FILE.toml`` reader: every value checked, errors name the file, key and value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_plugin.cli import group
from slurm_plugin.errors import ConfigError
from slurm_plugin.sim.cluster import load_cluster

SMALL = ["--trace", str(Path(__file__).parent / "golden" / "small_trace.csv"),
         "--trace-format", "canonical"]


def _file(tmp_path, body: str) -> Path:
    p = tmp_path / "cluster.toml"
    p.write_text(f"[cluster]\nnodes = 2\ngpus_per_node = 4\n{body}\n")
    return p


@pytest.mark.parametrize("body, key", [("node_base_power_w = nan", "cluster.node_base_power_w"),
                                       ("suspended_power_w = -nan", "cluster.suspended_power_w"),
                                       ("deferrable_share = nan", "cluster.deferrable_share"),
                                       ("slack_s = inf", "cluster.slack_s"),
                                       ("restart_cost_s = inf", "cluster.restart_cost_s")])
def test_nan_and_inf_are_refused_naming_file_key_and_value(tmp_path, body, key):
    # every comparison with NaN is false: a range check alone let nan through
    p = _file(tmp_path, body)
    with pytest.raises(ConfigError, match="must be a finite number") as err:
        load_cluster(p)
    assert str(p) in str(err.value) and f"{key} = " in str(err.value)


def test_simulate_json_never_holds_nan(tmp_path):
    res = CliRunner().invoke(group, ["simulate", *SMALL, "--cluster",
                                     str(_file(tmp_path, "node_base_power_w = nan")),
                                     "--policy", "slurm-default", "--json"])
    assert isinstance(res.exception, ConfigError) and res.stdout == ""
    assert "cluster.node_base_power_w = nan: must be a finite number" in str(res.exception)
    res = CliRunner().invoke(group, ["simulate", *SMALL, "--cluster",
                                     str(_file(tmp_path, "node_base_power_w = 300.0")),
                                     "--policy", "slurm-default", "--json"])
    assert res.exit_code == 0, res.output
    json.loads(res.stdout, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))


@pytest.mark.parametrize("body, fix", [("keep_idle_nodes = -1", "must be at least 0"),
                                       ("keep_idle_nodes = 1.5", "expected an integer"),
                                       ("keep_idle_nodes = true", "expected an integer")])
def test_kept_idle_nodes_must_be_a_count(tmp_path, body, fix):
    p = _file(tmp_path, body)
    with pytest.raises(ConfigError, match=fix) as err:
        load_cluster(p)
    assert "cluster.keep_idle_nodes" in str(err.value)


def test_kept_idle_nodes_read_from_the_file(tmp_path):
    assert load_cluster(_file(tmp_path, "keep_idle_nodes = 2")).keep_idle_nodes == 2
