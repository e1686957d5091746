"""`wattctl reconcile` as a command: settings it warns about, the dry run's state directory, and
errors that name the site key (no Slurm here: the pass warns that its snapshot failed)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from slurm_plugin.cli import group as wattctl
from slurm_plugin.errors import ConfigError, StateError


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.setenv("WATTBATCH_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "no-slurm").mkdir()
    monkeypatch.setenv("WATTBATCH_SLURM_BIN_DIR", str(tmp_path / "no-slurm"))
    monkeypatch.setenv("WATTBATCH_INFLUX_URL", "http://127.0.0.1:9")    # nothing listens
    (tmp_path / "state").mkdir()

    def write(text: str):
        p = tmp_path / "site.toml"
        p.write_text(text)
        monkeypatch.setenv("WATTBATCH_SITE_CONFIG", str(p))
        return p
    return write


def test_an_unreadable_pal_profile_is_a_warning_of_the_pass(site, tmp_path):
    p = site('[pal]\nprofile = "/nonexistent/profile.csv"\n')
    args = ["reconcile", "--dry-run", "--policy", "pal", "--state-dir", str(tmp_path / "state")]
    r = CliRunner().invoke(wattctl, [*args, "--json"])
    assert r.exit_code == 0, r.output
    warned = [w for w in json.loads(r.stdout)["warnings"] if "pal.profile" in w]
    assert len(warned) == 1
    assert f"{p}: pal.profile = '/nonexistent/profile.csv': cannot read the GPU profile" \
        in warned[0] and "profile-gpus import" in warned[0]
    r = CliRunner().invoke(wattctl, args)
    assert r.exit_code == 0 and "warning: config: " in r.stderr and "pal.profile" in r.stderr
    site("[pal]\nprofile = \"\"\n")
    r = CliRunner().invoke(wattctl, [*args, "--json"])
    assert not [w for w in json.loads(r.stdout)["warnings"] if "pal.profile" in w]


def test_a_dry_run_creates_no_state_directory(site, tmp_path):
    site("")
    typo = tmp_path / "sate" / "dir"
    r = CliRunner().invoke(wattctl, ["reconcile", "--dry-run", "--state-dir", str(typo)])
    assert isinstance(r.exception, StateError) and not (tmp_path / "sate").exists()
    assert f"--state-dir {typo}: no such directory" in str(r.exception)
    assert f"mkdir -p {typo}" in str(r.exception)
    site(f'[reconcile]\nstate_dir = "{typo}"\n')
    r = CliRunner().invoke(wattctl, ["reconcile", "--dry-run"])
    assert isinstance(r.exception, StateError) and "reconcile.state_dir = " in str(r.exception)
    r = CliRunner().invoke(wattctl, ["reconcile", "--dry-run", "--state-dir",
                                     str(tmp_path / "state"), "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["ran"], r.output


def test_an_unknown_site_policy_names_the_key_policy_name(site):
    p = site('[policy]\nname = "nosuch"\n')
    r = CliRunner().invoke(wattctl, ["reconcile", "--dry-run"])
    assert isinstance(r.exception, ConfigError)
    assert f"{p}: policy.name = 'nosuch': unknown policy; set policy.name in {p} to one of: " \
        in str(r.exception)
    site("")
    r = CliRunner().invoke(wattctl, ["reconcile", "--dry-run", "--policy", "nosuch"])
    assert "--policy = 'nosuch': choose one of: " in str(r.exception)
