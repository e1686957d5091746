"""An InfluxDB that hangs is waited on once, then skipped for ``influx.skip_after_timeout_s``
(``telemetry.skip_memory``), against a real TCP server on loopback that accepts connections and
never answers. Whether a call skipped is seen in what the server accepted (a skipped call makes
no connection) and in the warning; speed is measured by benchmarks/bench_influx_hang.py, here
only against bounds a call that did not skip could not meet."""

from __future__ import annotations

import io
import json
import os
import socket
import threading
import time

import pytest

from slurm_plugin import config
from slurm_plugin.errors import ConfigError, TelemetryError
from slurm_plugin.model import Cluster, Gpu, Node, Placement
from slurm_plugin.policy import registry
from slurm_plugin.telemetry.influx import InfluxClient
from slurm_plugin.telemetry.skip_memory import SkipMemory
from wrapper import cli

KEY = "influx.skip_after_timeout_s"
ANSWER = (b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n"
          b'{"results":[{"statement_id":0}]}\n')


class Server:
    """127.0.0.1, a port of its own: hangs (accepts, holds, never reads or answers) while
    ``answer`` is None, else answers each request with it."""

    def __init__(self) -> None:
        self.answer: bytes | None = None
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted = 0
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            if self.answer is None:
                self.held.append(conn)
                continue
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                conn.sendall(self.answer)

    def connections(self, at_least: int = 0) -> int:
        """What was accepted, once it is at least ``at_least`` (the accept runs in a thread)."""
        for _ in range(500):
            if self.accepted >= at_least:
                break
            time.sleep(0.01)
        return self.accepted

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def client(url: str, memory: SkipMemory | None, timeout_s: float) -> InfluxClient:
    return InfluxClient(url, "db", timeout_s=timeout_s, memory=memory)


def query(c: InfluxClient) -> tuple[float, str]:
    """(seconds taken, the error's message; "" when it answered)."""
    t0 = time.monotonic()
    try:
        c.query('SELECT * FROM "gpu"')
        said = ""
    except TelemetryError as exc:
        said = str(exc)
    return time.monotonic() - t0, said


def test_first_call_waits_the_timeout_and_later_calls_skip_without_connecting(server, tmp_path):
    elapsed, said = query(client(server.url, SkipMemory(str(tmp_path), 60, KEY), 0.3))
    assert elapsed >= 0.3                                   # it waited the whole timeout
    assert "timed out (timeout 0.3 s)" in said and "later calls skip it until" in said
    assert f"({KEY} = 60)" in said
    assert server.connections(at_least=1) == 1
    assert len(list(tmp_path.glob("down-*.json"))) == 1
    for _ in range(3):         # each a call of its own (a fresh memory): only the file is shared
        # a timeout it would wait out: 30 s; skipped, it makes no connection at all
        elapsed, said = query(client(server.url, SkipMemory(str(tmp_path), 60, KEY), 30.0))
        assert elapsed < 15.0
        assert "skipped until" in said and "it timed out at" in said and KEY in said, said
        assert said.startswith(f"influx: GET {server.url}/query: ")
    assert server.connections() == 1


def test_tried_again_after_the_window_and_an_answer_clears_it(server, tmp_path):
    now = [1000.0]

    def call(timeout_s: float = 0.2) -> str:
        return query(client(server.url, SkipMemory(str(tmp_path), 60, KEY, clock=lambda: now[0]),
                            timeout_s))[1]
    assert "timed out" in call()
    assert server.connections(at_least=1) == 1
    now[0] = 1059.9
    assert "skipped until" in call(30.0)
    assert server.connections() == 1
    now[0] = 1060.0                                  # the window has passed: tried again
    said = call()
    assert "timed out" in said and "later calls skip it" in said
    assert server.connections(at_least=2) == 2
    now[0] = 1061.0                                  # ...and skipped again from its new failure
    assert "skipped until" in call(30.0)
    assert server.connections() == 2
    server.answer = ANSWER                           # InfluxDB is back
    now[0] = 1121.0
    assert call() == ""
    assert server.connections(at_least=3) == 3
    assert list(tmp_path.glob("down-*")) == []      # the answer cleared it
    server.answer = None                             # hangs again: the next call tries it
    now[0] = 1122.0
    said = call()
    assert "timed out" in said and "later calls skip it" in said
    assert server.connections(at_least=4) == 4


def test_an_http_error_is_an_answer_and_clears_it(server, tmp_path):
    assert "timed out" in query(client(server.url, SkipMemory(str(tmp_path), 60, KEY), 0.2))[1]
    (path,) = tmp_path.glob("down-*.json")
    doc = json.loads(path.read_text())
    doc["at_s"] -= 61                               # as if written a window ago
    path.write_text(json.dumps(doc))
    server.answer = b"HTTP/1.0 404 Not Found\r\n\r\n{\"error\": \"database not found\"}"
    said = query(client(server.url, SkipMemory(str(tmp_path), 60, KEY), 5.0))[1]
    assert "HTTP 404" in said and not path.exists()


def test_one_call_tries_once_and_its_sources_fail_in_one_line(server, tmp_path):
    from slurm_plugin.formats.carbon_series import SeriesCarbon
    from slurm_plugin.telemetry.readers import read_readings
    c = client(server.url, SkipMemory(str(tmp_path), 60, KEY), 0.2)
    _, first = query(c)
    assert "timed out" in first
    c.timeout_s = 30.0
    elapsed, again = query(c)            # the call's next query (progress after GPUs)
    assert again == first and elapsed < 15.0
    reads = read_readings(c, 1000.0, carbon=SeriesCarbon("GB", ()), job_ids=("7",))
    assert [w for w in reads.warnings if "not read" in w] == [
        f"GPU readings, job progress not read: {first}"]
    assert server.connections(at_least=1) == 1


def test_window_zero_never_skips_and_writes_nothing(server, tmp_path):
    for n in (1, 2):
        said = query(client(server.url, SkipMemory(str(tmp_path), 0, KEY), 0.2))[1]
        assert "timed out" in said and "skip" not in said
        assert server.connections(at_least=n) == n
    assert list(tmp_path.iterdir()) == []


def test_a_refused_connection_is_not_remembered(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as s:
        url = f"http://127.0.0.1:{s.getsockname()[1]}"     # closed below: refused
    said = query(client(url, SkipMemory(str(tmp_path), 60, KEY), 1.0))[1]
    assert "refused" in said.lower() and "skip" not in said
    assert list(tmp_path.iterdir()) == []


def test_what_is_remembered():
    import errno

    from slurm_plugin.telemetry.skip_memory import remembered
    assert remembered(TimeoutError("timed out")) == "timed out"
    assert remembered(socket.gaierror(socket.EAI_NONAME, "Name or service not known")) == \
        "could not be resolved (Name or service not known)"
    assert remembered(OSError(errno.EHOSTUNREACH, "No route to host")) == \
        "could not be reached (No route to host)"
    for answered_at_once in (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"),
                             ConnectionResetError(errno.ECONNRESET, "reset"),
                             OSError("not an HTTP answer: b'SSH-2.0'"), ValueError("port")):
        assert remembered(answered_at_once) is None


def test_within_one_call_the_memory_holds_without_its_file(server, tmp_path):
    memory = SkipMemory(None, 60, KEY)               # no safe directory: this call only
    c = client(server.url, memory, 0.2)
    assert "timed out" in query(c)[1]
    assert "skipped until" in query(client(server.url, memory, 30.0))[1]
    assert server.connections(at_least=1) == 1
    assert "timed out" in query(client(server.url, SkipMemory(None, 60, KEY), 0.2))[1]
    assert server.connections(at_least=2) == 2


def test_a_memory_that_cannot_be_read_or_written_never_fails_a_call(tmp_path):
    url = "http://127.0.0.1:1"
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    for where in (str(not_a_dir), str(tmp_path / "missing")):
        memory = SkipMemory(where, 60, KEY)
        assert memory.failed(url, "timed out").startswith("; later calls skip it until")
        memory.succeeded(url)
        assert SkipMemory(where, 60, KEY).skipped(url) is None
    memory = SkipMemory(str(tmp_path), 60, KEY, clock=lambda: 1000.0)
    memory.failed(url, "timed out")
    (path,) = tmp_path.glob("down-*.json")
    good = json.loads(path.read_text())
    assert SkipMemory(str(tmp_path), 60, KEY, clock=lambda: 1000.0).skipped(url)
    for bad in ("", "{", "[]", '"x"', json.dumps({**good, "at_s": "soon"}),
                json.dumps({**good, "at_s": float("nan")}),
                json.dumps({**good, "at_s": 5000.0}),            # in the future: clock set back
                json.dumps({**good, "url": "http://elsewhere:8086"}),   # a crc32 twin's file
                json.dumps({k: v for k, v in good.items() if k != "cause"})):
        path.write_text(bad)
        assert SkipMemory(str(tmp_path), 60, KEY, clock=lambda: 1000.0).skipped(url) is None, bad
    path.unlink()
    path.mkdir()                                     # a directory where the file goes
    memory = SkipMemory(str(tmp_path), 60, KEY)
    memory.failed(url, "timed out")
    memory.succeeded(url)
    assert SkipMemory(str(tmp_path), 60, KEY).skipped(url) is None


@pytest.mark.parametrize("raw", ["-1", "86401", "nan", "soon"])
def test_a_bad_skip_key_is_an_error_naming_key_and_value(tmp_path, raw):
    site = tmp_path / "site.toml"
    site.write_text(f"[influx]\nskip_after_timeout_s = {raw if raw[0] in '-8' else repr(raw)}\n")
    with pytest.raises(ConfigError) as got:
        config.load(site, environ={})
    assert KEY in str(got.value) and raw in str(got.value) and str(site) in str(got.value)
    with pytest.raises(ConfigError) as got:
        config.load(None, environ={"WATTBATCH_INFLUX_SKIP_AFTER_TIMEOUT_S": raw})
    assert KEY in str(got.value) and raw in str(got.value)
    assert config.load(None, environ={})[KEY] == 60.0               # the packaged default


# --- through wattbatch's decide path (wrapper.cli.run, as the server's child runs it) --------

class ReadsGpus:
    name = "test-reads-gpus"

    def advise(self, request, ctx):
        seen = len(ctx.readings.gpus)
        return Placement(self.name, request.gpus, why=(f"{seen} GPU readings",))

    def reconcile(self, ctx):
        return ()


registry.register("test-reads-gpus", ReadsGpus)
CLUSTER = Cluster(nodes=(Node("gpu1", gpus=(Gpu("gpu1", 0, gres_type="g0"),)),))


def test_wattbatch_warns_once_per_call_and_skips_after_the_first(server, tmp_path,
                                                                  monkeypatch):
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run_dir))
    site = tmp_path / "site.toml"
    site.write_text(f'[influx]\nurl = "{server.url}"\ntimeout_s = 0.3\n')
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --gres=gpu:1\ntrue\n")
    providers = cli.Providers(snapshot=lambda cfg: CLUSTER, readings=cli._influx_readings)

    def wattbatch(env: dict[str, str] | None = None) -> tuple[float, str, str]:
        environ = {"WATTBATCH_SITE_CONFIG": str(site), "PATH": os.environ["PATH"], **(env or {})}
        out, err = io.StringIO(), io.StringIO()
        t0 = time.monotonic()
        rc = cli.run(["--wb-dry-run", "--wb-policy", "test-reads-gpus", str(script)],
                     cli.Io(environ, io.BytesIO(), out, err), providers, now_s=time.time())
        assert rc == 0, err.getvalue()
        return time.monotonic() - t0, out.getvalue(), err.getvalue()

    elapsed, out, err = wattbatch()
    assert elapsed >= 0.3
    assert err.count("\n") == 1 and "timed out" in err and "later calls skip it until" in err
    assert "would submit unchanged" in out
    first = server.connections(at_least=1)
    assert first >= 1                  # GPU readings and progress, asked at the same time
    assert list((run_dir / "wattbatch").glob("down-*.json"))
    for _ in range(2):
        elapsed, out, err = wattbatch({"WATTBATCH_INFLUX_TIMEOUT_S": "30"})
        assert elapsed < 15.0
        assert err.count("\n") == 1 and "skipped until" in err, err
        assert "would submit unchanged" in out
    assert server.connections() == first
    # the site turns it off: tried again at once
    elapsed, _, err = wattbatch({"WATTBATCH_INFLUX_SKIP_AFTER_TIMEOUT_S": "0"})
    assert "timed out" in err and "skip" not in err
    assert server.connections(at_least=first + 1) > first
    # the window (1 s here) has passed since the first call's failure, which is still on file
    # (a call with the key at 0 neither reads nor writes it), and InfluxDB answers again
    (path,) = (run_dir / "wattbatch").glob("down-*.json")
    time.sleep(max(0.0, json.loads(path.read_text())["at_s"] + 1.05 - time.time()))
    server.answer = ANSWER
    _, out, err = wattbatch({"WATTBATCH_INFLUX_SKIP_AFTER_TIMEOUT_S": "1"})
    assert err == "" and "# wattbatch: 0 GPU readings" in out
    assert list((run_dir / "wattbatch").glob("down-*.json")) == []


class ReadsGpusAndCarbon(ReadsGpus):
    name = "test-reads-gpus-carbon"
    reads_carbon = True


registry.register("test-reads-gpus-carbon", ReadsGpusAndCarbon)


def test_with_carbon_from_a_file_the_policy_decides_and_one_line_says_what_was_skipped(
        server, tmp_path, monkeypatch):
    from slurm_plugin.resources import data_dir
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run_dir))
    site = tmp_path / "site.toml"
    site.write_text(f'[influx]\nurl = "{server.url}"\ntimeout_s = 0.3\n'
                    f'[carbon]\nzone = "GB"\nfile = "{data_dir() / "carbon-GB-2023-01.csv"}"\n')
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --gres=gpu:1\ntrue\n")
    providers = cli.Providers(snapshot=lambda cfg: CLUSTER, readings=cli._influx_readings)
    errs, connections = [], []
    for timeout in ("0.3", "30"):
        out, err = io.StringIO(), io.StringIO()
        environ = {"WATTBATCH_SITE_CONFIG": str(site), "PATH": os.environ["PATH"],
                   "WATTBATCH_INFLUX_TIMEOUT_S": timeout}
        rc = cli.run(["--wb-dry-run", "--wb-policy", "test-reads-gpus-carbon", str(script)],
                     cli.Io(environ, io.BytesIO(), out, err), providers, now_s=time.time())
        assert rc == 0 and "# wattbatch: 0 GPU readings" in out.getvalue(), err.getvalue()
        errs.append(err.getvalue())
        connections.append(server.connections(at_least=1))
    first, later = errs
    assert first.count("\n") == 1 and first.startswith(
        "wattbatch: warning: GPU readings, job progress not read: influx: ")
    assert "timed out" in first and "later calls skip it until" in first
    assert later.count("\n") == 1 and later.startswith(
        "wattbatch: warning: GPU readings, job progress not read: influx: ")
    assert "skipped until" in later
    assert connections[0] in (1, 2) and connections[1] == connections[0]   # none by the later
