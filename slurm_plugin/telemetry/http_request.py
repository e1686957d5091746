"""One HTTP/1.0 request over a socket: what the InfluxDB client needs, without ``urllib``.

``urllib.request`` and ``http.client`` pull in ``email``, ``ssl`` and ``calendar`` (about 30 ms
of a ``wattbatch`` start, which is its latency). InfluxDB's API needs one request per
connection, a body and a status: an HTTP/1.0 request is answered without chunked transfer
encoding and ends when the server closes. ``https://`` loads ``ssl`` only when used. The whole
exchange (connect, send, every read) shares one deadline of ``timeout_s``.
"""

from __future__ import annotations

import socket
import time

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Mapping

_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


class HttpError(Exception):
    """The server answered with a status of 300 or more."""

    def __init__(self, status: int, reason: str, body: bytes) -> None:
        super().__init__(f"HTTP {status} {reason}")
        self.status, self.reason, self.body = status, reason, body


def quote(text: str) -> str:
    """Percent-encoding of a query value (RFC 3986 unreserved characters kept)."""
    return "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in text.encode("utf-8"))


def urlencode(params: Mapping[str, str]) -> str:
    return "&".join(f"{quote(k)}={quote(v)}" for k, v in params.items())


def split_url(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path prefix) of ``http[s]://host[:port][/prefix]``."""
    scheme, _, rest = url.partition("://")
    netloc, slash, prefix = rest.partition("/")
    host, port = netloc, 443 if scheme == "https" else 80
    if netloc.startswith("["):                          # [IPv6]:port
        host, _, tail = netloc[1:].partition("]")
        if tail.startswith(":"):
            port = int(tail[1:])
    elif ":" in netloc:
        host, _, text = netloc.rpartition(":")
        port = int(text)
    return scheme, host, port, (slash + prefix).rstrip("/")


def request(method: str, url: str, path: str, *, headers: Mapping[str, str] | None = None,
            body: bytes | None = None, timeout_s: float = 1.0) -> tuple[int, dict[str, str], bytes]:
    """(status, headers with lower-case names, body) of ``method url+path``.

    Raises ``HttpError`` for a status of 300 or more, ``TimeoutError`` past ``timeout_s``,
    ``OSError`` when the server cannot be reached or the answer is not HTTP."""
    scheme, host, port, prefix = split_url(url)
    deadline = time.monotonic() + timeout_s
    lines = [f"{method} {prefix}{path} HTTP/1.0", f"Host: {host}:{port}",
             "Accept: application/json", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    wire = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")
    with socket.create_connection((host, port), timeout=timeout_s) as raw:
        sock = raw
        if scheme == "https":
            import ssl
            sock = ssl.create_default_context().wrap_socket(raw, server_hostname=host)
        _left(sock, deadline)
        sock.sendall(wire)
        chunks = []
        while True:
            _left(sock, deadline)
            data = sock.recv(65536)
            if not data:
                break
            chunks.append(data)
    return _parse(b"".join(chunks))


def _left(sock: socket.socket, deadline: float) -> None:
    remaining_s = deadline - time.monotonic()
    if remaining_s <= 0:
        raise TimeoutError("timed out")
    sock.settimeout(remaining_s)


def _parse(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    head, sep, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    parts = status_line.split(" ", 2)
    if not sep or len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise OSError(f"not an HTTP answer: {answer[:80]!r}")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = _unchunk(body)
    status = int(parts[1])
    if status >= 300:
        raise HttpError(status, parts[2] if len(parts) > 2 else "", body)
    return status, headers, body


def _unchunk(body: bytes) -> bytes:
    out, pos = [], 0
    while True:
        end = body.find(b"\r\n", pos)
        if end < 0:
            raise OSError("truncated chunked answer")
        size = int(body[pos:end].split(b";")[0], 16)
        if size == 0:
            return b"".join(out)
        out.append(body[end + 2:end + 2 + size])
        pos = end + 4 + size
