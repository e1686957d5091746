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
