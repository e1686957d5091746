"""Local cluster: spec resolution and rendered config files (no daemons started)."""

from __future__ import annotations

import tomllib

import pytest

from slurm_plugin import config
from slurm_plugin.errors import ConfigError
from slurm_plugin.localcluster.render import node_gres, render, render_all
from slurm_plugin.localcluster.spec import DEFAULT_PORTS, resolve


def conf_lines(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines()
                if line and not line.startswith("#") and "=" in line)


def test_defaults_and_environment(tmp_path):
    spec = resolve(tmp_path, environ={"WATTBATCH_LOCALCLUSTER_PORT_INFLUX": "19999"})
    assert spec.state_dir == tmp_path and spec.ports["influx"] == 19999
    assert spec.ports["slurmctld"] == DEFAULT_PORTS["slurmctld"]
    assert spec.node_names == ("gpu1", "gpu2", "gpu3", "gpu4")
    assert resolve(environ={"WATTBATCH_LOCALCLUSTER_DIR": str(tmp_path)}).state_dir == tmp_path


def test_saved_spec_wins_over_environment(tmp_path):
    spec = resolve(tmp_path, ports={"mariadb": "23306"})
    spec.save()
    again = resolve(tmp_path, environ={"WATTBATCH_LOCALCLUSTER_PORT_MARIADB": "1234"})
    assert again.ports["mariadb"] == 23306


@pytest.mark.parametrize("ports, match", [({"mariadb": "80"}, "between 1024"),
                                          ({"nope": "2000"}, "unknown port name"),
                                          ({"influx": "x"}, "between 1024")])
def test_bad_ports_are_rejected(tmp_path, ports, match):
    with pytest.raises(ConfigError, match=match):
        resolve(tmp_path, ports=ports, environ={})


def test_slurm_conf_has_typed_gres_and_fast_settings(tmp_path):
    spec = resolve(tmp_path, environ={})
    files = render_all(spec, "pw")
    conf = conf_lines(files["slurm.conf"])
    assert conf["GresTypes"] == "gpu,shard"
    assert conf["AccountingStorageTRES"] == "gres/gpu,gres/shard"
    assert conf["SlurmctldPort"] == "16817" and conf["KillWait"] == "5"
    node_line = next(ln for ln in files["slurm.conf"].splitlines()
                     if ln.startswith("NodeName="))
    assert "Port=[16821-16824]" in node_line
    assert ("Gres=gpu:g0:1,gpu:g1:1,gpu:g2:1,gpu:g3:1,"
            "shard:g0:4,shard:g1:4,shard:g2:4,shard:g3:4") in node_line
    assert f"SlurmdSpoolDir={tmp_path}/slurmd/%n" in files["slurm.conf"]
    gres = [ln for ln in files["gres.conf"].splitlines() if ln.startswith("NodeName")]
    assert len(gres) == 8 and f"File={tmp_path}/dev/nvidia3" in gres[-1]
    assert "StoragePass=pw" in files["slurmdbd.conf"]
    assert f'bind-address = "127.0.0.1:{spec.ports["influx"]}"' in files["influxdb.conf"]


def test_mps_replaces_shard(tmp_path):
    spec = resolve(tmp_path, share_gres="mps", environ={})
    assert node_gres(spec).endswith("mps:g3:100") and "shard" not in node_gres(spec)
    assert "GresTypes=gpu,mps\n" in render_all(spec, "pw")["slurm.conf"]


def test_site_toml_is_a_valid_site_config(tmp_path):
    spec = resolve(tmp_path, environ={})
    site = tmp_path / "site.toml"
    site.write_text(render("site.toml.j2", spec, influx_user="wattbatch",
                           influx_password='p"w\\'))
    cfg = config.load(site, environ={})
    assert cfg["slurm.conf"] == str(spec.slurm_conf)
    assert cfg["influx.url"] == spec.influx_url
    assert (cfg["influx.username"], cfg["influx.password"]) == ("wattbatch", 'p"w\\')
    assert cfg["reconcile.state_dir"] == str(tmp_path / "reconcile")
    assert tomllib.loads(site.read_text())["slurm"]["share_gres"] == "shard"
    env = render("env.sh.j2", spec)
    assert f"export SLURM_CONF={spec.slurm_conf}" in env


def test_topology_conf_has_leaf_switches_of_two_nodes_that_the_snapshot_reads(tmp_path,
                                                                              monkeypatch):
    from slurm_plugin.model import Node
    from slurm_plugin.slurm.topology import leaf_switches, switches, with_switches
    files = render_all(resolve(tmp_path, environ={}), "pw")
    assert conf_lines(files["slurm.conf"])["TopologyPlugin"] == "topology/tree"
    assert leaf_switches(files["topology.conf"]) == {"gpu1": "s0", "gpu2": "s0",
                                                     "gpu3": "s1", "gpu4": "s1"}
    (tmp_path / "slurm.conf").write_text(files["slurm.conf"])
    (tmp_path / "topology.conf").write_text(files["topology.conf"])
    monkeypatch.delenv("SLURM_CONF", raising=False)
    found = switches(str(tmp_path / "slurm.conf"))
    nodes = with_switches((Node("gpu3", features=("v100",)), Node("cpu1")), found)
    assert nodes == (Node("gpu3", features=("v100", "switch=s1")), Node("cpu1"))
    assert switches(str(tmp_path / "elsewhere" / "slurm.conf")) == {}
    assert leaf_switches("SwitchName=x Nodes=gpu[3-1]\nnonsense\nSwitchName=y") == {}


def test_emulated_gpu_models_name_their_gres_types_and_features(tmp_path):
    spec = resolve(tmp_path, gpu_model="A100:1,H100:3", environ={})
    assert [m for _, _, m in spec.node_groups] == ["A100-SXM4-80GB", "H100-80GB-HBM3"]
    files = render_all(spec, "pw")
    nodes = [ln for ln in files["slurm.conf"].splitlines() if ln.startswith("NodeName")]
    assert [ln.split()[0] for ln in nodes] == ["NodeName=gpu1", "NodeName=gpu[2-4]"]
    assert "Port=16821 " in nodes[0] and "Port=[16822-16824]" in nodes[1]
    assert "Feature=a100 " in nodes[0] and "gpu:h100_80gb_hbm3_g3:1" in nodes[1]
    gres = [ln for ln in files["gres.conf"].splitlines() if ln.startswith("NodeName=gpu[2-4]")]
    assert "Name=shard Type=h100_80gb_hbm3_g0 Count=4" in gres[1]
    site = tomllib.loads(render("site.toml.j2", spec, influx_user="u", influx_password="p"))
    assert site["node"]["gpu_model"] == "A100-SXM4-80GB"
    # what Slurm will list is read back as each GPU's model
    from slurm_plugin.slurm.parse import parse_nodes
    from tests.unit.test_slurm_parse import META_22_05
    (node,) = parse_nodes({"meta": META_22_05, "nodes": [
        {"name": "gpu2", "state": "idle", "gres": nodes[1].split("Gres=")[1].split()[0]}]})
    assert {g.model for g in node.gpus} == {"H100-80GB-HBM3"}
    assert [g.shards_total for g in node.gpus] == [4, 4, 4, 4]


@pytest.mark.parametrize("text, says", [
    ("H999", "H999"), ("A100:2,H100", "MODEL:NODES"), ("A100:0,H100:4", "positive"),
    ("A100:2,H100:3", "hold 5 nodes"),
])
def test_a_bad_gpu_model_is_named(tmp_path, text, says):
    with pytest.raises(ConfigError, match=says):
        resolve(tmp_path, gpu_model=text, environ={})


def test_the_default_cluster_keeps_its_v100_types(tmp_path):
    files = render_all(resolve(tmp_path, environ={}), "pw")
    assert "Feature=v100 Gres=gpu:g0:1," in files["slurm.conf"]
    assert "gpu_model" not in render("site.toml.j2", resolve(tmp_path, environ={}),
                                     influx_user="u", influx_password="p")


def test_the_gpu_source_is_chosen_remembered_and_rendered(tmp_path):
    assert resolve(tmp_path, environ={}).gpu_source == "emulated"
    env = {"WATTBATCH_LOCALCLUSTER_GPU_SOURCE": "emulated-nvml"}
    assert resolve(tmp_path, environ=env).gpu_source == "emulated-nvml"
    spec = resolve(tmp_path, gpu_source="emulated-nvml", environ={})
    spec.save()
    assert resolve(tmp_path, environ={}).gpu_source == "emulated-nvml"
    site = tmp_path / "site.toml"
    site.write_text(render("site.toml.j2", spec, influx_user="u", influx_password="p"))
    cfg = config.load(site, environ={})
    assert (cfg["node.gpu_source"], cfg["node.cap_refresh_s"]) == ("emulated-nvml", 2)
    from slurm_plugin.node.source import SOURCES
    assert cfg["node.gpu_source"] in SOURCES
    plain = render("site.toml.j2", resolve(tmp_path / "plain", environ={}), influx_user="u",
                   influx_password="p")
    assert tomllib.loads(plain)["node"]["gpu_source"] == "emulated"
    assert "cap_refresh_s" not in plain


def test_a_bad_gpu_source_is_named(tmp_path):
    with pytest.raises(ConfigError, match="gpu_source = 'nvml': choose emulated or "
                                          "emulated-nvml"):
        resolve(tmp_path, gpu_source="nvml", environ={})


def test_up_passes_the_gpu_source_on_and_into_a_debian_root(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from slurm_plugin import localcluster
    from slurm_plugin.commands import localcluster as command
    inner, specs = [], []

    def up(spec, **kw):
        specs.append(spec)
        raise RuntimeError("no daemons in the unit tier")
    monkeypatch.setattr(command, "_inner", lambda release, argv, **kw: inner.append(argv) or 0)
    monkeypatch.setattr(localcluster, "up", up)
    done = CliRunner().invoke(command.group, ["up", "--slurm", "24.11", "--no-install",
                                              "--gpu-source", "emulated-nvml"])
    assert done.exit_code == 0, done.output
    assert "--gpu-source=emulated-nvml" in inner[0]
    CliRunner().invoke(command.group, ["up", "--state-dir", str(tmp_path), "--no-install",
                                       "--gpu-source", "emulated-nvml"])
    assert [s.gpu_source for s in specs] == ["emulated-nvml"]
    bad = CliRunner().invoke(command.group, ["up", "--gpu-source", "nvml"])
    assert bad.exit_code == 2 and "emulated-nvml" in bad.output


def test_a_held_port_is_refused_after_a_wait_and_one_freed_meanwhile_is_taken(tmp_path,
                                                                             monkeypatch):
    """``up`` refuses a port another program holds, naming it; one whose holder goes away
    within the wait (a killed slurmctld's helper) is used. Only that port is looked at: a
    local cluster running beside the test holds the default ones."""
    import socket
    import threading

    from slurm_plugin.localcluster import cluster
    held = socket.socket()
    held.bind(("0.0.0.0", 0))
    held.listen()
    port = held.getsockname()[1]
    spec = resolve(tmp_path, ports={"slurmctld": str(port)}, environ={})
    monkeypatch.setattr(cluster, "_ports_of", lambda spec: {"slurmctld": [port]})
    monkeypatch.setattr(cluster, "status_daemons", lambda spec: {})
    with pytest.raises(ConfigError, match=f"port of slurmctld = {port}: in use"):
        cluster._check_ports(spec, wait_s=0.3)
    threading.Timer(0.3, held.close).start()
    cluster._check_ports(spec, wait_s=5.0)       # freed while it waited: no error
