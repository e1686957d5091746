"""The script read once and handed to sbatch again as the same bytes under the same path."""

from __future__ import annotations

import io
import os
import subprocess

from wrapper import script_io
from wrapper.script_io import Script, fd_number, handoff, read

DATA = b"#!/bin/sh\n#SBATCH -J x\necho \xe9\n"


def test_fd_paths_and_kinds(tmp_path):
    assert [fd_number(p) for p in ("/dev/fd/63", "/proc/self/fd/7", "/dev/fd/x", "job.sh")] == [
        63, 7, -1, -1]
    path = tmp_path / "job.sh"
    path.write_bytes(DATA)
    got = read(str(path), io.BytesIO(b""))
    assert (got.data, got.kind, got.path) == (DATA, "file", str(path))
    piped = read("/dev/stdin", io.BytesIO(DATA))
    assert (piped.data, piped.kind, piped.fd) == (DATA, "fd", 0)
    assert read(None, io.BytesIO(DATA)).kind == "stdin"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"printf 'abc' > {fifo}"])
    assert read(str(fifo), io.BytesIO(b"")).kind == "fifo"
    writer.wait()


def _child_reads(path: str, feed: script_io.Handoff) -> bytes:
    return subprocess.run(["cat", path], stdin=feed.stdin_fd, pass_fds=feed.pass_fds,
                          capture_output=True, check=True, timeout=10).stdout


def test_the_same_bytes_reach_the_same_path(tmp_path):
    feed = handoff(Script(DATA, "/dev/stdin", "fd", 0), None)
    assert _child_reads("/dev/stdin", feed) == DATA
    feed.close()
    r, w = os.pipe()                       # a drained process substitution at some number
    os.close(w)
    feed = handoff(Script(DATA, f"/dev/fd/{r}", "fd", r), None)
    assert _child_reads(f"/dev/fd/{r}", feed) == DATA
    os.close(r)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    handoff(Script(DATA, str(fifo), "fifo"), None)
    assert _child_reads(str(fifo), script_io.Handoff()) == DATA
    feed = handoff(Script(b"", kind="none"), DATA)   # no path: the bytes on stdin
    assert _child_reads("-", feed) == DATA
