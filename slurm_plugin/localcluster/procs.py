"""Process bookkeeping for the local cluster: pid files, liveness, waits, stopping, log tails."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Callable

from ..errors import CommandError


def tail(path: Path, lines: int = 25) -> str:
    """The last ``lines`` lines of a log file (or a note that it does not exist)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return f"--- last lines of {path} ---\n" + "\n".join(text.splitlines()[-lines:])


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def environ(pid: int) -> dict[str, str]:
    """A process's environment (empty when it cannot be read)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (a.decode(errors="replace").partition("=") for a in raw.split(b"\0") if a)
    return {k: v for k, _, v in pairs}


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    try:   # a zombie is dead for our purposes
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def running_pid(pid_file: Path, program: str) -> int | None:
    """Pid from ``pid_file`` if that process is alive and is ``program``; else None."""
    pid = read_pid(pid_file)
    if not alive(pid):
        return None
    args = cmdline(pid)  # type: ignore[arg-type]
    return pid if args and program in os.path.basename(args[0]) else None


def wait_for(check: Callable[[], bool], timeout_s: float, what: str, logs: list[Path],
             interval_s: float = 0.2) -> None:
    """Poll ``check`` until true; on timeout raise with the tails of ``logs``."""
    deadline = time.monotonic() + timeout_s
    while True:
        if check():
            return
        if time.monotonic() > deadline:
            detail = "\n".join(tail(p) for p in logs)
            raise CommandError([what], 124, f"not ready after {timeout_s:g} s\n{detail}")
        time.sleep(interval_s)


def stop_pid(pid: int, timeout_s: float = 15.0) -> None:
    """SIGTERM, wait, then SIGKILL."""
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not alive(pid):
            return


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _is_stepd_of(pid: int, slurm_conf: Path) -> bool:
    """A slurmstepd (it renames itself ``slurmstepd: [N.batch]``) started by our slurmd."""
    try:
        if not os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("slurmstepd"):
            return False
        return f"SLURM_CONF={slurm_conf}".encode() in \
            Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def same_root(pid: int) -> bool:
    """Whether ``pid`` sees the same ``/`` as this process (not one inside or outside a
    chroot: a cluster in a Debian root uses the same paths as the host's)."""
    try:
        theirs, ours = os.stat(f"/proc/{pid}/root"), os.stat("/")
    except OSError:
        return False
    return (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino)


def pids_under(root: Path, slurm_conf: Path) -> list[int]:
    """Processes started from ``root`` (program or shell script under it, slurmstepd of our
    slurmd) and their children, all under the same ``/`` as this one; never this process."""
    prefix = str(root) + os.sep
    pids = [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()]
    roots = set()
    for pid in pids:
        args = cmdline(pid)
        if pid != os.getpid() and args and same_root(pid) and (
                args[0].startswith(prefix)
                or (len(args) > 1 and args[1].startswith(prefix)
                    and os.path.basename(args[0]) in ("bash", "sh", "dash"))
                or _is_stepd_of(pid, slurm_conf)):
            roots.add(pid)
    parent = {pid: _ppid(pid) for pid in pids if same_root(pid)}
    found = set(roots)
    changed = True
    while changed:
        new = {pid for pid, pp in parent.items() if pp in found and pid not in found}
        found |= new
        changed = bool(new)
    found.discard(os.getpid())
    return sorted(found)
