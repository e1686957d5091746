"""The one function that runs every Slurm command."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

from .. import proc
from ..config import SiteConfig
from ..errors import CommandError

if TYPE_CHECKING:
    from .document import SlurmJson

T = TypeVar("T")

# sacct and sacctmgr talk to slurmdbd (the accounting database daemon), not to slurmctld
_DBD_COMMANDS = ("sacct", "sacctmgr")
_DBD_UNREACHABLE = ("Problem talking to the database", "slurm_persist_conn_open")
_UNREACHABLE = ("Unable to contact slurm controller", "Unable to establish connection",
                "Connection refused", "Zero Bytes were transmitted")


def slurm(cmd: str, args: Sequence[str], cfg: SiteConfig, *, input_text: str | None = None,
          check: bool = True, timeout_s: float | None = None,
          raw_stdout: bool = False) -> proc.Completed:
    """Run Slurm command ``cmd`` (sbatch, squeue, ...) with ``args``.

    Uses ``slurm.bin_dir`` (empty: PATH), exports ``SLURM_CONF`` from ``slurm.conf`` when set
    and the caller's environment has none (the user's own wins, as with Slurm), and times out
    after ``slurm.timeout_s``. A failure raises ``CommandError`` (command, exit code, stderr);
    when the controller cannot be reached the message says so and how to fix it.
    """
    bin_dir = cfg["slurm.bin_dir"]
    argv = [os.path.join(bin_dir, cmd) if bin_dir else cmd, *args]
    env = {"SLURM_CONF": cfg["slurm.conf"]} if cfg["slurm.conf"] and \
        "SLURM_CONF" not in os.environ else None
    try:
        return proc.run(argv, timeout_s=timeout_s or cfg["slurm.timeout_s"], check=check,
                        input_text=input_text, env=env, raw_stdout=raw_stdout)
    except CommandError as exc:
        if any(s in exc.stderr for s in _DBD_UNREACHABLE) or \
                (cmd in _DBD_COMMANDS and any(s in exc.stderr for s in _UNREACHABLE)):
            raise CommandError(exc.argv, exc.returncode,
                               f"{exc.stderr.rstrip()}\n{_dbd_hint(cfg)}", exc.stdout) from None
        if any(s in exc.stderr for s in _UNREACHABLE):
            raise CommandError(exc.argv, exc.returncode,
                               f"{exc.stderr.rstrip()}\n{_hint(cfg)}", exc.stdout) from None
        raise


def slurm_json(cmd: str, args: Sequence[str], cfg: SiteConfig,
               version: str | None = None) -> dict[str, Any]:
    """``cmd --json args`` (``--json=VERSION`` when given), decoded by ``json``: for a document
    of a few records, read a field or two (``slurm_document`` for the large ones). Slurm exits
    0 with an ``errors`` list and no data when the controller is down: that raises
    ``CommandError`` here, never "no jobs"."""
    return _json(cmd, args, cfg, version, json.loads, lambda data: data.get("errors"))


def slurm_document(cmd: str, args: Sequence[str], cfg: SiteConfig,
                   version: str | None = None) -> SlurmJson:
    """``cmd --json args`` as ``slurm_json`` runs it, decoded into a ``SlurmJson`` (the typed
    records ``parse`` reads: the whole cluster's ``squeue --json`` and node listing)."""
    from .document import SlurmJson
    return _json(cmd, args, cfg, version, SlurmJson.from_output, lambda doc: doc.errors,
                 raw=True)


def _json(cmd: str, args: Sequence[str], cfg: SiteConfig, version: str | None,
          decode: Callable[[Any], T], errors_of: Callable[[T], Any], raw: bool = False) -> T:
    """``raw``: ``decode`` takes the output's bytes (a large document: no text copy of it)."""
    done = slurm(cmd, [f"--json={version}" if version else "--json", *args], cfg,
                 raw_stdout=raw)
    try:
        data = decode(done.raw_stdout if raw else done.stdout)
    except ValueError as exc:
        shown = proc.decode(done.raw_stdout[:500]) if raw else done.stdout[:500]
        raise CommandError(list(done.argv), done.returncode,
                           f"printed invalid JSON ({exc}); Slurm 22.05 or later is needed",
                           shown) from None
    errors = [e for e in errors_of(data) or () if isinstance(e, dict)]
    if errors:
        text = "; ".join(f"{e.get('source', '?')}: {e.get('description') or e.get('error')}"
                         for e in errors)
        raise CommandError(list(done.argv), 1, f"{text}\n{_hint(cfg)}")
    return data


_RELEASES: dict[tuple[str, str], str] = {}


def slurm_release(cfg: SiteConfig) -> str:
    """The release of the Slurm commands in use (``scontrol -V``: ``slurm 24.11.5``), asked
    once per process and command set; it needs no controller."""
    key = (cfg["slurm.bin_dir"], cfg["slurm.conf"], os.environ.get("SLURM_CONF", ""))
    if key not in _RELEASES:
        out = slurm("scontrol", ["-V"], cfg).stdout.split()
        if len(out) < 2 or not out[1][:1].isdigit():
            raise CommandError(["scontrol", "-V"], 0, f"printed {' '.join(out)!r}, expected "
                               "'slurm RELEASE'")
        _RELEASES[key] = out[1]
    return _RELEASES[key]


def _conf(cfg: SiteConfig) -> tuple[str, str]:
    """The slurm.conf the commands read, and what set it."""
    if os.environ.get("SLURM_CONF"):
        return os.environ["SLURM_CONF"], "$SLURM_CONF"
    return cfg["slurm.conf"] or "the default slurm.conf", cfg.source("slurm.conf")


def _hint(cfg: SiteConfig) -> str:
    conf, source = _conf(cfg)
    return (f"slurm: the Slurm controller is not reachable (slurm.conf {conf}, set by "
            f"{source}): start slurmctld (local test cluster: "
            "`wattctl localcluster up`) or fix slurm.conf")


def _dbd_hint(cfg: SiteConfig) -> str:
    conf, source = _conf(cfg)
    return (f"slurm: the accounting database daemon slurmdbd is not reachable "
            f"(AccountingStorageHost/Port in slurm.conf {conf}, set by {source}): start "
            "slurmdbd (local test cluster: `wattctl localcluster up`) or fix slurm.conf")
