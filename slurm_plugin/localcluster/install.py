"""Install the Debian packages the local cluster needs, only when something is missing."""

from __future__ import annotations

import shutil

from .. import proc

PACKAGES = ("slurm-wlm", "slurmdbd", "munge", "mariadb-server", "influxdb")
# A program each package provides; a missing one means the package must be installed.
PROGRAMS = {"slurm-wlm": ("slurmctld-wlm", "slurmd-wlm", "slurmstepd-wlm", "sbatch"),
            "slurmdbd": ("slurmdbd",), "munge": ("munged", "mungekey"),
            "mariadb-server": ("mariadbd", "mariadb-install-db"), "influxdb": ("influxd",)}
SBIN = "/usr/sbin:/usr/bin:/sbin:/bin"


def missing_packages() -> list[str]:
    return [pkg for pkg, progs in PROGRAMS.items()
            if not all(shutil.which(p, path=SBIN) for p in progs)]


def ensure_packages() -> list[str]:
    """apt-get install what is missing (never slurm-wlm-emulator); return what was installed."""
    missing = missing_packages()
    if missing:
        env = {"DEBIAN_FRONTEND": "noninteractive"}
        proc.run(["apt-get", "update"], timeout_s=600, env=env)
        proc.run(["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES],
                 timeout_s=1800, env=env)
    return missing
