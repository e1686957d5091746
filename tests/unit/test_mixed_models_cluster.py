"""Clusters of several GPU models: the ``[[cluster.groups]]`` file form, ``--gpu-type
MODEL:NODES,...``, a sweep's clusters; every bad value names the file, the key and the value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_plugin.cli import group
from slurm_plugin.errors import ConfigError
from slurm_plugin.sim.cluster import ClusterSpec, load_cluster, parse_groups

SMALL = ["--trace", str(Path(__file__).parents[1] / "sim" / "golden" / "small_trace.csv"),
         "--trace-format", "canonical"]

TWO_GROUPS = """
[cluster]
gpus_per_node = 4
shards_per_gpu = 2
[[cluster.groups]]
nodes = 2
gpu_type = "V100"
[[cluster.groups]]
nodes = 3
gpu_type = "A100"
"""


def _file(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "cluster.toml"
    p.write_text(text)
    return p


def test_groups_give_the_nodes_in_order_and_the_other_keys_hold_for_all(tmp_path):
    spec = load_cluster(_file(tmp_path, TWO_GROUPS))
    assert spec.groups == (("V100", 2), ("A100", 3))
    assert spec.node_groups == spec.groups
    assert (spec.nodes, spec.gpus_per_node, spec.shards_per_gpu) == (5, 4, 2)
    assert spec.gpu_count == 20
    assert spec.gpu_type == "V100:2,A100:3"         # the label --gpu-type takes
    assert spec.largest_model_nodes == 3
    assert spec.model_nodes == (("V100", 2), ("A100", 3))


def test_one_group_is_the_flat_form(tmp_path):
    one = load_cluster(_file(tmp_path, "[cluster]\n[[cluster.groups]]\nnodes = 3\n"
                                       "gpu_type = \"H100\"\n"))
    assert one == ClusterSpec(nodes=3, gpu_type="H100")
    assert one.groups == () and one.node_groups == (("H100", 3),)


def test_the_flat_form_is_unchanged(tmp_path):
    spec = load_cluster(_file(tmp_path, "[cluster]\nnodes = 4\ngpus_per_node = 2\n"
                                        "gpu_type = \"A100\"\n"))
    assert spec == ClusterSpec(nodes=4, gpus_per_node=2, gpu_type="A100")
    assert spec.groups == () and spec.node_groups == (("A100", 4),)
    assert spec.largest_model_nodes == 4


def test_groups_of_one_catalogued_model_count_as_one_model():
    spec = ClusterSpec(groups=(("V100", 2), ("A100", 1), ("Tesla V100-SXM2-32GB", 3)))
    assert spec.model_nodes == (("V100", 5), ("A100", 1))
    assert spec.largest_model_nodes == 5


@pytest.mark.parametrize("body, key, value, fix", [
    ('[[cluster.groups]]\nnodes = 1\ngpu_type = "V100"\n[[cluster.groups]]\nnodes = 2\n'
     'gpu_type = "H300"\n', "cluster.groups[1].gpu_type", "'H300'", "close names: H200"),
    ('[[cluster.groups]]\nnodes = 0\ngpu_type = "V100"\n', "cluster.groups[0].nodes", "0",
     "must be at least 1"),
    ('[[cluster.groups]]\nnodes = 1.5\ngpu_type = "V100"\n', "cluster.groups[0].nodes", "1.5",
     "expected an integer"),
    ('[[cluster.groups]]\nnodes = true\ngpu_type = "V100"\n', "cluster.groups[0].nodes", "True",
     "expected an integer"),
    ('[[cluster.groups]]\nnodes = 2\ngpu_type = 100\n', "cluster.groups[0].gpu_type", "100",
     "expected a string"),
    ('[[cluster.groups]]\nnodes = 2\n', "cluster.groups[0].gpu_type", "None",
     "add gpu_type to this group"),
    ('[[cluster.groups]]\nnodes = 2\ngpu_type = "A100"\ngpus_per_node = 4\n',
     "cluster.groups[0].gpus_per_node", "4",
     "gpus_per_node is the cluster's, for every group: set it beside the groups"),
    ('[[cluster.groups]]\nnodes = 2\ngpu_type = "A100"\nram = 4\n',
     "cluster.groups[0].ram", "4", "valid keys: nodes, gpu_type"),
    ('nodes = 4\n[[cluster.groups]]\nnodes = 2\ngpu_type = "A100"\n', "cluster.nodes", "4",
     "set nodes in each [[cluster.groups]] table, not both"),
    ('gpu_type = "V100"\n[[cluster.groups]]\nnodes = 2\ngpu_type = "A100"\n',
     "cluster.gpu_type", "'V100'", "not both"),
    ("groups = []\n", "cluster.groups", "[]", "expected [[cluster.groups]] tables"),
    ('groups = ["V100"]\n', "cluster.groups", "['V100']", "expected [[cluster.groups]] tables"),
])
def test_bad_groups_name_file_key_and_value(tmp_path, body, key, value, fix):
    p = _file(tmp_path, "[cluster]\ngpus_per_node = 4\n" + body)
    with pytest.raises(ConfigError) as err:
        load_cluster(p)
    msg = str(err.value)
    assert str(p) in msg and f"{key} = {value}:" in msg and fix in msg, msg


def test_a_groups_label_as_gpu_type_in_the_file_is_no_model(tmp_path):
    p = _file(tmp_path, '[cluster]\ngpu_type = "V100:2,A100:2"\n')
    with pytest.raises(ConfigError, match=r"cluster.gpu_type = 'V100:2,A100:2': not a catalogued"):
        load_cluster(p)


@pytest.mark.parametrize("text, groups", [("V100", ()), ("V100:16,A100:32",
                                                        (("V100", 16), ("A100", 32))),
                                          (" h100 : 2 , A100:1 ", (("h100", 2), ("A100", 1)))])
def test_parse_groups(text, groups):
    assert parse_groups(text) == groups


@pytest.mark.parametrize("text", ["V100:", "V100:0", "V100:x", ":4", "V100:2,A100", "V100:-1"])
def test_parse_groups_refuses_what_is_not_model_colon_nodes(text):
    with pytest.raises(ValueError, match="is not MODEL:NODES"):
        parse_groups(text)


def _simulate(*args):
    return CliRunner().invoke(group, ["simulate", *SMALL, *args])


def test_simulate_takes_groups_on_the_command_line_and_from_a_file(tmp_path):
    res = _simulate("--gpu-type", "V100:2,A100:3", "--gpus-per-node", "4",
                    "--policy", "slurm-default", "--json")
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert got["cluster"] == {"nodes": 5, "gpus_per_node": 4, "gpu_type": "V100:2,A100:3",
                              "groups": [{"gpu_type": "V100", "nodes": 2},
                                         {"gpu_type": "A100", "nodes": 3}]}
    res = _simulate("--cluster", str(_file(tmp_path, TWO_GROUPS)), "--policy", "slurm-default",
                    "--json")
    assert res.exit_code == 0, res.output
    from_file = json.loads(res.stdout)
    assert from_file["cluster"] == got["cluster"]
    # shards_per_gpu differs (2 in the file) but slurm-default shares nothing
    assert from_file["energy_kwh"] == got["energy_kwh"]


def test_a_single_model_run_reports_no_groups():
    res = _simulate("--gpu-type", "A100", "--nodes", "2", "--policy", "slurm-default", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["cluster"] == {"nodes": 2, "gpus_per_node": 8,
                                                 "gpu_type": "A100"}


@pytest.mark.parametrize("args, words", [
    (["--gpu-type", "V100:2,H300:1"], ["'--gpu-type'", "'H300'", "close names"]),
    (["--gpu-type", "V100:two"], ["'--gpu-type'", "'V100:two' is not MODEL:NODES"]),
    (["--gpu-type", "V100:2,A100:1", "--nodes", "3"], ["leave out --nodes"]),
])
def test_simulate_refuses_bad_groups(args, words):
    res = _simulate(*args, "--policy", "slurm-default")
    assert res.exit_code == 2, res.output
    for w in words:
        assert w in res.output, res.output


def test_a_job_larger_than_every_models_nodes_is_refused():
    # the small trace has an 8-GPU job: 2 nodes of 4 GPUs, of 12 in all, but each model has 1
    res = _simulate("--gpu-type", "V100:1,A100:1,H100:1", "--gpus-per-node", "4",
                    "--policy", "slurm-default")
    assert res.exit_code != 0
    assert "is larger than the cluster (at most 1 nodes x 4 GPUs of one model: " \
           "V100:1,A100:1,H100:1); give a larger cluster (--gpu-type MODEL:NODES,...)" \
           in str(res.exception), res.output


def test_a_sweep_runs_clusters_of_several_models(tmp_path):
    from slurm_plugin.sim.sweep import load_sweep
    from slurm_plugin.sim.sweep_run import run_cell
    grid = tmp_path / "grid.toml"
    grid.write_text(f'[sweep]\noutput = "out"\ntraces = ["{SMALL[1]}"]\n'
                    f'trace_format = "canonical"\npolicies = ["slurm-default"]\n'
                    "[[sweep.clusters]]\ngpus_per_node = 4\n"
                    '[[sweep.clusters.groups]]\nnodes = 2\ngpu_type = "V100"\n'
                    '[[sweep.clusters.groups]]\nnodes = 2\ngpu_type = "H100"\n')
    sweep = load_sweep(grid)
    line = json.loads(run_cell(sweep, 0).read_text())
    assert line["result"]["cluster"]["gpu_type"] == "V100:2,H100:2"
    assert line["result"]["jobs_finished"] == 16
    bad = tmp_path / "bad.toml"
    bad.write_text(grid.read_text().replace('"H100"', '"H300"'))
    with pytest.raises(ConfigError, match=r"sweep.clusters.groups\[1\].gpu_type = 'H300'"):
        load_sweep(bad)
