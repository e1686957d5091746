"""InfluxDB client over the v1 HTTP API, with the standard library only.

``POST /write`` (line protocol, ``precision=ns``, batched), ``GET|POST /query`` (InfluxQL,
JSON results, ``epoch=ns``, chunked responses merged). InfluxDB 1.x serves this API natively
and 2.x/3.x for compatibility. Auth: user/password (HTTP basic auth) or a token
(``Authorization: Token ...``; a token wins when both are set). Every failure raises
``TelemetryError`` naming the method, the URL and the cause. With a ``SkipMemory``
(``skip_memory``; ``wattbatch`` gives one) a server that timed out or could not be reached is
skipped at once, with a ``TelemetryError`` saying so and until when, by every later request
within its window; any answer clears it.
"""

from __future__ import annotations

import binascii
import json
from _thread import allocate_lock

from ..errors import TelemetryError
from ..record import record
from .http_request import HttpError, request, urlencode
from .lineproto import Point
from .skip_memory import SkipMemory, remembered

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Any, Iterable, Mapping

_READ_VERBS = ("SELECT", "SHOW")


@record
class Series:
    """One series of a query result; ``time`` values are epoch seconds (float)."""

    name: str
    tags: Mapping[str, str]
    columns: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]

    def rows(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.values]


def quote_ident(name: str) -> str:
    """An InfluxQL identifier in double quotes."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def quote_str(value: str) -> str:
    """An InfluxQL string literal in single quotes."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class InfluxClient:
    """One database on one InfluxDB server."""

    def __init__(self, url: str, database: str, *, username: str = "", password: str = "",
                 token: str = "", timeout_s: float = 1.0, batch_size: int = 5000,
                 memory: SkipMemory | None = None) -> None:
        if not url.startswith(("http://", "https://")):
            raise TelemetryError(f"influx: influx.url = {url!r}: must start with http:// or "
                                 "https://; fix influx.url in the site config")
        self.url = url.rstrip("/")
        self.database = database
        self.timeout_s = timeout_s
        self.batch_size = batch_size
        self.memory = memory
        self._note = ""          # with a memory: its note on this client's remembered failure
        self._failed = ""        # ...and the failure's message, which its later queries raise
        self._lock = allocate_lock()
        self._headers: dict[str, str] = {}
        if token:
            self._headers["Authorization"] = f"Token {token}"
        elif username:
            raw = f"{username}:{password}".encode()
            basic = binascii.b2a_base64(raw, newline=False).decode()
            self._headers["Authorization"] = f"Basic {basic}"

    @classmethod
    def from_config(cls, cfg: Any, memory: SkipMemory | None = None) -> "InfluxClient":
        """Build from a ``SiteConfig`` (keys ``influx.*``); ``memory``: see the module."""
        return cls(cfg["influx.url"], cfg["influx.database"], username=cfg["influx.username"],
                   password=cfg["influx.password"], token=cfg["influx.token"],
                   timeout_s=cfg["influx.timeout_s"], memory=memory)

    def _send(self, method: str, path: str, where: str, headers: Mapping[str, str],
              body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
        """``request``, through the memory when there is one: raises ``TelemetryError`` at
        once while the server is skipped; notes a timeout or an unreachable server in the
        error it raises (``OSError`` with ``wattbatch_note``), an answer as a success."""
        memory = self.memory
        if memory is None:
            return request(method, self.url, path, headers=headers, body=body,
                           timeout_s=self.timeout_s)
        if self._failed:         # this call's other queries (GPUs, progress): the same failure
            raise TelemetryError(self._failed)
        skipped = memory.skipped(self.url)
        if skipped:
            raise TelemetryError(f"influx: {where}: {skipped}; check that InfluxDB runs there "
                                 "and influx.url / influx.timeout_s")
        try:
            answer = request(method, self.url, path, headers=headers, body=body,
                             timeout_s=self.timeout_s)
        except HttpError:
            memory.succeeded(self.url)              # it answered
            raise
        except OSError as exc:
            cause = remembered(exc)
            if cause:
                with self._lock:     # queries failing at the same time: remembered once
                    self._note = self._note or memory.failed(self.url, cause)
                exc.wattbatch_note = self._note                 # type: ignore[attr-defined]
            raise
        memory.succeeded(self.url)
        return answer

    # --- HTTP -----------------------------------------------------------------------------
    def _request(self, method: str, path: str, params: Mapping[str, str],
                 body: bytes | None = None) -> bytes:
        where = f"{method} {self.url}{path}"
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = "text/plain; charset=utf-8"
        try:
            return self._send(method, f"{path}?{urlencode(params)}", where, headers, body)[2]
        except HttpError as exc:
            detail = exc.body.decode("utf-8", "replace").strip()
            try:
                detail = json.loads(detail).get("error", detail)
            except (ValueError, AttributeError):
                pass
            raise TelemetryError(f"influx: {where}: HTTP {exc.status}: {detail or exc.reason}"
                                 f"{_hint(exc.status)}") from None
        except (OSError, ValueError) as exc:      # refused, timed out, not HTTP, bad port
            cause = "timed out" if isinstance(exc, TimeoutError) else (
                getattr(exc, "strerror", None) or exc)
            said = (f"influx: {where}: {cause or type(exc).__name__} (timeout "
                    f"{self.timeout_s:g} s); check that InfluxDB runs there and influx.url / "
                    f"influx.timeout_s{getattr(exc, 'wattbatch_note', '')}")
            if getattr(exc, "wattbatch_note", ""):
                with self._lock:     # and said in the same words (one warning line)
                    said = self._failed = self._failed or said
            raise TelemetryError(said) from None

    def ping(self) -> str:
        """The server's version (``X-Influxdb-Version``); raises if it does not answer."""
        try:
            return self._send("GET", "/ping", f"GET {self.url}/ping", self._headers
                              )[1].get("x-influxdb-version", "")
        except (OSError, ValueError, HttpError) as exc:
            raise TelemetryError(f"influx: GET {self.url}/ping: {exc}; "
                                 "check that InfluxDB runs there and influx.url"
                                 f"{getattr(exc, 'wattbatch_note', '')}") from None

    # --- write ----------------------------------------------------------------------------
    def write(self, points: Iterable[Point]) -> int:
        """Write points in batches of ``batch_size`` lines; returns how many were sent.

        A point with the same measurement, tag set and time as a stored one replaces it, so
        writing the same points twice stores them once."""
        sent = 0
        batch: list[str] = []
        for point in points:
            batch.append(point.to_line())
            if len(batch) >= self.batch_size:
                sent += self.write_lines(batch)
                batch = []
        if batch:
            sent += self.write_lines(batch)
        return sent

    def write_lines(self, lines: list[str]) -> int:
        """Send line-protocol lines as they are (one request)."""
        body = ("\n".join(lines) + "\n").encode()
        self._request("POST", "/write", {"db": self.database, "precision": "ns"}, body)
        return len(lines)

    # --- query ----------------------------------------------------------------------------
    def query(self, influxql: str) -> list[Series]:
        """Run InfluxQL against the database; series of every statement, times in seconds."""
        verb = influxql.lstrip().split(None, 1)[0].upper() if influxql.strip() else ""
        method = "GET" if verb in _READ_VERBS else "POST"
        params = {"db": self.database, "q": influxql, "epoch": "ns", "chunked": "true",
                  "chunk_size": "10000"}
        raw = self._request(method, "/query", params)
        return parse_results(raw, f"{method} {self.url}/query", influxql)

    def create_database(self, name: str | None = None) -> None:
        """``CREATE DATABASE`` (a no-op when it exists)."""
        self.query(f"CREATE DATABASE {quote_ident(name or self.database)}")

    def drop_database(self, name: str | None = None) -> None:
        self.query(f"DROP DATABASE {quote_ident(name or self.database)}")


def _hint(code: int) -> str:
    if code in (401, 403):
        return "; check influx.username/influx.password or influx.token"
    if code == 404:
        return "; check influx.database (create it with `wattctl carbon import` or CREATE DATABASE)"
    return ""


def parse_results(raw: bytes, where: str, influxql: str = "") -> list[Series]:
    """Parse one JSON document or the newline-separated chunks of a chunked answer.

    Chunks of one series (same statement, name and tags) are merged in order."""
    merged: dict[tuple, list] = {}
    order: list[tuple] = []
    for chunk in raw.decode("utf-8", "replace").splitlines():
        if not chunk.strip():
            continue
        try:
            doc = json.loads(chunk)
        except ValueError:
            raise TelemetryError(f"influx: {where}: answer is not JSON: {chunk[:200]!r}") from None
        if "error" in doc:
            raise TelemetryError(f"influx: {where}: {doc['error']} (query: {influxql[:200]})")
        for result in doc.get("results", []):
            if "error" in result:
                raise TelemetryError(f"influx: {where}: {result['error']} "
                                     f"(query: {influxql[:200]})")
            for s in result.get("series", []):
                tags = s.get("tags") or {}
                key = (result.get("statement_id", 0), s.get("name", ""),
                       tuple(sorted(tags.items())), tuple(s.get("columns", ())))
                if key not in merged:
                    merged[key] = []
                    order.append(key)
                merged[key].extend(s.get("values") or [])
    out = []
    for key in order:
        columns = key[3]
        ti = columns.index("time") if "time" in columns else -1
        values = tuple(tuple(v / 1_000_000_000 if i == ti and isinstance(v, int) else v
                             for i, v in enumerate(row)) for row in merged[key])
        out.append(Series(key[1], dict(key[2]), columns, values))
    return out
