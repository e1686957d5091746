"""Debian roots of the local cluster: the pure parts (no debootstrap, no mounts)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from slurm_plugin.errors import ConfigError
from slurm_plugin.localcluster import debroot, procs
from slurm_plugin.localcluster.install import parse_version
from slurm_plugin.localcluster.render import render_all
from slurm_plugin.localcluster.spec import DEFAULT_PORTS, resolve

HOST_SOURCES = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian/
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


# --- mirror ----------------------------------------------------------------------------------
def test_deb822_main_archive_not_security():
    assert debroot.mirrors_from_deb822(HOST_SOURCES) == ["http://deb.debian.org/debian"]


def test_deb822_skips_disabled_source_and_third_party_stanzas():
    text = """\
Types: deb-src
URIs: http://src.example/debian
Suites: bookworm
Components: main

Types: deb
URIs: http://off.example/debian
Suites: bookworm
Components: main
Enabled: no

Types: deb
URIs: https://deb.nodesource.com/node_20.x
Suites: nodistro
Components: main

Types: deb
URIs: http://contrib-only.example/debian
Suites: trixie
Components: contrib non-free

Types: deb deb-src
URIs: http://mirror.example/debian
  http://second.example/debian
Suites: trixie
Components: main contrib
"""
    assert debroot.mirrors_from_deb822(text) == ["http://mirror.example/debian",
                                                 "http://second.example/debian"]


def test_one_line_sources():
    text = """\
# deb http://commented.example/debian bookworm main
deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://ftp.de.debian.org/debian/ bookworm main contrib
deb http://security.debian.org/debian-security bookworm-security main
deb-src http://ftp.de.debian.org/debian bookworm main
"""
    assert debroot.mirrors_from_list(text) == ["http://ftp.de.debian.org/debian"]


def test_host_mirror_files_and_override(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(HOST_SOURCES)
    (tmp_path / "sources.list.d" / "google.list").write_text(
        "deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n")
    assert debroot.host_mirror({}, tmp_path) == "http://deb.debian.org/debian"
    assert debroot.host_mirror({"WATTBATCH_DEBIAN_MIRROR": "http://m.example/debian/"},
                               tmp_path) == "http://m.example/debian"
    (tmp_path / "sources.list").write_text("deb http://list.example/debian trixie main\n")
    assert debroot.host_mirror({}, tmp_path) == "http://list.example/debian"


def test_no_mirror_says_how_to_set_one(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    with pytest.raises(ConfigError, match="WATTBATCH_DEBIAN_MIRROR"):
        debroot.host_mirror({}, tmp_path)


# --- releases --------------------------------------------------------------------------------
def test_release_mapping_and_roots_dir(tmp_path):
    assert debroot.suite_of("24.11") == "trixie" and debroot.suite_of("26.05") == "sid"
    assert debroot.CHOICES[0] == "system"
    assert debroot.root_path("24.11", {}) == Path("/var/cache/wattbatch/roots/trixie")
    assert debroot.root_path("26.05", {"WATTBATCH_ROOTS_DIR": str(tmp_path)}) == tmp_path / "sid"
    with pytest.raises(ConfigError, match="choose one of system, 24.11, 26.05"):
        debroot.suite_of("23.11")
    with pytest.raises(ConfigError):
        debroot.root_path("system", {})


def _all_ports(ports: dict[str, int]) -> set[int]:
    used = set(ports.values())
    return used | {ports["slurmd"] + i for i in range(4)}


def test_each_release_has_its_own_ports_and_state_dir():
    host = _all_ports(dict(DEFAULT_PORTS))
    seen = [host]
    for release in debroot.RELEASES:
        ports = _all_ports(debroot.ports_of(release))
        assert all(not ports & other for other in seen), release
        seen.append(ports)
    shifted = debroot.ports_of("24.11", {"WATTBATCH_ROOT_PORT_OFFSET": "1000"})
    assert shifted["slurmctld"] == DEFAULT_PORTS["slurmctld"] + 1100
    with pytest.raises(ConfigError, match="between 0 and 40000"):
        debroot.ports_of("24.11", {"WATTBATCH_ROOT_PORT_OFFSET": "x"})
    dirs = {debroot.state_dir_in_root(r) for r in debroot.RELEASES}
    assert len(dirs) == 2 and "/var/tmp/wattbatch-localcluster" not in dirs


def test_root_env_resolves_to_the_release_ports(tmp_path):
    env = debroot.root_env("26.05", {})
    assert env["WATTBATCH_LOCALCLUSTER_DIR"] == "/var/tmp/wattbatch-localcluster-26.05"
    # a fresh state dir (a saved cluster.json there would win over the environment)
    spec = resolve(environ={**env, "WATTBATCH_LOCALCLUSTER_DIR": str(tmp_path)})
    assert spec.ports == debroot.ports_of("26.05") != dict(DEFAULT_PORTS)


# --- environment -----------------------------------------------------------------------------
def test_only_clean_variables_pass():
    caller = {"PATH": "/host/.venv/bin:/usr/bin", "HOME": "/root", "LANG": "en_US.UTF-8",
              "TERM": "xterm", "CI": "1", "PIP_INDEX_URL": "https://idx/simple",
              "https_proxy": "http://proxy:3128", "SSL_CERT_FILE": "/etc/ssl/c.pem",
              "WATTBATCH_KEEP_CLUSTER": "1", "WATTBATCH_TEST_SLURM": "system",
              "WATTBATCH_SITE_CONFIG": "/var/tmp/wattbatch-localcluster/site.toml",
              "WATTBATCH_LOCALCLUSTER_PORT_SLURMCTLD": "16817",
              "WATTBATCH_LOCALCLUSTER_DIR": "/var/tmp/wattbatch-localcluster",
              "SLURM_CONF": "/var/tmp/wattbatch-localcluster/etc/slurm.conf",
              "PYTHONPATH": "/host", "LD_PRELOAD": "x.so", "VIRTUAL_ENV": "/host/.venv",
              "WATTBATCH_ROOT_PORT_OFFSET": "1000", "SOME_TOKEN": "secret"}
    passed = debroot.passed_env(caller)
    assert set(passed) == {"PATH", "HOME", "LANG", "TERM", "CI", "PIP_INDEX_URL",
                           "https_proxy", "SSL_CERT_FILE", "WATTBATCH_KEEP_CLUSTER",
                           "WATTBATCH_TEST_SLURM"}
    env = debroot.root_env("24.11", caller, {"SLURM_CONF": "/in/root/slurm.conf"})
    assert env["PATH"].split(":")[0] == "/opt/wattbatch/src/.venv/bin"
    assert "/host/.venv/bin" not in env["PATH"]
    assert env["SLURM_CONF"] == "/in/root/slurm.conf"
    assert env["WATTBATCH_LOCALCLUSTER_DIR"] == "/var/tmp/wattbatch-localcluster-24.11"
    assert env["WATTBATCH_LOCALCLUSTER_PORT_SLURMCTLD"] == str(DEFAULT_PORTS["slurmctld"] + 1100)
    assert "WATTBATCH_SITE_CONFIG" not in env and "PYTHONPATH" not in env
    assert "SOME_TOKEN" not in env and "LD_PRELOAD" not in env
    assert debroot.root_env("24.11", {})["HOME"] == "/root"


def test_chroot_argv_clears_the_environment():
    argv = debroot.chroot_argv(Path("/r/trixie"), {"B": "2", "A": "1"}, ["squeue", "--json"])
    assert argv == ["chroot", "/r/trixie", "/usr/bin/env", "-i", "--chdir=/opt/wattbatch/src",
                    "A=1", "B=2", "squeue", "--json"]


# --- mounts ----------------------------------------------------------------------------------
MOUNTINFO = """\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw
90 22 0:40 / /r/trixie/proc rw - proc proc rw
91 22 0:20 / /r/trixie/sys rw master:7 - sysfs sysfs rw
92 91 0:25 / /r/trixie/sys/fs/cgroup rw master:8 - tmpfs tmpfs rw
93 22 0:5 / /r/trixie/dev rw master:2 - devtmpfs udev rw
94 93 0:24 / /r/trixie/dev/pts rw master:3 - devpts devpts rw
95 22 0:41 / /r/trixie2/proc rw - proc proc rw
96 22 0:42 / /r/with\\040space/proc rw - proc proc rw
"""


def test_parse_mountinfo_and_mounts_under():
    points = debroot.parse_mountinfo(MOUNTINFO)
    assert points[0] == "/" and "/r/with space/proc" in points
    assert debroot.mounts_under(points, Path("/r/trixie")) == [
        "/r/trixie/proc", "/r/trixie/sys", "/r/trixie/sys/fs/cgroup", "/r/trixie/dev",
        "/r/trixie/dev/pts"]


def test_unmount_order_reverse_of_recorded_then_leftovers_deepest_first():
    current = debroot.parse_mountinfo(MOUNTINFO)
    recorded = ["/r/trixie/proc", "/r/trixie/sys", "/r/trixie/dev", "/r/trixie/dev/pts",
                "/r/trixie/gone"]
    assert debroot.unmount_order(recorded, current, "/r/trixie") == [
        "/r/trixie/dev/pts", "/r/trixie/dev", "/r/trixie/sys", "/r/trixie/proc",
        "/r/trixie/sys/fs/cgroup"]
    # nothing recorded (a lost record file): everything under the root, children first
    order = debroot.unmount_order([], current, "/r/trixie")
    assert order.index("/r/trixie/dev/pts") < order.index("/r/trixie/dev")
    assert order.index("/r/trixie/sys/fs/cgroup") < order.index("/r/trixie/sys")
    assert "/r/trixie2/proc" not in order
    assert debroot.unmount_order(recorded, ["/", "/dev"], "/r/trixie") == []


def test_mount_plan_binds_are_slaves():
    plan = debroot.mount_plan(Path("/r/sid"))
    assert [t for t, _ in plan] == ["/r/sid/proc", "/r/sid/sys", "/r/sid/dev", "/r/sid/dev/pts"]
    steps = dict(plan)
    assert steps["/r/sid/proc"] == [["mount", "-t", "proc", "proc", "/r/sid/proc"]]
    assert steps["/r/sid/sys"][0] == ["mount", "--rbind", "/sys", "/r/sid/sys"]
    for target, argvs in plan[1:]:
        assert argvs[-1] == ["mount", "--make-rslave", target]


def test_mount_record_round_trip(tmp_path):
    root = tmp_path / "trixie"
    root.mkdir()
    assert debroot.read_record(root) == []
    debroot._write_record(root, [f"{root}/proc", f"{root}/sys"])
    assert debroot.read_record(root) == [f"{root}/proc", f"{root}/sys"]
    assert not (root / "trixie.mounts.json").exists()      # kept beside the root, not in it
    debroot._write_record(root, [])
    assert debroot.read_record(root) == [] and not list(tmp_path.glob("*.mounts.json"))
    (tmp_path / "trixie.mounts.json").write_text("{broken")
    assert debroot.read_record(root) == []


def test_same_root_tells_this_process_apart():
    assert procs.same_root(os.getpid())
    assert not procs.same_root(2 ** 22 + 7)      # no such process


# --- checkout copy ---------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_copy_checkout_tracks_and_prunes(tmp_path):
    src, root = tmp_path / "src", tmp_path / "root"
    src.mkdir()
    subprocess.run(["git", "init", "-q", str(src)], check=True)
    (src / ".gitignore").write_text(".venv/\n*.log\n")
    (src / "pyproject.toml").write_text('[project]\nname = "wattbatch"\n')
    (src / "pkg").mkdir()
    (src / "pkg" / "a.py").write_text("A = 1\n")
    (src / "pkg" / "b.py").write_text("B = 1\n")
    (src / "run.log").write_text("ignored\n")
    (src / ".venv").mkdir()
    (src / ".venv" / "python").write_text("host venv\n")
    subprocess.run(["git", "-C", str(src), "add", "pyproject.toml", "pkg/a.py"], check=True)
    assert debroot.find_checkout(src / "pkg") == src
    assert debroot.copy_checkout(src, root) == 4            # .gitignore, pyproject, a, b
    dest = root / "opt/wattbatch/src"
    assert (dest / "pkg/b.py").read_text() == "B = 1\n"     # untracked, not ignored: copied
    assert not (dest / "run.log").exists() and not (dest / ".venv").exists()
    (dest / ".venv").mkdir()
    (dest / ".venv" / "python").write_text("root venv\n")
    assert debroot.copy_checkout(src, root) == 0            # unchanged: nothing copied
    (src / "pkg" / "b.py").unlink()
    (src / "pkg" / "a.py").write_text("A = 22\n")
    assert debroot.copy_checkout(src, root) == 1
    assert (dest / "pkg/a.py").read_text() == "A = 22\n"
    assert not (dest / "pkg/b.py").exists()
    assert (dest / ".venv" / "python").read_text() == "root venv\n"


# --- version-dependent config ----------------------------------------------------------------
def test_slurm_version_and_cgroup_conf(tmp_path):
    assert parse_version("slurm-wlm 22.05.8\n") == (22, 5)
    assert parse_version("slurm 26.05.5") == (26, 5)
    with pytest.raises(ValueError):
        parse_version("slurmctld: unknown option")
    spec = resolve(tmp_path, environ={})
    assert "cgroup.conf" not in render_all(spec, "pw", slurm_version=(22, 5))
    newer = render_all(spec, "pw", slurm_version=(24, 11))
    assert "CgroupPlugin=disabled" in newer["cgroup.conf"]
    assert "loose-innodb_snapshot_isolation=OFF" in newer["my.cnf"]


def test_debootstrap_is_installed_by_one_release_while_the_other_waits(tmp_path, monkeypatch):
    """Two roots built side by side: apt runs under one host lock, and a build let in after
    the other installed debootstrap runs no apt of its own."""
    monkeypatch.setattr(debroot.install, "HOST_APT_LOCK", tmp_path / "apt.lock")
    calls = []
    monkeypatch.setattr(debroot.proc, "run", lambda argv, **kw: calls.append(argv))
    answers = iter([None, None])                # missing before the lock and inside it
    monkeypatch.setattr(debroot.shutil, "which", lambda name, path=None: next(answers))
    debroot._ensure_debootstrap()
    assert [a[1] for a in calls] == ["update", "install"]
    assert (tmp_path / "apt.lock").exists()
    calls.clear()
    answers = iter([None, "/usr/sbin/debootstrap"])   # the other build installed it meanwhile
    monkeypatch.setattr(debroot.shutil, "which", lambda name, path=None: next(answers))
    debroot._ensure_debootstrap()
    assert calls == []
