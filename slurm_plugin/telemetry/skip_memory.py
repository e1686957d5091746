"""Memory of a data source that timed out: later calls skip it at once for a while.

A ``wattbatch`` submission reads InfluxDB within ``influx.timeout_s``. When InfluxDB hangs
(it accepts the connection and never answers), every submission would wait that long; a
burst of 1,000 from a workflow manager, 1,000 times. So a source (keyed by its URL) that
timed out or could not be reached is remembered with the time, and every later call within
``window_s`` (``influx.skip_after_timeout_s``) skips it at once: the caller sees the same
failure, saying it was skipped and until when, and decides without the source as it would
have after the timeout. The first call that tries it again after the window and gets an
answer (any answer: an HTTP error is a server that answers) clears it.

What is remembered: a timeout, a name that does not resolve, a network or host that cannot be
reached. Not a refused or reset connection (the host answered at once, so trying costs
nothing; InfluxDB restarting is the usual cause, and skipping would only lose readings), nor
a bad answer.

The memory lives in one small file per source in ``directory`` (``wattbatch`` passes the
user's runtime directory, the one of its warm server's socket: only that user can enter it),
written atomically, so that it is shared by every call of the user: each one the warm server
runs in a forked child, each one run in-process (``WATTBATCH_SERVER=0``, ``--wait``), and
calls running at the same time. One file per source: no read-modify-write, so two calls never
lose each other's record. Within one call it is also kept in memory. Nothing here ever
raises: a file that cannot be read counts as no record, one that cannot be written is
skipped (the source is then tried again by the next call).
"""

from __future__ import annotations

import binascii
import errno
import json
import os
import socket
import time
from _thread import get_ident

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Callable

_UNREACHABLE = frozenset((errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN,
                          errno.EHOSTDOWN))


def remembered(exc: BaseException) -> str | None:
    """The cause to remember of a failed request (None: not remembered)."""
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, socket.gaierror):
        return f"could not be resolved ({exc.strerror or exc})"
    if isinstance(exc, OSError) and exc.errno in _UNREACHABLE:
        return f"could not be reached ({exc.strerror or exc})"
    return None


def _clock_text(t_s: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t_s))


class SkipMemory:
    """Which sources to skip, for ``window_s`` seconds after each failed (0: never skip;
    nothing is read or written). ``key`` names the site key in messages; ``directory`` None:
    remembered within this process only."""

    def __init__(self, directory: str | None, window_s: float, key: str,
                 clock: Callable[[], float] = time.time) -> None:
        self.directory = directory if window_s > 0 else None
        self.window_s = window_s
        self.key = key
        self.clock = clock
        self._here: dict[str, tuple[float, str]] = {}    # url -> (failed at, cause)

    def _path(self, url: str) -> str | None:
        if self.directory is None:
            return None
        return os.path.join(self.directory,
                            f"down-{binascii.crc32(url.encode('utf-8', 'replace')):08x}.json")

    def _record(self, url: str) -> tuple[float, str] | None:
        """(failed at, cause) of ``url``: this process's, else the file's; None: none."""
        if url in self._here:
            return self._here[url]
        path = self._path(url)
        if path is None:
            return None
        try:
            with open(path, encoding="utf-8") as fh:
                doc = json.load(fh)
            if doc["url"] != url:
                return None                 # another URL with the same crc32: not this one
            at_s, cause = float(doc["at_s"]), str(doc["cause"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return at_s, cause

    def skipped(self, url: str) -> str | None:
        """Why ``url`` is skipped now ("skipped until ..."), or None: try it."""
        if self.window_s <= 0:
            return None
        got = self._record(url)
        if got is None:
            return None
        at_s, cause = got
        now_s = self.clock()
        if not 0.0 <= now_s - at_s < self.window_s:     # past, or a clock set back: try again
            return None
        return (f"skipped until {_clock_text(at_s + self.window_s)}: it {cause} at "
                f"{_clock_text(at_s)} ({self.key} = {self.window_s:g})")

    def failed(self, url: str, cause: str) -> str:
        """Remember that ``url`` failed now; the note for the failure's message."""
        if self.window_s <= 0:
            return ""
        now_s = self.clock()
        self._here[url] = (now_s, cause)
        path = self._path(url)
        if path is not None:
            tmp = f"{path}.{os.getpid()}.{get_ident():x}.tmp"   # calls and threads apart
            try:
                with open(tmp, "w", encoding="utf-8") as fh:
                    json.dump({"url": url, "at_s": now_s, "cause": cause}, fh)
                os.replace(tmp, path)
            except OSError:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        return (f"; later calls skip it until {_clock_text(now_s + self.window_s)} "
                f"({self.key} = {self.window_s:g})")

    def succeeded(self, url: str) -> None:
        """``url`` answered: forget it (here and in the file)."""
        if self.window_s <= 0:
            return
        self._here.pop(url, None)
        path = self._path(url)
        if path is not None:
            try:
                os.unlink(path)
            except OSError:
                pass
