"""``wattbatch``'s entry point: hand the call to the user's warm server, else run it here.

A submission's latency is mostly Python starting and importing the policy path (jinja2, the
physics tables, the Slurm parsers: over 100 ms on a small login node, against sbatch's 6 ms).
The server (``wrapper.server``) is a process of the same user that has them imported; for each
call it forks a child that takes this process's standard streams (and any ``/dev/fd/N`` a
script is read from), its arguments, environment, working directory, umask and resource
limits, runs exactly what ``wattbatch`` runs here, and reports the exit code. This module loads
nothing but ``os``, ``sys`` and the C parts of ``socket``, ``array`` and ``resource`` (the
``socket`` module itself imports ``enum``: 6 ms).

The call runs here instead, unchanged, when: ``WATTBATCH_SERVER=0``; it is a nested call
(``WATTBATCH_SBATCH_CALLER`` set); it waits for the job (``--wait``/``-W``: signals must reach
it); no server answers (one is started for the next call, in the background); or the server
declines (another uid, limits it cannot take, its code changed). Once the server has accepted
a call it owns it: if the server dies then, the call fails with a message, never runs twice.
"""

from __future__ import annotations

import os
import sys
from _socket import AF_UNIX, SCM_RIGHTS, SOCK_STREAM, SOL_SOCKET, socket

PROTOCOL = 1
HEADER_BYTES = 8
MAX_REPLY_BYTES = 4096
SERVER_ENV = "WATTBATCH_SERVER"


def main() -> None:
    argv = sys.argv[1:]
    code = None
    if _eligible(argv, os.environ):
        code = _ask_server(argv)
    if code is None:
        from .cli import main as in_process
        in_process()
    sys.exit(code)


def _eligible(argv: list[str], environ: dict[str, str] | os._Environ) -> bool:
    if environ.get(SERVER_ENV, "1").lower() in ("0", "off", "no", "false"):
        return False
    if environ.get("WATTBATCH_SBATCH_CALLER"):
        return False
    return not any(w == "--wait" or w.startswith("--wait=") or w == "-W" for w in argv)


def runtime_dir() -> str | None:
    """A directory only this user can enter: ``$XDG_RUNTIME_DIR/wattbatch`` or
    ``/tmp/wattbatch-<uid>``; None when it cannot be made safe."""
    uid = os.getuid()
    base = os.environ.get("XDG_RUNTIME_DIR")
    where = os.path.join(base, "wattbatch") if base else f"/tmp/wattbatch-{uid}"
    try:
        os.mkdir(where, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        st = os.lstat(where)
    except OSError:
        return None
    if st.st_uid != uid or st.st_mode & 0o077 or not os.path.isdir(where) or \
            os.path.islink(where):
        return None
    return where


def code_stamp() -> str:
    """Names the code a server runs: this interpreter and when the package was installed."""
    here = os.path.dirname(os.path.abspath(__file__))
    parts = [sys.executable, here]
    for rel in ("cli.py", "decide.py", os.path.join("..", "slurm_plugin", "__init__.py")):
        try:
            parts.append(str(os.stat(os.path.join(here, rel)).st_mtime_ns))
        except OSError:
            parts.append("-")
    text = "\0".join(parts).encode("utf-8", "surrogateescape")
    h = 0xcbf29ce484222325                      # FNV-1a, 64 bit: stable across processes
    for b in text:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def socket_path() -> str | None:
    where = runtime_dir()
    return os.path.join(where, f"server-{code_stamp()}.sock") if where else None


def _fd_words(argv: list[str]) -> list[int]:
    out = []
    for w in argv:
        if w.startswith("/dev/fd/") and w[8:].isdigit() and int(w[8:]) > 2:
            out.append(int(w[8:]))
    return out


def _limits() -> list[tuple[int, int, int]]:
    import resource
    out = []
    for res in range(32):                  # every limit the kernel knows (Linux: 16)
        try:
            soft, hard = resource.getrlimit(res)
        except (ValueError, OSError):
            continue
        out.append((res, soft, hard))
    return out


def request(argv: list[str]) -> dict:
    """Everything of this process that a submission depends on."""
    umask = os.umask(0)
    os.umask(umask)
    return {"protocol": PROTOCOL, "argv0": os.path.realpath(sys.argv[0]) if sys.argv[0] else "",
            "argv": argv, "environ": dict(os.environ), "cwd": os.getcwd(), "umask": umask,
            "limits": _limits(), "groups": sorted(os.getgroups()), "gid": os.getgid(),
            "priority": os.getpriority(os.PRIO_PROCESS, 0)}


def frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(HEADER_BYTES, "big") + payload


def read_frame(conn: socket, limit: int) -> bytes | None:
    head = read_exact(conn, HEADER_BYTES)
    if head is None:
        return None
    size = int.from_bytes(head, "big")
    return read_exact(conn, size) if size <= limit else None


def read_exact(conn: socket, size: int) -> bytes | None:
    buf = b""
    while len(buf) < size:
        chunk = conn.recv(size - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def _ask_server(argv: list[str]) -> int | None:
    """The exit code of the call run by the server; None: run it here."""
    import marshal
    path = socket_path()
    if path is None:
        return None
    from array import array
    conn = socket(AF_UNIX, SOCK_STREAM)
    try:
        try:
            conn.connect(path)
        except OSError:
            _start_server(path)
            return None
        try:
            data = frame(marshal.dumps(request(argv)))
            fds = array("i", [0, 1, 2] + _fd_words(argv))
            sent = conn.sendmsg([data], [(SOL_SOCKET, SCM_RIGHTS, fds)])
            if sent < len(data):
                conn.sendall(data[sent:])
            answer = read_frame(conn, MAX_REPLY_BYTES)
        except (OSError, ValueError):
            return None                   # nothing was accepted: run here
        if answer is None or not answer.startswith(b"accepted"):
            return None                   # declined (the reason is the server's to log)
        try:
            done = read_frame(conn, MAX_REPLY_BYTES)
        except OSError:
            done = None
    finally:
        conn.close()
    if done is None or not done.startswith(b"exit "):
        sys.stderr.write("wattbatch: error: the submission server stopped while running this "
                         "call; check `squeue --me` before submitting again (set "
                         f"{SERVER_ENV}=0 to run wattbatch without it)\n")
        return 1
    return int(done[5:])


def _start_server(path: str) -> None:
    """Start the server for the next call, detached; this call does not wait for it. It
    imports the same copy of the code as this process (not whatever the cwd holds)."""
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    boot = f"import sys; sys.path.insert(0, {top!r}); from wrapper.server import main; main()"
    pid = os.fork()
    if pid != 0:
        os.waitpid(pid, 0)
        return
    try:                                   # the child: a new session, no streams of ours
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        os.chdir("/")
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, 1 << 16)
        os.execv(sys.executable, [sys.executable, "-P", "-c", boot, path])
    finally:
        os._exit(1)


if __name__ == "__main__":
    main()
