"""wattbatch installed as ``sbatch`` (contrib/sbatch's shim first on PATH): every path ends
with one answer, with and without a bin-dir setting; a nested call never multiplies;
``--wb-off`` holds; --help/--version without a Slurm configuration; the user's SLURM_CONF
wins; bad per-job settings never block; the cluster is reachable without SLURM_CONF."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from sbatch_shim import WATTBATCH, env_with_shim, make_shim

from slurm_plugin import __version__
from slurm_plugin.localcluster import DEFAULT_SLURM_CONF

pytestmark = pytest.mark.cluster
TIMEOUT_S = 60


def policies() -> list[str]:
    """The ``policy=`` job_submit.lua recorded in each queued job's AdminComment from
    wattbatch's ``wb:`` tag (``-`` for a job submitted without one)."""
    ids = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True,
                         check=True).stdout.split()
    shown = subprocess.run(["scontrol", "-o", "show", "job"], capture_output=True, check=True
                           ).stdout.decode(errors="replace").splitlines()   # any job name
    records = [re.search(r"AdminComment=(\S*)", line).group(1) for line in shown
               if line.split()[0].removeprefix("JobId=") in ids]
    return sorted(next((p[len("policy="):] for p in rec.split(";") if p.startswith("policy=")),
                       "-") for rec in records)


def call(argv: list[str], env: dict[str, str], cwd: Path, stdin: str = "") -> tuple:
    done = subprocess.run(argv, env=env, cwd=cwd, input=stdin, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    out = re.sub(r"\b\d+\b", "N", done.stdout) if "Submitted" in done.stdout or re.fullmatch(
        r"\d+\n", done.stdout) else done.stdout
    return done.returncode, out, done.stderr


def real_sbatch(argv: list[str], cwd: Path, stdin: str = "", **env: str) -> tuple:
    return call(["sbatch", *argv], dict(os.environ, **env), cwd, stdin)


def empty_conf(tmp_path: Path) -> str:
    """A slurm.conf Slurm cannot use. (A missing one makes every command retry for 60 s.)"""
    path = tmp_path / "empty-slurm.conf"
    path.touch()
    return str(path)


@pytest.fixture()
def shim(tmp_path) -> Path:
    return make_shim(tmp_path / "shim").parent


@pytest.fixture()
def job_sh(tmp_path) -> Path:
    path = tmp_path / "job.sh"
    path.write_text("#!/bin/bash\n#SBATCH -J shimtest -o /dev/null\necho hi\n")
    return path


PATHS = {     # every path that once called the shim again; each compared with sbatch alone
    "unknown option": ["--nosuchopt", "--wrap=hostname"],
    "missing script": ["/nonexistent/job.sh"],
    "wrap and a script": ["--wrap=hostname", "JOB"],
    "submission": ["--hold", "JOB"],
    "wb-off": ["--hold", "--wb-off", "JOB"],
    "usage": ["--usage"],
}


@pytest.mark.parametrize("bin_dir", ["", "/usr/bin"], ids=["no bin dir", "bin dir set"])
@pytest.mark.parametrize("case", sorted(PATHS))
def test_every_path_through_the_shim_ends_once(localcluster, shim, job_sh, tmp_path, case,
                                               bin_dir):
    argv = [str(job_sh) if w == "JOB" else w for w in PATHS[case]]
    env = env_with_shim(shim, **({"WATTBATCH_SLURM_BIN_DIR": bin_dir} if bin_dir else {}))
    ours = call(["sbatch", *argv], env, tmp_path)
    plain = real_sbatch([w for w in argv if w != "--wb-off"], tmp_path)
    assert ours == plain


@pytest.mark.parametrize("bin_dir", ["", "/usr/bin"], ids=["no bin dir", "bin dir set"])
def test_fail_open_through_the_shim(localcluster, shim, job_sh, tmp_path, bin_dir):
    """A site config that cannot be read: one warning, the job submitted unchanged."""
    env = env_with_shim(shim, WATTBATCH_SITE_CONFIG=str(tmp_path / "missing.toml"),
                        **({"WATTBATCH_SLURM_BIN_DIR": bin_dir} if bin_dir else {}))
    rc, out, err = call(["sbatch", "--hold", "--parsable", str(job_sh)], env, tmp_path)
    assert rc == 0 and out == "N\n"
    assert err.count("\n") == 1 and err.startswith("wattbatch: warning: config:")
    bad_conf = env_with_shim(shim, SLURM_CONF=empty_conf(tmp_path))
    ours = call(["sbatch", "--hold", str(job_sh)], bad_conf, tmp_path)
    assert ours == real_sbatch(["--hold", str(job_sh)], tmp_path, SLURM_CONF=empty_conf(tmp_path))
    assert ours[0] != 0 and ours[2]


def test_wb_off_holds_through_the_shim(localcluster, shim, job_sh, tmp_path):
    env = env_with_shim(shim)
    rc, out, _ = call(["sbatch", "--parsable", "--hold", "--wb-off", str(job_sh)], env, tmp_path)
    assert rc == 0 and policies() == ["-"]                    # one job, no wb: tag
    rc, _, _ = call(["sbatch", "--parsable", "--hold", str(job_sh)], env, tmp_path)
    assert rc == 0 and policies() == ["-", "slurm-default"]


def test_a_nested_call_passes_through_once(localcluster, tmp_path, job_sh):
    """A site wrapper wattbatch cannot tell from another's (it names no wattbatch) but that
    runs wattbatch again: the nested wattbatch passes through to Slurm's sbatch; one job."""
    disguised = tmp_path / "disguised"
    disguised.mkdir()
    (disguised / "sbatch").write_text('#!/bin/sh\nexec "$WB_PROGRAM" "$@"\n')
    (disguised / "sbatch").chmod(0o755)
    env = env_with_shim(disguised, WB_PROGRAM=str(WATTBATCH))
    started = time.monotonic()
    rc, out, err = call(["sbatch", "--hold", "--parsable", str(job_sh)], env, tmp_path)
    assert (rc, out, err) == (0, "N\n", "") and policies() == ["slurm-default"]
    substituted = subprocess.run(["bash", "-c", "sbatch --hold --parsable <(cat job.sh)"],
                                 env=env, cwd=tmp_path, capture_output=True, text=True,
                                 timeout=TIMEOUT_S)
    assert (substituted.returncode, substituted.stderr) == (0, "")
    stored = subprocess.run(["scontrol", "write", "batch_script", substituted.stdout.strip(),
                             "-"], capture_output=True, text=True, check=True).stdout
    assert stored == job_sh.read_text()              # /dev/fd/63 reached Slurm's sbatch
    alone = dict(env, PATH=str(disguised))             # nothing but the wrapper: one error
    rc, out, err = call([str(disguised / "sbatch"), "--hold", str(job_sh)], alone, tmp_path)
    assert rc == 127 and out == "" and err.count("\n") == 1
    assert err.startswith(f"wattbatch: error: no sbatch on PATH but wattbatch's own "
                          f"({disguised / 'sbatch'});") and "contrib/sbatch/README.md" in err
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("bin_dir", ["", "/usr/bin"], ids=["no bin dir", "bin dir set"])
def test_help_and_version_with_and_without_a_slurm_configuration(localcluster, shim, tmp_path,
                                                                 bin_dir):
    env = env_with_shim(shim, **({"WATTBATCH_SLURM_BIN_DIR": bin_dir} if bin_dir else {}))
    rc, out, err = call(["sbatch", "--help"], env, tmp_path)
    plain = real_sbatch(["--help"], tmp_path)
    assert rc == 0 and out.startswith(plain[1]) and "--wb-dry-run" in out[len(plain[1]):]
    assert call(["sbatch", "--version"], env, tmp_path) == (
        0, f"{plain_version()}wattbatch {__version__}\n", "")
    missing = env | {"SLURM_CONF": empty_conf(tmp_path)}
    rc, out, err = call(["sbatch", "--help"], missing, tmp_path)
    fatal = real_sbatch(["--help"], tmp_path, SLURM_CONF=missing["SLURM_CONF"])[2]
    assert rc == 0 and out.startswith("Usage: wattbatch") and "--wb-opt-out" in out
    assert err.startswith(f"wattbatch: note: sbatch's own options are not shown: "
                          f"{fatal.strip().splitlines()[-1]}; point SLURM_CONF at")
    rc, out, err = call(["sbatch", "-V"], missing, tmp_path)
    assert (rc, out) == (0, f"wattbatch {__version__}\n") and "Slurm's version is not" in err


def plain_version() -> str:
    return subprocess.run(["/usr/bin/sbatch", "--version"], capture_output=True, text=True,
                          check=True).stdout


def test_users_slurm_conf_wins_over_the_sites(localcluster, shim, job_sh, tmp_path):
    site = tmp_path / "site.toml"
    site.write_text(localcluster.site_toml.read_text().replace(
        str(localcluster.slurm_conf), str(tmp_path / "wrong" / "slurm.conf")))
    env = env_with_shim(shim, WATTBATCH_SITE_CONFIG=str(site))
    started = time.monotonic()
    rc, out, err = call(["sbatch", "--hold", "--parsable", str(job_sh)], env, tmp_path)
    assert (rc, out, err) == (0, "N\n", "") and time.monotonic() - started < 10


def test_an_unreadable_dry_run_value_submits_nothing(localcluster, shim, job_sh, tmp_path):
    """It may have asked for a dry run: an error naming where it came from, nothing submitted
    (the one setting from the environment that is not a warning)."""
    before = policies()
    rc, out, err = call(["sbatch", "--hold", "--parsable", str(job_sh)],
                        env_with_shim(shim, WATTBATCH_DRY_RUN="maybe"), tmp_path)
    assert (rc, out) == (255, "") and "$WATTBATCH_DRY_RUN" in err and "'maybe'" in err
    assert "nothing was submitted" in err and policies() == before


@pytest.mark.parametrize("setting", [{"WATTBATCH_GPU_MEM": "abc"}, {"WATTBATCH_ELASTIC": "9-1"}])
def test_bad_per_job_settings_never_block(localcluster, shim, job_sh, tmp_path, setting):
    env = env_with_shim(shim, **setting)
    rc, out, err = call(["sbatch", "--hold", "--parsable", str(job_sh)], env, tmp_path)
    assert rc == 0 and out == "N\n" and err.count("\n") == 1
    assert err.startswith(f"wattbatch: warning: ${next(iter(setting))}")
    assert policies() == ["-"]                                          # unchanged: no tag
    rc, out, err = call(["sbatch", "--wb-gpu-mem=abc", str(job_sh)], env_with_shim(shim),
                        tmp_path)
    assert (rc, out) == (255, "") and err == (
        "wattbatch: command line: --wb-gpu-mem='abc': expected a positive number of MiB\n")


def test_cluster_reachable_by_clients_that_remove_slurm_conf(localcluster, shim, tmp_path):
    """A job step that removes every SLURM_* variable (as some workflow tools do) still
    reaches the controller: the local cluster's config is at Slurm's default path."""
    assert DEFAULT_SLURM_CONF.is_symlink() and os.readlink(DEFAULT_SLURM_CONF) == str(
        localcluster.slurm_conf), f"{DEFAULT_SLURM_CONF} is not the local cluster's"
    out = tmp_path / "clean.out"
    script = tmp_path / "clean.sh"
    script.write_text("#!/bin/bash\nenv -i PATH=/usr/bin:/bin sinfo -h -o %R\n")
    rc, _, err = call(["sbatch", "-o", str(out), "-W", str(script)], env_with_shim(shim),
                      tmp_path)
    assert rc == 0, err
    assert out.read_text() == f"{localcluster.spec.partition}\n"


def test_installed_as_a_link_named_sbatch(localcluster, job_sh, tmp_path):
    """The site-wide form: /usr/local/bin/sbatch -> wattbatch's launcher (here in a PATH dir)."""
    links = tmp_path / "links"
    links.mkdir()
    (links / "sbatch").symlink_to(WATTBATCH)
    env = env_with_shim(links)
    rc, out, err = call(["sbatch", "--hold", "--parsable", str(job_sh)], env, tmp_path)
    assert (rc, out, err, policies()) == (0, "N\n", "", ["slurm-default"])
    assert call(["sbatch", "--nosuchopt", str(job_sh)], env, tmp_path) == real_sbatch(
        ["--nosuchopt", str(job_sh)], tmp_path)
