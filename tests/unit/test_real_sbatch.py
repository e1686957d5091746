"""Which sbatch wattbatch runs: never itself, whatever PATH and slurm.bin_dir hold."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from wrapper import real_sbatch
from wrapper.real_sbatch import SbatchNotFound, resolve

ELF = b"\x7fELF\x02\x01\x01" + b"\0" * 64
SHIM = "#!/bin/sh\nexec /opt/wb/bin/wattbatch \"$@\"\n"
SITE_WRAPPER = "#!/bin/sh\nexec /usr/bin/sbatch --account=lab \"$@\"\n"


def _exe(path: Path, content: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    path.chmod(0o755)
    return path


@pytest.fixture
def dirs(tmp_path):
    shim = _exe(tmp_path / "shim" / "sbatch", SHIM)
    real = _exe(tmp_path / "slurm" / "sbatch", ELF)
    site = _exe(tmp_path / "site" / "sbatch", SITE_WRAPPER)
    return shim.parent, real.parent, site.parent


def _path(*dirs: Path) -> dict[str, str]:
    return {"PATH": os.pathsep.join(map(str, dirs))}


def test_a_shim_first_on_path_is_skipped(dirs):
    shim, real, _ = dirs
    assert resolve("", "", _path(shim, real)) == (str(real / "sbatch"), False)


def test_a_link_to_this_program_is_skipped(dirs, tmp_path, monkeypatch):
    _, real, _ = dirs
    launcher = _exe(tmp_path / "venv" / "wattbatch", "#!/usr/bin/python3\nimport sys\n")
    (tmp_path / "link").mkdir()
    (tmp_path / "link" / "sbatch").symlink_to(launcher)
    monkeypatch.setattr(sys, "argv", [str(launcher)])
    assert resolve("", "", _path(tmp_path / "link", real))[0] == str(real / "sbatch")


def test_a_foreign_wrapper_is_used_and_the_call_marked(dirs):
    shim, real, site = dirs
    assert resolve("", "", _path(shim, site, real)) == (str(site / "sbatch"), True)


def test_bin_dir_wins_and_is_refused_when_it_holds_the_shim(dirs):
    shim, real, _ = dirs
    assert resolve(str(real), "site.toml", _path(shim)) == (str(real / "sbatch"), False)
    with pytest.raises(SbatchNotFound, match=r"slurm.bin_dir = '.*shim' \(set by site.toml\): "
                                             r".* runs wattbatch itself; set it to"):
        resolve(str(shim), "site.toml", _path(real))


def test_only_shims_on_path_is_one_clear_error(dirs):
    shim, _, _ = dirs
    with pytest.raises(SbatchNotFound) as err:
        resolve("", "", _path(shim, shim))
    assert str(err.value).startswith(f"wattbatch: error: no sbatch on PATH but wattbatch's own "
                                     f"({shim / 'sbatch'});")
    assert "contrib/sbatch/README.md" in str(err.value)


def test_a_marked_call_is_nested_only_below_the_marking_process():
    probe = ("import sys; from wrapper.real_sbatch import MARKER, nested_call; "
             "print(nested_call({MARKER: sys.argv[1]}))")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    mine = real_sbatch.marker("/x/sbatch")[real_sbatch.MARKER]
    below = subprocess.run(["sh", "-c", '"$0" -c "$1" "$2"', sys.executable, probe, mine],
                           env=env, capture_output=True, text=True, check=True)
    assert below.stdout == "/x/sbatch\n"                  # our child's child: nested
    elsewhere = subprocess.run([sys.executable, "-c", probe, "1 /x/sbatch"], env=env,
                               capture_output=True, text=True, check=True)
    assert elsewhere.stdout == "None\n"                  # a marker inherited by a job: not
    assert real_sbatch.nested_call({}) is None
