"""The local cluster's ``slurm.conf`` at Slurm's default path while it runs.

A client that removes every ``SLURM_*`` variable (some workflow tools do, for each job step)
finds no ``SLURM_CONF`` and reads Slurm's compiled-in default, ``/etc/slurm/slurm.conf``; on a
real cluster that is the cluster's config. So ``up`` puts a symbolic link there to the local
cluster's config, but only when nothing else is there (a dangling link left by a removed state
dir counts as nothing), and ``down`` removes the link only when it still points to this
cluster's file. A file or link of anyone else is never touched: the clients then need
``SLURM_CONF``, and ``up`` says so.

A link (not a copy) shows whose it is, and no stale copy can outlive the cluster.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_SLURM_CONF = Path("/etc/slurm/slurm.conf")


def _points_to(link: Path) -> str | None:
    return os.readlink(link) if link.is_symlink() else None


def claim(slurm_conf: Path, default: Path = DEFAULT_SLURM_CONF) -> str:
    """Link ``default`` to ``slurm_conf`` if free; a sentence that says what holds it."""
    target = _points_to(default)
    if target == str(slurm_conf):
        return f"{default} -> this cluster"
    if target is not None and not os.path.exists(default):
        default.unlink()                                # dangling: a removed cluster's
    elif default.exists() or default.is_symlink():
        where = f"a link to {target}" if target else "a file"
        return (f"{default} left alone ({where}, not this cluster's): clients need "
                f"SLURM_CONF={slurm_conf}")
    default.parent.mkdir(parents=True, exist_ok=True)
    default.symlink_to(slurm_conf)
    return f"{default} -> this cluster"


def release(slurm_conf: Path, default: Path = DEFAULT_SLURM_CONF) -> bool:
    """Remove the link if it is this cluster's; True if removed."""
    if _points_to(default) == str(slurm_conf):
        default.unlink()
        return True
    return False


def holder(slurm_conf: Path, default: Path = DEFAULT_SLURM_CONF) -> str:
    """``"this cluster"``, ``"none"`` or what else is there."""
    target = _points_to(default)
    if target == str(slurm_conf):
        return "this cluster"
    if target is None and not default.exists():
        return "none"
    return f"a link to {target}" if target else "a file"
