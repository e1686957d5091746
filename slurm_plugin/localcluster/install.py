"""Install the Debian packages the local cluster needs, only when something is missing."""

from __future__ import annotations

import fcntl
import functools
import os
import re
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .. import proc
from ..errors import CommandError

# A program each package provides; a missing one means the package must be installed.
# "a|b": either name (Debian 12 calls the Slurm daemons slurmctld-wlm etc., later releases
# slurmctld).
PROGRAMS = {"slurm-wlm": ("slurmctld-wlm|slurmctld", "slurmd-wlm|slurmd",
                          "slurmstepd-wlm|slurmstepd", "sbatch"),
            "slurmdbd": ("slurmdbd",), "munge": ("munged", "mungekey"),
            "mariadb-server": ("mariadbd", "mariadb-install-db"), "influxdb": ("influxd",)}
SBIN = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def which(names: str) -> str | None:
    """Path of the first of ``a|b|...`` found on the system path, else None."""
    for name in names.split("|"):
        found = shutil.which(name, path=SBIN)
        if found:
            return found
    return None


def missing_packages() -> list[str]:
    return [pkg for pkg, progs in PROGRAMS.items() if not all(which(p) for p in progs)]


def slurm_daemon(name: str) -> str:
    """The binary of Slurm daemon ``name`` (slurmctld, slurmd, slurmstepd): Debian 12 installs
    ``/usr/sbin/<name>-wlm``, later releases ``/usr/sbin/<name>``."""
    for candidate in (f"/usr/sbin/{name}-wlm", f"/usr/sbin/{name}"):
        if os.path.isfile(candidate):
            return candidate
    return f"/usr/sbin/{name}-wlm"


def parse_version(text: str) -> tuple[int, int]:
    """(major, minor) of ``slurm 24.11.5`` / ``slurm-wlm 22.05.8``."""
    match = re.search(r"(\d+)\.(\d+)", text)
    if not match:
        raise ValueError(f"no Slurm version in {text!r}")
    return int(match.group(1)), int(match.group(2))


@functools.lru_cache(maxsize=None)
def slurm_version() -> tuple[int, int]:
    """The installed Slurm's (major, minor), from ``slurmctld -V`` (asked once)."""
    argv = [slurm_daemon("slurmctld"), "-V"]
    done = proc.run(argv, timeout_s=30)
    try:
        return parse_version(done.stdout + done.stderr)
    except ValueError as exc:
        raise CommandError(argv, 0, str(exc), done.stdout) from None


HOST_APT_LOCK = Path("/var/lock/wattbatch-host-apt.lock")


@contextmanager
def apt_lock() -> Iterator[None]:
    """One apt run of ours at a time on this system: scripts/test.sh brings the releases'
    clusters up side by side, and a second apt run beside the first fails on apt's lock."""
    HOST_APT_LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(HOST_APT_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_packages() -> list[str]:
    """apt-get install what is missing (never slurm-wlm-emulator); return what was installed."""
    if not missing_packages():
        return []
    with apt_lock():
        missing = missing_packages()        # another run may have installed them meanwhile
        if missing:
            slurm_version.cache_clear()
            env = {"DEBIAN_FRONTEND": "noninteractive"}
            proc.run(["apt-get", "update"], timeout_s=600, env=env)
            proc.run(["apt-get", "install", "-y", "--no-install-recommends", *missing],
                     timeout_s=1800, env=env)
    return missing
