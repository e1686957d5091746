"""``wattbatch`` during an InfluxDB hang: the first submission waits ``influx.timeout_s``, each
later one skips InfluxDB at once (``influx.skip_after_timeout_s``, docs/latency.md).

Starts, on loopback, a fake InfluxDB that answers every query at once (no points) and one that
hangs (accepts the connection, never answers), and a fake Slurm on PATH (``scontrol -V``,
``squeue --json`` and ``sinfo --json`` print a small synthetic 22.05 cluster: 4 nodes x 4 GPUs,
8 jobs; no Slurm is needed). Each submission is a real ``wattbatch --wb-dry-run`` process
(the installed entry point's code: ``wrapper.server_client``) on the co-location path (policy
eaco, ``--wb-share --wb-app resnet18``: it reads the snapshot and the GPU readings), one right
after the other, as a client's burst; ``wrapper.snapshot_cache_s = 0`` so that every call reads
Slurm and InfluxDB itself. Per path (in-process, ``WATTBATCH_SERVER=0``; the warm server),
prints the median time of N submissions with InfluxDB healthy and absent (nothing listens:
refused at once), then N with it hanging: the first and each of the next N-1 (goal: each
within 100 ms of the healthy or absent median, whichever is lower).

    python benchmarks/bench_influx_hang.py [-n 10] [--timeout-s 1.0] [--skip-s 60]
                                           [--paths in-process,server]

``--skip-s 0`` shows the behaviour without the key: every submission waits the timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._common import (ROOT, goal, nonneg_float, positive_float,  # noqa: E402
                                positive_int)

ENTRY = "import sys; from wrapper.server_client import main; sys.argv[0] = 'wattbatch'; main()"
SCRIPT = "#!/bin/bash\n#SBATCH --job-name=bench\n#SBATCH --gres=gpu:1\ntrue\n"
ARGS = ["--wb-dry-run", "--wb-share", "--wb-app", "resnet18"]
GOAL_MS = 100.0
EMPTY_ANSWER = (b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n"
                b"X-Influxdb-Version: fake\r\n\r\n" + json.dumps({"results": [
                    {"statement_id": 0}]}).encode() + b"\n")


class Loopback:
    """A TCP server on 127.0.0.1 in a thread: ``answer`` None hangs (accepts and holds every
    connection, never reads or writes), else each request gets ``answer`` and is closed."""

    def __init__(self, answer: bytes | None) -> None:
        self.answer = answer
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted = 0
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return                              # closed
            self.accepted += 1
            if self.answer is None:
                self.held.append(conn)
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                conn.sendall(self.answer or b"")
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def refused_url() -> str:
    """A loopback port nothing listens on (bound and closed: refused at once)."""
    with socket.create_server(("127.0.0.1", 0)) as s:
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def fake_slurm(bin_dir: Path) -> None:
    from slurm_plugin.slurm.synthetic import documents
    nodes_doc, squeue = documents("22.05", 4, 4, 8)
    (bin_dir / "nodes.json").write_text(json.dumps(nodes_doc))
    (bin_dir / "squeue.json").write_text(json.dumps(squeue))
    for name, body in (("scontrol", 'echo "slurm 22.05.8"'),
                       ("squeue", "tr '\\0' ' ' < /proc/$PPID/cmdline | grep -q "
                                  "'wrapper.server import' && w=server || w=here\n"
                                  f'echo $w >> "{bin_dir}/who"; cat "{bin_dir}/squeue.json"'),
                       ("sinfo", f'cat "{bin_dir}/nodes.json"'),
                       ("sbatch", 'echo "bench: a dry run ran sbatch" >&2; exit 1')):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)


def site_file(path: Path, bin_dir: Path, url: str, timeout_s: float, skip_s: float) -> Path:
    path.write_text(f'[slurm]\nbin_dir = "{bin_dir}"\n[policy]\nname = "eaco"\n'
                    f'[influx]\nurl = "{url}"\ntimeout_s = {timeout_s}\n'
                    f"skip_after_timeout_s = {skip_s}\n"
                    "[wrapper]\nserver_idle_s = 60\nsnapshot_cache_s = 0\n")
    return path


class Caller:
    """Runs ``wattbatch`` as a client does, for one path (its own runtime directory: its own
    server and memory of InfluxDB)."""

    def __init__(self, tmp: Path, bin_dir: Path, server: bool) -> None:
        self.bin_dir = bin_dir
        self.run_dir = tmp / ("run-server" if server else "run-here")
        self.run_dir.mkdir(mode=0o700)
        self.env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONPATH": str(ROOT),
                    "HOME": str(tmp), "XDG_RUNTIME_DIR": str(self.run_dir),
                    "WATTBATCH_CACHE_DIR": str(tmp / "cache"), "TZ": "UTC"}
        if not server:
            self.env["WATTBATCH_SERVER"] = "0"
        self.script = tmp / "job.sh"
        self.script.write_text(SCRIPT)

    def served(self, bin_dir: Path) -> int:
        """How many calls so far read the snapshot in a warm server's child (fake squeue)."""
        try:
            return (bin_dir / "who").read_text().split().count("server")
        except OSError:
            return 0

    def submit(self, site: Path) -> tuple[float, subprocess.CompletedProcess]:
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", ENTRY, *ARGS, str(self.script)],
                              env=dict(self.env, WATTBATCH_SITE_CONFIG=str(site)),
                              capture_output=True, text=True, timeout=120)
        elapsed = time.perf_counter() - t0
        if done.returncode != 0:
            sys.exit(f"bench: wattbatch failed ({done.returncode}): {done.stderr.strip()}")
        return elapsed, done

    def servers(self) -> list[int]:
        """Pids of the warm servers of this runtime directory (started by these calls)."""
        where = str(self.run_dir / "wattbatch")
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                words = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(w.decode(errors="replace").startswith(where + "/") for w in words):
                pids.append(int(entry.name))
        return pids

    def wait_for_server(self) -> bool:
        for _ in range(200):
            if list((self.run_dir / "wattbatch").glob("*.sock")):
                return True
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        for pid in self.servers():
            try:
                os.kill(pid, 15)
            except OSError:
                pass


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:7.1f} ms"


def run_path(name: str, caller: Caller, sites: dict[str, Path], n: int, server: bool,
             hanging: Loopback) -> bool:
    print(f"\n{name}:")
    caller.submit(sites["healthy"])              # fills the site-config cache; starts a server
    if server:
        if not caller.wait_for_server():
            print("  n/a (no warm server started)")
            return False
        time.sleep(1.0)                          # the server finishes importing
        caller.submit(sites["healthy"])
    medians = {}
    for kind in ("healthy", "absent"):
        times = []
        for _ in range(n):
            elapsed, done = caller.submit(sites[kind])
            times.append(elapsed)
            said = "influx" in done.stderr
            if said != (kind == "absent"):
                print(f"  note: InfluxDB {kind}, stderr: {done.stderr.strip()[:300]!r}")
        medians[kind] = statistics.median(times)
        print(f"  baseline, InfluxDB {kind + ':':9} median {ms(medians[kind])} of {n}")
    base = min(medians.values())
    served = caller.served(caller.bin_dir)
    times, kinds, connections = [], [], []
    for _ in range(n):
        before = hanging.accepted
        elapsed, done = caller.submit(sites["hanging"])
        times.append(elapsed)
        kinds.append("skipped" if "skipped until" in done.stderr else
                     "timed out" if "timed out" in done.stderr else "?")
        connections.append(hanging.accepted - before)
    print(f"  InfluxDB hanging, first:  {ms(times[0])} ({kinds[0]}, {connections[0]} "
          f"connection(s) to it; {(times[0] - base) * 1e3:+.1f} ms over the baseline)")
    for k, t in enumerate(times[1:], 2):
        print(f"  InfluxDB hanging, #{k:<2}:    {ms(t)} ({kinds[k - 1]}, {connections[k - 1]}; "
              f"{(t - base) * 1e3:+.1f} ms)")
    if server:
        print(f"  ran in the warm server: {caller.served(caller.bin_dir) - served} of {n}")
    if len(times) < 2:
        print("  " + goal(f"each later submission <= {GOAL_MS:g} ms over the baseline", None,
                          "n/a (give -n 2 or more)"))
        return True
    worst = max(times[1:]) - base
    ok = worst * 1e3 <= GOAL_MS and all(k == "skipped" for k in kinds[1:]) \
        and kinds[0] == "timed out"
    print("  " + goal(f"each later submission <= {GOAL_MS:g} ms over the baseline", ok,
                      f"worst {worst * 1e3:+.1f} ms; first {kinds[0]}, later "
                      f"{sum(k == 'skipped' for k in kinds[1:])} of {len(kinds) - 1} skipped"))
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=positive_int, default=10,
                    help="submissions per phase (default 10)")
    ap.add_argument("--timeout-s", type=positive_float, default=1.0,
                    help="influx.timeout_s (default 1.0, the packaged default)")
    ap.add_argument("--skip-s", type=nonneg_float, default=60.0,
                    help="influx.skip_after_timeout_s (default 60; 0: every call tries "
                         "InfluxDB, as before the key)")
    ap.add_argument("--paths", default="in-process,server",
                    help="comma-separated: in-process (WATTBATCH_SERVER=0), server")
    args = ap.parse_args()
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    if not paths or any(p not in ("in-process", "server") for p in paths):
        ap.error(f"--paths {args.paths}: give in-process, server or both, comma-separated")
    if not 0.05 <= args.timeout_s <= 60:
        ap.error(f"--timeout-s {args.timeout_s:g}: give 0.05 to 60 (influx.timeout_s's range)")
    if args.skip_s > 86400:
        ap.error(f"--skip-s {args.skip_s:g}: give 0 to 86400 (influx.skip_after_timeout_s's "
                 "range)")
    healthy, hanging = Loopback(EMPTY_ANSWER), Loopback(None)
    callers: list[Caller] = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-influx-hang-") as tmp_name:
            tmp = Path(tmp_name)
            bin_dir = tmp / "bin"
            bin_dir.mkdir()
            fake_slurm(bin_dir)
            sites = {kind: site_file(tmp / f"{kind}.toml", bin_dir, url, args.timeout_s,
                                     args.skip_s)
                     for kind, url in (("healthy", healthy.url), ("absent", refused_url()),
                                       ("hanging", hanging.url))}
            print(f"wattbatch {' '.join(ARGS)} job.sh: policy eaco, fake Slurm (4 nodes x 4 "
                  f"GPUs), influx.timeout_s = {args.timeout_s:g}, "
                  f"influx.skip_after_timeout_s = {args.skip_s:g}, wrapper.snapshot_cache_s = 0; "
                  f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
            for name in paths:
                server = name == "server"
                caller = Caller(tmp, bin_dir, server)
                callers.append(caller)
                run_path("warm server" if server else "in-process (WATTBATCH_SERVER=0)",
                         caller, sites, args.n, server, hanging)
                caller.stop()
    finally:
        for caller in callers:
            caller.stop()
        healthy.close()
        hanging.close()


if __name__ == "__main__":
    main()
