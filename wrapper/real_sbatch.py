"""Which ``sbatch`` wattbatch runs: Slurm's own, never wattbatch again.

wattbatch is often installed *as* ``sbatch`` (a shim first on PATH, or ``/usr/local/bin/sbatch``,
see ``contrib/sbatch/``), so every path that hands a job to sbatch resolves it here, one way:

1. ``slurm.bin_dir`` (site config or ``$WATTBATCH_SLURM_BIN_DIR``) when set: its ``sbatch``,
   refused with a clear error when that one is wattbatch too;
2. else each ``sbatch`` on ``PATH`` in order, skipping wattbatch itself and any wrapper of it
   (a link to this program, or a script that names wattbatch).

An ELF binary is Slurm's sbatch. Any other script found is a site's own wrapper: it may call
``sbatch`` again and land in wattbatch, so wattbatch marks the call
(``WATTBATCH_SBATCH_CALLER=<pid> <path>``). A wattbatch started below a marked call (the pid is
its ancestor) is a nested call: it passes the arguments through unchanged to the next sbatch
after the marked one, and if that too could lead back, it stops with one error. So a chain of
calls never multiplies.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Mapping

MARKER = "WATTBATCH_SBATCH_CALLER"
HEAD_BYTES = 65536
OURS = (b"wattbatch", b"wrapper.cli", b"wrapper.server_client")
INSTALL_HINT = ("to run wattbatch as sbatch, put Slurm's own sbatch after it on PATH or set "
                "slurm.bin_dir (WATTBATCH_SLURM_BIN_DIR) to the directory that holds it; "
                "see contrib/sbatch/README.md")


class SbatchNotFound(Exception):
    """No sbatch but wattbatch's own; the message says which were seen and how to fix it."""


def _kind(path: str, self_path: str) -> str:
    """``"ours"`` (wattbatch or a wrapper of it), ``"binary"`` (an executable that is not a
    script: Slurm's sbatch) or ``"script"`` (someone else's wrapper)."""
    try:
        if os.path.realpath(path) == self_path:
            return "ours"
        with open(path, "rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError:
        return "script"
    if not head.startswith(b"#!"):
        return "binary"
    return "ours" if any(word in head for word in OURS) else "script"


def _self_path() -> str:
    return os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else ""


def _candidates(environ: Mapping[str, str]) -> list[str]:
    seen, out = set(), []
    for d in environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(d or ".", "sbatch")
        if path not in seen and os.path.isfile(path) and os.access(path, os.X_OK):
            seen.add(path)
            out.append(path)
    return out


def resolve(bin_dir: str, bin_dir_source: str, environ: Mapping[str, str],
            skip: tuple[str, ...] = ()) -> tuple[str, bool]:
    """The sbatch to run and whether the call must be marked (it may lead back here).

    Raises ``SbatchNotFound`` when only wattbatch's own sbatch is there."""
    me = _self_path()
    if bin_dir:
        path = os.path.join(bin_dir, "sbatch")
        kind = _kind(path, me)
        if kind == "ours" or path in skip:
            raise SbatchNotFound(
                f"wattbatch: error: slurm.bin_dir = {bin_dir!r} (set by {bin_dir_source}): "
                f"{path} runs wattbatch itself; set it to the directory of Slurm's own sbatch "
                f"(e.g. /usr/bin). {INSTALL_HINT}")
        return path, kind == "script"
    found = _candidates(environ)
    for path in found:
        if path in skip:
            continue
        kind = _kind(path, me)
        if kind != "ours":
            return path, kind == "script"
    listed = ", ".join(found) or "none"
    raise SbatchNotFound(f"wattbatch: error: no sbatch on PATH but wattbatch's own "
                         f"({listed}); {INSTALL_HINT}")


def marker(path: str) -> dict[str, str]:
    """The environment entry that marks a call of ``path`` from this process."""
    return {MARKER: f"{os.getpid()} {path}"}


def _ancestors(limit: int = 32) -> set[int]:
    out, pid = set(), os.getppid()
    while pid > 1 and len(out) < limit:
        out.add(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
            pid = int(stat[stat.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def nested_call(environ: Mapping[str, str]) -> str | None:
    """The sbatch path of a marked call this process runs under, else None (a marker
    inherited by a job's own processes names a pid that is not our ancestor: not nested)."""
    value = environ.get(MARKER)
    if not value:
        return None
    pid, _, path = value.partition(" ")
    try:
        return path if int(pid) in _ancestors() else None
    except ValueError:
        return None
