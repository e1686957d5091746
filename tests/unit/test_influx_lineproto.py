"""Line protocol escaping and the InfluxDB client's HTTP behaviour against a loopback stub."""

from __future__ import annotations

import base64
import http.server
import json
import socket
import threading
import time
import urllib.parse

import pytest

from slurm_plugin.errors import InputError, TelemetryError
from slurm_plugin.telemetry.influx import InfluxClient, parse_results, quote_ident, quote_str
from slurm_plugin.telemetry.lineproto import Point, time_ns


def test_escaping_of_every_part():
    p = Point("gpu power,x", {"node": "a b,c=d", "k=1": "v"}, {"f x": 1.5, "s": 'say "hi" \\'},
              1.0)
    assert p.to_line() == ('gpu\\ power\\,x,k\\=1=v,node=a\\ b\\,c\\=d '
                           'f\\ x=1.5,s="say \\"hi\\" \\\\" 1000000000')


def test_field_types_and_sorted_tags():
    p = Point("m", {"b": "2", "a": "1"}, {"i": 3, "f": 3.0, "t": True, "n": False})
    assert p.to_line() == "m,a=1,b=2 f=3.0,i=3i,n=false,t=true"


def test_empty_tags_and_non_finite_fields_are_left_out():
    p = Point("m", {"a": "", "b": "x"}, {"nan": float("nan"), "inf": float("inf"), "ok": 2.0})
    assert p.to_line() == "m,b=x ok=2.0"


def test_time_is_written_in_nanoseconds_exactly():
    assert time_ns(1672531200.0) == 1672531200 * 10**9
    assert time_ns(1.25) == 1_250_000_000
    assert Point("m", {}, {"v": 1.0}, 1700000000.5).to_line().endswith(" 1700000000500000000")


@pytest.mark.parametrize("point, needle", [
    (Point("m", {}, {"v": float("nan")}), "no finite field"),
    (Point("m", {}, {}), "no finite field"),
    (Point("", {}, {"v": 1.0}), "measurement is empty"),
    (Point("m", {"node": "a\nb"}, {"v": 1.0}), "newline"),
    (Point("m", {}, {"v": [1]}), "use float, int, bool or str"),
])
def test_unwritable_points_raise_input_error(point, needle):
    with pytest.raises(InputError, match=needle):
        point.to_line()


def test_influxql_quoting():
    assert quote_ident('a"b') == '"a\\"b"'
    assert quote_str("it's") == "'it\\'s'"


def test_chunked_answer_is_merged_and_times_are_seconds():
    chunk = {"results": [{"statement_id": 0, "series": [
        {"name": "m", "tags": {"zone": "GB"}, "columns": ["time", "v"],
         "values": [[1_000_000_000, 1.0]]}], "partial": True}]}
    chunk2 = {"results": [{"statement_id": 0, "series": [
        {"name": "m", "tags": {"zone": "GB"}, "columns": ["time", "v"],
         "values": [[2_500_000_000, 2.0]]}]}]}
    raw = (json.dumps(chunk) + "\n" + json.dumps(chunk2) + "\n").encode()
    [s] = parse_results(raw, "GET x")
    assert s.tags == {"zone": "GB"} and s.values == ((1.0, 1.0), (2.5, 2.0))
    assert s.rows() == [{"time": 1.0, "v": 1.0}, {"time": 2.5, "v": 2.0}]


def test_statement_error_raises_with_query():
    raw = json.dumps({"results": [{"statement_id": 0, "error": "database not found: x"}]})
    with pytest.raises(TelemetryError, match="database not found: x.*SELECT 1"):
        parse_results(raw.encode(), "GET http://h/query", "SELECT 1")


class _Stub(http.server.BaseHTTPRequestHandler):
    requests: list = []
    reply: bytes = b'{"results":[{"statement_id":0}]}'
    status = 200

    def _handle(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        url = urllib.parse.urlsplit(self.path)
        self.requests.append((self.command, url.path, dict(urllib.parse.parse_qsl(url.query)),
                              dict(self.headers), body.decode()))
        self.send_response(self.status if url.path != "/write" or self.status != 200 else 204)
        self.send_header("X-Influxdb-Version", "stub")
        self.end_headers()
        if url.path == "/query" or self.status != 200:
            self.wfile.write(self.reply)

    do_GET = do_POST = _handle

    def log_message(self, *args):
        pass


@pytest.fixture()
def stub():
    _Stub.requests, _Stub.status = [], 200
    _Stub.reply = b'{"results":[{"statement_id":0}]}'
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Stub
    server.shutdown()
    server.server_close()


def test_writes_are_batched_with_ns_precision(stub):
    url, handler = stub
    client = InfluxClient(url, "db1", batch_size=3)
    assert client.write(Point("m", {"i": str(i)}, {"v": 1.0}, i) for i in range(7)) == 7
    writes = [r for r in handler.requests if r[1] == "/write"]
    assert [r[4].count("\n") for r in writes] == [3, 3, 1]
    assert all(r[0] == "POST" and r[2] == {"db": "db1", "precision": "ns"} for r in writes)


def test_token_auth_header(stub):
    url, handler = stub
    InfluxClient(url, "db", token="tok", username="u", password="p").query("SHOW DATABASES")
    assert handler.requests[-1][3]["Authorization"] == "Token tok"


def test_basic_auth_and_read_verbs_use_get(stub):
    url, handler = stub
    client = InfluxClient(url, "db", username="u", password="p:w")
    client.query("SELECT * FROM m")
    client.create_database()
    (m1, _, q1, h1, _), (m2, _, q2, _, _) = handler.requests
    assert h1["Authorization"] == "Basic " + base64.b64encode(b"u:p:w").decode()
    assert (m1, m2) == ("GET", "POST")
    assert q1["epoch"] == "ns" and q2["q"] == 'CREATE DATABASE "db"'
    assert "p:w" not in json.dumps(q1)


def test_http_error_names_url_cause_and_fix(stub):
    url, handler = stub
    handler.status, handler.reply = 401, b'{"error":"authorization failed"}'
    with pytest.raises(TelemetryError) as info:
        InfluxClient(url, "db").write([Point("m", {}, {"v": 1.0})])
    msg = str(info.value)
    assert f"POST {url}/write" in msg and "HTTP 401" in msg and "authorization failed" in msg
    assert "influx.username" in msg


def test_unreachable_server_fails_fast_naming_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = InfluxClient(f"http://127.0.0.1:{port}", "db", timeout_s=0.5)
    t0 = time.monotonic()
    with pytest.raises(TelemetryError, match=f"127.0.0.1:{port}/query.*refused"):
        client.query("SELECT 1")
    assert time.monotonic() - t0 < 0.5


def test_silent_server_times_out():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)          # accepts the connection, never answers
        client = InfluxClient(f"http://127.0.0.1:{s.getsockname()[1]}", "db", timeout_s=0.2)
        t0 = time.monotonic()
        with pytest.raises(TelemetryError, match="timed out|timeout"):
            client.write([Point("m", {}, {"v": 1.0})])
        assert time.monotonic() - t0 < 1.0


def test_bad_url_is_a_telemetry_error():
    with pytest.raises(TelemetryError, match="influx.url"):
        InfluxClient("127.0.0.1:8086", "db")
