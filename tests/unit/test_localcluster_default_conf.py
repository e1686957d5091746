"""The local cluster's slurm.conf at Slurm's default path: claimed only when free, released
only when still ours."""

from __future__ import annotations

import os

from slurm_plugin.localcluster.default_conf import claim, holder, release


def test_claimed_when_free_and_released_on_down(tmp_path):
    ours, default = tmp_path / "state" / "slurm.conf", tmp_path / "etc" / "slurm" / "slurm.conf"
    ours.parent.mkdir()
    ours.write_text("ClusterName=x\n")
    assert claim(ours, default) == f"{default} -> this cluster"
    assert os.readlink(default) == str(ours) and holder(ours, default) == "this cluster"
    assert claim(ours, default) == f"{default} -> this cluster"        # up twice
    assert release(ours, default) and not default.exists() and holder(ours, default) == "none"
    assert not release(ours, default)


def test_a_foreign_config_is_never_touched(tmp_path):
    ours, default = tmp_path / "slurm.conf", tmp_path / "default.conf"
    ours.write_text("ours\n")
    default.write_text("ClusterName=production\n")
    said = claim(ours, default)
    assert said.startswith(f"{default} left alone (a file, not this cluster's)")
    assert f"SLURM_CONF={ours}" in said and default.read_text() == "ClusterName=production\n"
    assert not release(ours, default) and default.read_text() == "ClusterName=production\n"
    other = tmp_path / "other.conf"
    other.write_text("other\n")
    default.unlink()
    default.symlink_to(other)                          # another local cluster's, alive
    assert "left alone (a link to" in claim(ours, default)
    assert not release(ours, default) and os.readlink(default) == str(other)


def test_a_dangling_link_of_a_removed_cluster_is_replaced(tmp_path):
    ours, default = tmp_path / "slurm.conf", tmp_path / "default.conf"
    ours.write_text("ours\n")
    default.symlink_to(tmp_path / "gone" / "slurm.conf")
    assert claim(ours, default) == f"{default} -> this cluster"
    assert os.readlink(default) == str(ours)
