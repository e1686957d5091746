"""`wattctl history export` runs exactly the sacct command the replay reads, through the one
Slurm command function (slurm.bin_dir), and writes what it prints."""

from __future__ import annotations

import os
import stat

from click.testing import CliRunner

from slurm_plugin.cli import group as wattctl

EXACT = ["-a", "-X", "-P", "-o", "JobIDRaw,JobName,User,Account,Partition,Submit,Start,End,"
         "Elapsed,Timelimit,State,ExitCode,ReqTRES,AllocTRES,NodeList,AdminComment,Comment"]


def _fake_sacct(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    argv_file = tmp_path / "argv"
    script = bin_dir / "sacct"
    script.write_text(f'#!/bin/sh\nfor a in "$@"; do echo "$a"; done > {argv_file}\n'
                      'echo "JobIDRaw|JobName"\necho "1|a|b"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir, argv_file


def test_runs_exactly_the_export_command(tmp_path, monkeypatch):
    bin_dir, argv_file = _fake_sacct(tmp_path)
    monkeypatch.setenv("WATTBATCH_SLURM_BIN_DIR", str(bin_dir))
    monkeypatch.setenv("WATTBATCH_SITE_CONFIG", os.devnull)
    r = CliRunner().invoke(wattctl, ["history", "export"])
    assert r.exit_code == 0, r.output
    assert argv_file.read_text().split("\n")[:-1] == EXACT
    assert r.output == "JobIDRaw|JobName\n1|a|b\n"
    out = tmp_path / "h.txt"
    r = CliRunner().invoke(wattctl, ["history", "export", "--since", "now-30days", "--until",
                                     "2026-11-01", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert argv_file.read_text().split("\n")[:-1] == EXACT + ["-S", "now-30days", "-E",
                                                              "2026-11-01"]
    assert out.read_text() == "JobIDRaw|JobName\n1|a|b\n"


def test_a_bad_time_is_refused_before_sacct_runs(tmp_path, monkeypatch):
    from slurm_plugin.errors import InputError

    bin_dir, argv_file = _fake_sacct(tmp_path)
    monkeypatch.setenv("WATTBATCH_SLURM_BIN_DIR", str(bin_dir))
    monkeypatch.setenv("WATTBATCH_SITE_CONFIG", os.devnull)
    for option, value in (("--since", "garbage"), ("--until", "2026-13-01")):
        r = CliRunner().invoke(wattctl, ["history", "export", option, value])
        assert isinstance(r.exception, InputError) and not argv_file.exists()
        assert f"history export: {option} = {value!r}: not a Slurm time; use one of " \
            in str(r.exception)
