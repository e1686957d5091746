"""The job script, read once, and handed to sbatch as exactly those bytes.

A script may be readable only once: standard input, ``/dev/stdin``, a process substitution
(``sbatch <(...)``: ``/dev/fd/63``), a named pipe, a here-document. wattbatch reads it to
decide, so sbatch must get the same bytes again, under the same path, so that the job's name,
its ``Command`` and its stored script are what sbatch alone gives:

=============================  =================================================================
the script                     what sbatch gets
=============================  =================================================================
a regular file                 the path (sbatch reads the file itself)
standard input (no path)       the bytes on its standard input
``/dev/stdin``, fd 0           the path, and the bytes on its standard input
``/dev/fd/N``, ``/proc/self/   the path, and the bytes as an open file at descriptor N
fd/N``
a named pipe (FIFO)            the path, and the bytes written into the pipe again once sbatch
                               opens it
=============================  =================================================================
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import BinaryIO

_FD_DIRS = ("/dev/fd/", "/proc/self/fd/")
_STDIN_PATHS = ("/dev/stdin", "/proc/self/fd/0", "/dev/fd/0")


class Script:
    """The script's bytes; ``path`` as given on the command line (None: standard input);
    ``kind`` "stdin", "file", "fd", "fifo" (or "wrap", "none": no path to feed); ``fd`` the
    descriptor number of a kind "fd" path. (A plain class: ``@record`` compiles an
    ``__init__``, a millisecond of every submission.)"""

    __slots__ = ("data", "path", "kind", "fd")

    def __init__(self, data: bytes, path: str | None = None, kind: str = "stdin",
                 fd: int = -1) -> None:
        self.data, self.path, self.kind, self.fd = data, path, kind, fd


def read(path: str | None, stdin: BinaryIO) -> Script:
    """Read the script once (``OSError`` when sbatch could not open it either)."""
    if path is None:
        return Script(stdin.read())
    if path in _STDIN_PATHS:
        return Script(stdin.read(), path, "fd", 0)
    fd = fd_number(path)
    kind = "fd" if fd >= 0 else "fifo" if stat.S_ISFIFO(os.stat(path).st_mode) else "file"
    with open(path, "rb") as fh:
        data = fh.read()
    return Script(data, path, kind, fd)


def is_regular_file(path: str) -> bool:
    """``path`` names a regular file (not standard input, a descriptor or a pipe): reading it
    takes nothing from anyone who reads it later."""
    if path in _STDIN_PATHS or fd_number(path) >= 0:
        return False
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def fd_number(path: str) -> int:
    """N for ``/dev/fd/N`` or ``/proc/self/fd/N``, else -1."""
    for prefix in _FD_DIRS:
        number = path[len(prefix):]
        if path.startswith(prefix) and number.isdigit():
            return int(number)
    return -1


class Handoff:
    """How the subprocess gets the bytes: ``stdin_fd`` and ``pass_fds`` for ``proc.run``."""

    __slots__ = ("stdin_fd", "pass_fds", "opened")

    def __init__(self) -> None:
        self.stdin_fd: int | None = None
        self.pass_fds: tuple[int, ...] = ()
        self.opened: list[int] = []

    def close(self) -> None:
        for fd in self.opened:
            try:
                os.close(fd)
            except OSError:
                pass


def _bytes_file(data: bytes) -> int:
    """An unnamed temporary file holding ``data``, open at offset 0 (``O_TMPFILE``: no
    ``tempfile`` import, ~9 ms of wattbatch's start-up)."""
    tmp_dir = os.environ.get("TMPDIR") or "/tmp"
    try:
        fd = os.open(tmp_dir, os.O_TMPFILE | os.O_RDWR, 0o600)
    except (OSError, AttributeError):        # a file system without O_TMPFILE
        import tempfile
        fd, path = tempfile.mkstemp(prefix="wattbatch-")
        os.unlink(path)
    _write_all(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _feed_fifo(path: str, data: bytes) -> None:
    """Write ``data`` into the named pipe once a reader opens it (a daemon thread: if sbatch
    fails before it opens the pipe, the thread ends with wattbatch)."""
    def feed() -> None:
        try:
            fd = os.open(path, os.O_WRONLY)
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
        except OSError:
            pass
    import threading
    threading.Thread(target=feed, daemon=True).start()


def handoff(script: Script, stdin_data: bytes | None) -> Handoff:
    """Prepare the subprocess's inputs: ``stdin_data`` on its standard input (a script without
    a path), and the script's bytes again where its path would read them."""
    out = Handoff()
    if stdin_data is not None:
        out.stdin_fd = _bytes_file(stdin_data)
        out.opened.append(out.stdin_fd)
    if script.kind == "fd" and script.fd == 0:
        out.stdin_fd = _bytes_file(script.data)
        out.opened.append(out.stdin_fd)
    elif script.kind == "fd":
        tmp = _bytes_file(script.data)
        os.dup2(tmp, script.fd)          # the drained pipe at that number is not needed again
        os.close(tmp)
        out.pass_fds = (script.fd,)
    elif script.kind == "fifo" and script.path:
        _feed_fifo(script.path, script.data)
    return out
