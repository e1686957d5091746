"""``wattbatch --help`` and ``--version``: sbatch's answer, then wattbatch's own.

Without a Slurm configuration sbatch answers neither (exit 1, only its configuration errors):
wattbatch then still shows its own options or version with exit 0, and says on stderr what is
missing."""

from __future__ import annotations

from slurm_plugin import __version__

from .wb_options import help_text

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Any, Callable, TextIO


def _why(result: Any) -> str:
    """The last line sbatch printed (its fatal error), or the exception's message."""
    text = getattr(result, "stderr", "") or getattr(result, "stdout", "") or str(result)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"exit {getattr(result, 'returncode', '?')}"


def help_or_version(what: str, sbatch: Callable[[], Any], out: TextIO, err: TextIO) -> int:
    result = sbatch()
    ok = getattr(result, "returncode", 1) == 0
    if ok:
        out.write(result.stdout)
        err.write(result.stderr)
    if what == "version":
        out.write(f"wattbatch {__version__}\n")
    else:
        out.write(("\n" if ok else "") + help_text())
    if not ok:
        shown = "Slurm's version is" if what == "version" else "sbatch's own options are"
        err.write(f"wattbatch: note: {shown} not shown: {_why(result)}; "
                  "point SLURM_CONF at the cluster's slurm.conf (or set slurm.conf in "
                  "/etc/wattbatch/site.toml)\n")
    return 0
