"""The user's warm ``wattbatch`` server: the policy path imported once, a fork per call.

Started by ``wrapper.server_client`` on a call that found none (``python -c ... PATH``), it
listens on a socket in a directory only its user can enter, and exits after
``wrapper.server_idle_s`` without calls (site config; 0: no server, every call declined).
For each connection it forks; the child checks that the caller is the same user, takes the
caller's streams, ``/dev/fd/N`` files, environment, working directory, umask, resource limits,
groups and priority (and declines when it cannot take one, so the caller runs the call
itself), says ``accepted``, runs ``wrapper.cli.run`` on the caller's arguments exactly as the
caller would have, and sends its exit code. A call shares nothing with the next one but the
snapshot cache (``snapshot_cache``) and the site's cluster view, kept decoded (looked at for a
newer file before each fork and every ``VIEW_POLL_S`` between calls; each call still checks the
file it decides from: ``cluster_view.read``): each runs in its own child of a parent that never
handles a call, and only keeps what the children send it over their pipes.
"""

from __future__ import annotations

import fcntl
import marshal
import os
import select
import signal
import socket
import struct
import sys
import time

from . import snapshot_cache
from .server_client import HEADER_BYTES, PROTOCOL, code_stamp, frame, read_exact, socket_path

MAX_REQUEST_BYTES = 16 << 20
MAX_FDS = 64
DEFAULT_IDLE_S = 300.0
KEEP_S = 3600.0          # the longest wrapper.snapshot_cache_s; older entries serve no call
VIEW_POLL_S = 2.0        # how often a kept cluster view is looked at for a newer file


def main() -> None:
    path = sys.argv[1]
    if os.path.basename(path) != os.path.basename(socket_path() or ""):
        sys.exit(2)                      # started for other code than this copy's
    with open(path + ".lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            sys.exit(0)                  # another server has it
        serve(path, _idle_s())


def _idle_s() -> float:
    try:
        from slurm_plugin import config
        return float(config.load()["wrapper.server_idle_s"])
    except Exception:                    # noqa: BLE001 - a broken config is the call's to report
        return DEFAULT_IDLE_S


def warm() -> None:
    """Import what a call uses, so that each forked child has it."""
    from slurm_plugin.policy.registry import get_policy, policy_names
    from slurm_plugin.slurm import snapshot  # noqa: F401
    from slurm_plugin.telemetry import carbon, readers  # noqa: F401

    from . import cli, decide, render  # noqa: F401
    for name in policy_names():
        try:
            get_policy(name)
        except Exception:                # noqa: BLE001 - a call naming it will say why
            pass
    try:
        render.warm_templates()
    except Exception:                    # noqa: BLE001
        pass
    from slurm_plugin.record import compile_all
    compile_all()


def serve(path: str, idle_s: float) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    listener.listen(64)
    if idle_s > 0:
        warm()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)      # children are reaped by the kernel
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))   # leave no socket behind
    stamp = code_stamp()
    last_s = time.monotonic()
    shared = snapshot_cache.Shared()
    if idle_s > 0:
        _keep_site_view(shared)
    pipes: dict[int, bytearray] = {}        # a running call's pipe -> what it sent so far
    try:
        while True:
            wait_s = max(0.0, idle_s - (time.monotonic() - last_s))
            if shared.views:
                wait_s = min(wait_s, VIEW_POLL_S)
            ready, _, _ = select.select([listener, *pipes], [], [],
                                        wait_s if idle_s > 0 else 1.0)
            for fd in ready:                # first: a job placed is known before the next call
                if fd in pipes:
                    _drain(fd, pipes, shared)
            if shared.views:                # the site's new view decoded once, for every call
                _keep_views(shared)
            if listener not in ready:
                if idle_s <= 0 or time.monotonic() - last_s >= idle_s:
                    return
                continue
            conn, _ = listener.accept()
            last_s = time.monotonic()
            if idle_s <= 0 or code_stamp() != stamp:
                _decline(conn)
                if idle_s > 0:
                    return                   # the code changed under us: the next call starts
                continue                     # a server of the new code
            shared.prune(time.time(), KEEP_S)
            read_end, write_end = os.pipe()
            if os.fork() == 0:
                code = 1
                try:                         # the child never returns into this loop
                    listener.close()
                    os.close(read_end)
                    for fd in pipes:
                        os.close(fd)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    signal.signal(signal.SIGTERM, signal.SIG_DFL)
                    code = _child(conn, shared, write_end)
                finally:
                    os._exit(code)
            os.close(write_end)
            pipes[read_end] = bytearray()
            conn.close()
    finally:
        listener.close()
        for leftover in (path, path + ".lock"):   # the lock is still ours: no race on it
            try:
                os.unlink(leftover)
            except OSError:
                pass


def _drain(fd: int, pipes: dict[int, bytearray], shared: snapshot_cache.Shared) -> None:
    """Read what a call's child sent; at its end (or on garbage) the pipe is closed."""
    try:
        data = os.read(fd, 1 << 20)
        pipes[fd] += data
        for message in snapshot_cache.unframe(pipes[fd]):
            if shared.take(message) and shared.warm_due(message[1], time.monotonic()):
                _warm(message[3])
    except (OSError, ValueError, EOFError, TypeError):
        data = b""
    if not data:
        os.close(fd)
        del pipes[fd]


def _keep_site_view(shared: snapshot_cache.Shared) -> None:
    """At start: keep the view of the site config this server started under, so the calls
    after the one that started it find it decoded (later calls name the views they use)."""
    try:
        from slurm_plugin import config
        cfg = config.load()
        if cfg["view.path"] and cfg["view.keep_in_server"]:
            shared.take(("view", "", time.time(), snapshot_cache.view_blob(cfg["view.path"])))
            _keep_views(shared)
    except Exception:                    # noqa: BLE001 - a broken config is the call's to report
        pass


def _keep_views(shared: snapshot_cache.Shared) -> None:
    for _, blob in list(shared.views.values()):
        try:
            snapshot_cache.keep_view(blob)
        except Exception:                # noqa: BLE001 - only a head start for the next call
            pass


def _warm(blob: bytes) -> None:
    try:
        snapshot_cache.warm(blob)
    except Exception:                    # noqa: BLE001 - only a head start for the next call
        pass


def _decline(conn: socket.socket) -> None:
    try:
        conn.sendall(frame(b"declined"))
    except OSError:
        pass
    conn.close()


def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def _receive(conn: socket.socket) -> tuple[dict, list[int]] | None:
    head, fds, _, _ = socket.recv_fds(conn, HEADER_BYTES, MAX_FDS)
    if len(head) != HEADER_BYTES:
        return None
    size = int.from_bytes(head, "big")
    if size > MAX_REQUEST_BYTES:
        return None
    body = read_exact(conn, size)
    if body is None:
        return None
    req = marshal.loads(body)
    return (req, fds) if isinstance(req, dict) and req.get("protocol") == PROTOCOL else None


def _take_state(req: dict, fds: list[int]) -> bool:
    """Become the caller (streams, fds, environment, cwd, umask, limits); False: cannot."""
    import resource
    if sorted(os.getgroups()) != req["groups"] or os.getgid() != req["gid"]:
        return False
    if os.getpriority(os.PRIO_PROCESS, 0) != req["priority"]:
        return False
    for res, soft, hard in req["limits"]:
        try:
            if resource.getrlimit(res) != (soft, hard):
                resource.setrlimit(res, (soft, hard))
        except (ValueError, OSError):
            return False
    targets = [0, 1, 2] + [int(w[8:]) for w in req["argv"]
                           if w.startswith("/dev/fd/") and w[8:].isdigit() and int(w[8:]) > 2]
    if len(fds) != len(targets):
        return False
    moved = [os.dup(fd) for fd in fds]          # out of the way of every target number
    for fd in fds:
        os.close(fd)
    for fd, target in zip(moved, targets):
        os.dup2(fd, target, inheritable=True)
        os.close(fd)
    try:
        os.chdir(req["cwd"])
    except OSError:
        return False
    os.umask(req["umask"])
    os.environ.clear()
    os.environ.update(req["environ"])
    time.tzset()
    sys.argv = [req["argv0"], *req["argv"]]
    return True


def _child(conn: socket.socket, shared: snapshot_cache.Shared, write_end: int) -> int:
    high = fcntl.fcntl(conn.fileno(), fcntl.F_DUPFD_CLOEXEC, 1000)
    to_server = fcntl.fcntl(write_end, fcntl.F_DUPFD_CLOEXEC, high + 1)
    conn.close()
    os.closerange(3, high)             # every number below is free for the caller's fds
    conn = socket.socket(fileno=high)
    try:
        if _peer_uid(conn) != os.getuid():
            _decline(conn)
            return 0
        got = _receive(conn)
        if got is None or not _take_state(*got):
            _decline(conn)
            return 0
    except (OSError, ValueError, EOFError, TypeError, KeyError):
        _decline(conn)
        return 0
    req = got[0]
    conn.sendall(frame(b"accepted"))
    sys.stdin = open(0, "r", closefd=False)
    sys.stdout = open(1, "w", closefd=False, errors="surrogateescape")
    sys.stderr = open(2, "w", buffering=1, closefd=False, errors="backslashreplace")
    from .cli import LIVE, Io, Providers, run
    cache = snapshot_cache.CachedProviders(shared, LIVE, lambda m: _send(to_server, m))
    code = 1
    try:
        code = run(req["argv"], Io(os.environ, sys.stdin.buffer, sys.stdout, sys.stderr),
                   Providers(cache.snapshot, cache.readings, cache.submitted,
                             cache.decided))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:                # noqa: BLE001 - said on the caller's stderr
        import traceback
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except OSError:
                pass
    try:
        conn.sendall(frame(b"exit %d" % code))
    except OSError:
        pass
    _let_go(conn, req["argv"])
    try:
        cache.refresh()
    except Exception:                    # noqa: BLE001 - the next call reads Slurm itself
        pass
    return 0


def _send(fd: int, message: tuple) -> None:
    data = memoryview(snapshot_cache.frame(message))
    while data:
        data = data[os.write(fd, data):]


def _let_go(conn: socket.socket, argv: list[str]) -> None:
    """Close everything of the caller's, so that it (and whoever reads its output) is done."""
    conn.close()
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        try:
            stream.close()
        except OSError:
            pass
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    for word in argv:
        if word.startswith("/dev/fd/") and word[8:].isdigit() and int(word[8:]) > 2:
            try:
                os.close(int(word[8:]))
            except OSError:
                pass
