"""Bring the local cluster up, down, and report its status.

Order up: munged (system) -> MariaDB -> slurmdbd -> sacctmgr -> slurmctld -> slurmd x N ->
InfluxDB; then wait for idle nodes and InfluxDB /ping. Every step first checks whether its
daemon already runs, so ``up`` twice is harmless.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from .. import proc
from ..errors import CommandError, ConfigError, TelemetryError
from ..telemetry.influx import InfluxClient, quote_ident, quote_str
from . import default_conf, procs
from .install import ensure_packages, slurm_daemon, slurm_version, which
from .render import render, render_all
from .spec import Spec

MUNGE_SOCKET = Path("/run/munge/munge.socket.2")
MUNGE_KEY = Path("/etc/munge/munge.key")
MUNGE_PID = Path("/run/munge/munged.pid")
MUNGE_LOG = Path("/var/log/munge/munged.log")
SLURM_PROGRAMS = ("slurmctld", "slurmd", "slurmstepd")
START_TIMEOUT_S = 60.0


@dataclass
class Report:
    """What ``up`` did and how long each step took."""

    spec: Spec
    installed: list[str] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    step_s: dict[str, float] = field(default_factory=dict)
    default_conf: str = ""

    def as_dict(self) -> dict:
        return {"state_dir": str(self.spec.state_dir), "installed": self.installed,
                "started": self.started, "step_s": self.step_s, "env": self.spec.env(),
                "default_slurm_conf": self.default_conf,
                "influx_url": self.spec.influx_url}


def _slurm_env(spec: Spec) -> dict[str, str]:
    return {"SLURM_CONF": str(spec.slurm_conf)}


def _start(argv: list[str], spec: Spec, name: str, pid_file: Path, program: str,
           log: Path, env: dict[str, str] | None = None) -> int:
    """Run a self-daemonizing start command, then wait for a live pid (daemons detach
    before they die of config errors, so the exit code of ``argv`` proves nothing)."""
    pid_file.unlink(missing_ok=True)
    done = proc.run(argv, timeout_s=START_TIMEOUT_S, check=False, env=env)
    if done.returncode != 0:
        raise CommandError(list(argv), done.returncode, f"{done.stderr}\n{procs.tail(log)}",
                           done.stdout)
    procs.wait_for(lambda: procs.running_pid(pid_file, program) is not None, 20.0,
                   f"{name}: no live pid in {pid_file}", [log])
    pid = procs.running_pid(pid_file, program)
    time.sleep(0.3)     # a config error kills it right after the pid file appears
    if not procs.alive(pid):
        raise CommandError(list(argv), 1, f"{name} exited after start\n{procs.tail(log)}")
    return pid  # type: ignore[return-value]


def _prepare(spec: Spec) -> None:
    for sub in ("etc", "bin", "run", "log", "dev", "slurmctld", "slurmd", "mariadb",
                "influx", "reconcile"):
        spec.path(sub).mkdir(parents=True, exist_ok=True)
    for name in SLURM_PROGRAMS:
        link, target = spec.bin_dir / name, slurm_daemon(name)
        if not link.is_symlink() or os.readlink(link) != target:
            link.unlink(missing_ok=True)
            link.symlink_to(target)
    for i in range(spec.gpus_per_node):
        dev = spec.dev_dir / f"nvidia{i}"
        if not dev.exists():
            os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))   # S_IFCHR, like /dev/null
    for secret in ("db_password", "influx_password", "progress.key"):
        pw_file = spec.path("etc", secret)
        if not pw_file.exists():
            pw_file.write_text(secrets.token_hex(12))
            pw_file.chmod(0o600)
    pw_file = spec.path("etc", "db_password")
    files = render_all(spec, pw_file.read_text().strip(), slurm_version=slurm_version())
    if "cgroup.conf" not in files:
        spec.path("etc", "cgroup.conf").unlink(missing_ok=True)
    changed = [name for name in ("slurm.conf", "gres.conf") if (spec.etc / name).exists()
               and (spec.etc / name).read_text() != files[name]]
    if changed and status_daemons(spec).get("slurmctld"):
        raise ConfigError(str(spec.state_dir), "localcluster", ", ".join(changed),
                          "the running cluster has other nodes or GPUs (--gpu-model, "
                          "--share-gres): run `wattctl localcluster down` first")
    for name, text in files.items():
        target = spec.etc / name
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
        target.chmod(0o600 if name == "slurmdbd.conf" else 0o755 if name.endswith(".sh")
                     else 0o644)
    spec.save()


def _ports_of(spec: Spec) -> dict[str, list[int]]:
    """Daemon name (as in status) -> the loopback ports it listens on."""
    ports = {f"slurmd-{n}": [spec.slurmd_port(i)] for i, n in enumerate(spec.node_names, 1)}
    ports.update(slurmctld=[spec.ports["slurmctld"]], slurmdbd=[spec.ports["slurmdbd"]],
                 mariadb=[spec.ports["mariadb"]],
                 influxd=[spec.ports["influx"], spec.ports["influx_rpc"]])
    return ports


PORT_FREE_WAIT_S = 10.0   # how long a port may stay held after its daemon is gone


def _check_ports(spec: Spec, wait_s: float = PORT_FREE_WAIT_S) -> None:
    """Refuse to start a daemon whose port another program holds: a second slurmctld on a
    taken port dies late, and its slurmd would register with the other cluster. A port held
    when its daemon is not running is looked at again for up to ``wait_s``: right after a
    daemon is killed its socket (or a process it forked) may hold the port a moment longer,
    longer on a loaded machine."""
    running = status_daemons(spec)
    deadline = time.monotonic() + wait_s
    for name, ports in _ports_of(spec).items():
        if running.get(name):
            continue
        for port in ports:
            while True:
                why = _port_taken(port)
                if why is None:
                    break
                if time.monotonic() >= deadline:
                    raise ConfigError(str(spec.path("cluster.json")), f"port of {name}", port,
                                      f"in use ({why}); pick a free one with "
                                      "`wattctl localcluster up --port NAME=PORT`")
                time.sleep(0.2)


def _port_taken(port: int) -> str | None:
    """Why ``port`` cannot be bound now, or None when it can."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def munge_ok() -> bool:
    return proc.run(["munge", "-n"], timeout_s=5, check=False).returncode == 0


def _munge(spec: Spec) -> bool:
    if munge_ok():
        return False
    if not MUNGE_KEY.exists():
        proc.run(["mungekey", "--create", "--keyfile", str(MUNGE_KEY)], timeout_s=30)
        shutil.chown(MUNGE_KEY, "munge", "munge")
        MUNGE_KEY.chmod(0o400)
    for d in (MUNGE_SOCKET.parent, Path("/var/log/munge"), Path("/var/lib/munge")):
        d.mkdir(parents=True, exist_ok=True)
        shutil.chown(d, "munge", "munge")
    _start(["runuser", "-u", "munge", "--", "/usr/sbin/munged"], spec, "munged", MUNGE_PID,
           "munged", MUNGE_LOG)
    spec.path("run", "munged.ours").write_text("munged was started by localcluster up\n")
    procs.wait_for(munge_ok, 10, "munged: munge -n", [MUNGE_LOG])
    return True


def _mysql(spec: Spec, sql: str) -> None:
    proc.run(["mariadb", f"--socket={spec.mariadb_socket}", "-uroot", "-e", sql], timeout_s=30)


def _mariadb(spec: Spec) -> bool:
    if procs.running_pid(spec.pid_file("mariadb"), "mariadbd"):
        return False
    cnf = f"--defaults-file={spec.etc / 'my.cnf'}"
    if not spec.path("mariadb", "mysql").is_dir():
        proc.run(["mariadb-install-db", cnf, "--skip-test-db",
                  "--auth-root-authentication-method=socket"], timeout_s=180)
    _start(["start-stop-daemon", "--start", "--background", "--pidfile",
            str(spec.pid_file("mariadb")), "--exec", "/usr/sbin/mariadbd", "--", cnf],
           spec, "mariadb", spec.pid_file("mariadb"), "mariadbd", spec.log_file("mariadb"))
    procs.wait_for(lambda: spec.mariadb_socket.exists() and proc.run(
        ["mariadb-admin", f"--socket={spec.mariadb_socket}", "-uroot", "ping"], timeout_s=5,
        check=False).returncode == 0, START_TIMEOUT_S, "mariadb: ping",
        [spec.log_file("mariadb")])
    pw = spec.path("etc", "db_password").read_text().strip()
    # The database exists before slurmdbd's first start (slurmdbd 26.05 cannot create it:
    # "fatal: _check_mysql_concat_is_sane").
    _mysql(spec, "CREATE DATABASE IF NOT EXISTS slurm_acct_db;"
                 f"CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '{pw}';"
                 "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
                 "GRANT ALL ON `slurm\\_%`.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;")
    return True


def _slurmdbd(spec: Spec) -> bool:
    if procs.running_pid(spec.pid_file("slurmdbd"), "slurmdbd"):
        return False
    _start(["/usr/sbin/slurmdbd"], spec, "slurmdbd", spec.pid_file("slurmdbd"), "slurmdbd",
           spec.log_file("slurmdbd"), env=_slurm_env(spec))
    procs.wait_for(lambda: proc.run(["sacctmgr", "-n", "-P", "list", "cluster"], timeout_s=10,
                                    check=False, env=_slurm_env(spec)).returncode == 0,
                   START_TIMEOUT_S, "slurmdbd: sacctmgr list cluster",
                   [spec.log_file("slurmdbd")])
    return True


def _sacctmgr(spec: Spec) -> None:
    """Cluster, account and user in the accounting database (idempotent)."""
    env = _slurm_env(spec)

    def listed(*what: str) -> list[str]:
        out = proc.run(["sacctmgr", "-n", "-P", "list", *what], timeout_s=30, env=env).stdout
        return [line.split("|")[0] for line in out.splitlines() if line.strip()]

    name = spec.cluster_name
    if name not in listed("cluster", "format=cluster"):
        proc.run(["sacctmgr", "-i", "add", "cluster", name], timeout_s=30, env=env)
    if name not in listed("account", "wattbatch", "format=account"):
        proc.run(["sacctmgr", "-i", "add", "account", "wattbatch", f"cluster={name}",
                  "description=wattbatch local cluster", "organization=wattbatch"],
                 timeout_s=30, env=env)
    if "root" not in listed("association", f"cluster={name}", "account=wattbatch",
                            "user=root", "format=user"):
        proc.run(["sacctmgr", "-i", "add", "user", "root", "account=wattbatch",
                  f"cluster={name}"], timeout_s=30, env=env)


def _slurmctld(spec: Spec, fresh: bool) -> bool:
    """slurmctld, recovering the jobs of the last run from its state save location; with
    ``fresh`` a clean start (``-c``: every job of an earlier run is gone; when it already
    runs, its jobs are cancelled)."""
    if procs.running_pid(spec.pid_file("slurmctld"), "slurmctld"):
        if fresh:
            cancel_all_jobs(spec)
        return False
    _start([str(spec.bin_dir / "slurmctld"), *(["-c"] if fresh else []),
            *(["-i"] if usage_lost(spec.path("slurmctld")) else []),
            "-f", str(spec.slurm_conf)], spec,
           "slurmctld", spec.pid_file("slurmctld"), "slurmctld", spec.log_file("slurmctld"),
           env=_slurm_env(spec))
    return True


def usage_lost(state_dir: Path) -> bool:
    """A state save location that slurmctld has used (``clustername`` is written at its first
    start) but that holds no ``assoc_usage``, which it writes only on a clean shutdown: a
    slurmctld SIGKILLed before its first shutdown. Slurm 26.05 then refuses to start ("fatal:
    No Assoc usage file ... to recover") unless told to ignore state errors (``-i``); the jobs
    are still recovered, and the usage counters start from zero as on a first start."""
    return (state_dir / "clustername").exists() and not (state_dir / "assoc_usage").exists()


def _slurmds(spec: Spec) -> list[str]:
    started = []
    for node in spec.node_names:
        pid_file = spec.run_dir / f"slurmd-{node}.pid"
        if procs.running_pid(pid_file, "slurmd"):
            continue
        spec.path("slurmd", node).mkdir(exist_ok=True)
        _start([str(spec.bin_dir / "slurmd"), "-f", str(spec.slurm_conf), "-N", node,
                "-d", str(spec.bin_dir / "slurmstepd")], spec, f"slurmd {node}", pid_file,
               "slurmd", spec.log_dir / f"slurmd-{node}.log", env=_slurm_env(spec))
        started.append(f"slurmd-{node}")
    return started


def influx_ping(spec: Spec) -> bool:
    try:
        with urllib.request.urlopen(spec.influx_url + "/ping", timeout=2) as resp:
            return resp.status == 204
    except (OSError, urllib.error.URLError):
        return False


def _influx(spec: Spec) -> bool:
    if procs.running_pid(spec.pid_file("influxd"), "influxd"):
        return False
    _start(["start-stop-daemon", "--start", "--background", "--make-pidfile", "--pidfile",
            str(spec.pid_file("influxd")), "--output", str(spec.log_file("influxd")),
            "--exec", which("influxd") or "/usr/bin/influxd", "--", "-config", str(spec.etc / "influxdb.conf")],
           spec, "influxd", spec.pid_file("influxd"), "influxd", spec.log_file("influxd"))
    return True


def _collector(spec: Spec) -> bool:
    """The emulated-GPU collector: the fake GPUs' power, energy and utilisation from the
    physics model, every 2 s, into InfluxDB (and each shared job's slowdown file). It runs
    under ``keepalive``, which starts it again whenever it exits (as systemd does on a site)."""
    python = sys.executable
    code = str(Path(__file__).resolve().parents[2])
    pid = procs.running_pid(spec.pid_file("collector"), "python")
    if pid:
        if _collector_is_ours(pid, python, code):
            return False
        # another checkout's (or a removed virtualenv's): its code would emulate the GPUs
        # and its interpreter may be gone, so this checkout's collector replaces it
        procs.stop_pid(pid)
    log = str(spec.log_file("collector"))
    _start(["start-stop-daemon", "--start", "--background", "--make-pidfile", "--pidfile",
            str(spec.pid_file("collector")), "--output", log,
            "--exec", python, "--", "-m", "slurm_plugin.node.keepalive", "--log", log,
            "--restart-delay-s", "1", "--", python, "-m", "slurm_plugin.cli", "collect",
            "--interval", "2", "--source", spec.gpu_source, "--node", "all"],
           spec, "collector", spec.pid_file("collector"), "python", spec.log_file("collector"),
           env={**spec.env(), "PYTHONPATH": code})
    return True


def _collector_is_ours(pid: int, python: str, code: str) -> bool:
    """Whether the collector supervisor ``pid`` runs this interpreter (still on disk) and
    this checkout's code."""
    args = procs.cmdline(pid)
    return bool(args) and args[0] == python and os.path.exists(python) and \
        procs.environ(pid).get("PYTHONPATH") == code


INFLUX_USER = "wattbatch"


def influx_password(spec: Spec) -> str:
    return spec.path("etc", "influx_password").read_text().strip()


def _influx_database(spec: Spec) -> None:
    """InfluxDB runs with authentication: the admin user ``INFLUX_USER`` (password in
    ``etc/influx_password``, also in the site config) is created on the first start, when
    InfluxDB 1.x accepts that one statement without credentials; then the database."""
    password = influx_password(spec)
    client = InfluxClient(spec.influx_url, spec.influx_database, username=INFLUX_USER,
                          password=password, timeout_s=10.0)
    try:
        client.query("SHOW DATABASES")
    except TelemetryError as exc:
        if "HTTP 401" not in str(exc) and "HTTP 403" not in str(exc):
            raise CommandError(["GET", spec.influx_url + "/query"], 1, str(exc)) from None
        anonymous = InfluxClient(spec.influx_url, spec.influx_database, timeout_s=10.0)
        try:
            anonymous.query(f"CREATE USER {quote_ident(INFLUX_USER)} WITH PASSWORD "
                            f"{quote_str(password)} WITH ALL PRIVILEGES")
        except TelemetryError as exc2:
            raise CommandError(["POST", spec.influx_url + "/query"], 1,
                               f"{exc2}; the InfluxDB of {spec.state_dir} has other users: "
                               "remove its influx/ directory or start with a fresh state dir"
                               ) from None
    try:
        client.create_database()
    except TelemetryError as exc:
        raise CommandError(["POST", spec.influx_url + "/query"], 1, str(exc)) from None


def node_states(spec: Spec) -> dict[str, str]:
    """Node -> Slurm state (e.g. idle, down*), or {} when slurmctld does not answer."""
    done = proc.run(["sinfo", "-h", "-N", "-o", "%N %T"], timeout_s=10, check=False,
                    env=_slurm_env(spec))
    if done.returncode != 0:
        return {}
    return dict(line.split(None, 1) for line in done.stdout.splitlines() if line.strip())


def _nodes_ready(spec: Spec) -> bool:
    states = node_states(spec)
    if any(s.startswith("down") or s.startswith("drain") for s in states.values()):
        for node, s in states.items():   # resume nodes left down by an earlier run
            if s.startswith(("down", "drain")) and not s.endswith("*"):
                proc.run(["scontrol", "update", f"nodename={node}", "state=resume"],
                         timeout_s=10, check=False, env=_slurm_env(spec))
    return bool(states) and all(states.get(n) in ("idle", "mixed", "allocated")
                                for n in spec.node_names)


def _check_alive(spec: Spec) -> None:
    """Every daemon still runs after the waits (some die of a config error seconds later)."""
    for name, pid in status_daemons(spec).items():
        if not pid:
            log = MUNGE_LOG if name == "munged" else spec.log_dir / f"{name}.log"
            raise CommandError([name], 1, f"{name} is not running after start\n"
                                          f"{procs.tail(log)}")


def _write_user_files(spec: Spec) -> None:
    spec.site_toml.write_text(render("site.toml.j2", spec, influx_user=INFLUX_USER,
                                     influx_password=influx_password(spec)))
    spec.site_toml.chmod(0o600)          # it holds the InfluxDB password
    spec.env_sh.write_text(render("env.sh.j2", spec))


def up(spec: Spec, install: bool = True, timeout_s: float = 120.0,
       fresh: bool = False) -> Report:
    """Bring everything up (idempotent); raise ``CommandError`` with a log tail on failure.

    Slurm's jobs survive ``down``/``up``; ``fresh`` starts slurmctld with no job."""
    report = Report(spec)

    def step(name: str, fn) -> None:
        t0 = time.monotonic()
        result = fn()
        report.step_s[name] = round(time.monotonic() - t0, 3)
        if result is True:
            report.started.append(name)
        elif isinstance(result, list):
            report.started.extend(result)

    if install:
        step("install", lambda: report.installed.extend(ensure_packages()))
    step("prepare", lambda: _prepare(spec))
    step("ports", lambda: _check_ports(spec))
    step("munged", lambda: _munge(spec))
    step("mariadb", lambda: _mariadb(spec))
    step("slurmdbd", lambda: _slurmdbd(spec))
    step("sacctmgr", lambda: _sacctmgr(spec))
    step("slurmctld", lambda: _slurmctld(spec, fresh))
    step("slurmd", lambda: _slurmds(spec))
    step("influxd", lambda: _influx(spec))
    logs = [spec.log_file("slurmctld")] + [spec.log_dir / f"slurmd-{n}.log"
                                           for n in spec.node_names]
    step("nodes idle", lambda: procs.wait_for(lambda: _nodes_ready(spec), timeout_s,
                                              "slurm: all nodes idle", logs, 0.5))
    step("influx ping", lambda: procs.wait_for(lambda: influx_ping(spec), timeout_s,
                                               "influxd: /ping", [spec.log_file("influxd")]))
    step("influx database", lambda: _influx_database(spec))
    step("site files", lambda: _write_user_files(spec))
    step("default slurm.conf", lambda: setattr(report, "default_conf",
                                               default_conf.claim(spec.slurm_conf)))
    step("collector", lambda: _collector(spec))
    step("alive", lambda: _check_alive(spec))
    report.step_s["total"] = round(sum(report.step_s.values()), 3)
    return report


def _daemon_pid_files(spec: Spec) -> list[tuple[str, Path, str]]:
    """(name, pid file, program) in stop order."""
    return ([("collector", spec.pid_file("collector"), "python")] + [(f"slurmd-{n}", spec.run_dir / f"slurmd-{n}.pid", "slurmd")
             for n in spec.node_names]
            + [("slurmctld", spec.pid_file("slurmctld"), "slurmctld"),
               ("slurmdbd", spec.pid_file("slurmdbd"), "slurmdbd"),
               ("mariadb", spec.pid_file("mariadb"), "mariadbd"),
               ("influxd", spec.pid_file("influxd"), "influxd")])


def cancel_all_jobs(spec: Spec, wait_s: float = 30.0) -> int:
    """Cancel every job and wait until those are gone; return how many there were.

    Waits only for the jobs it cancelled, so a job submitted meanwhile cannot stall it.
    """
    env = _slurm_env(spec)
    done = proc.run(["squeue", "-h", "-o", "%F"], timeout_s=10, check=False, env=env)
    if done.returncode != 0:
        return 0
    ids = sorted(set(done.stdout.split()))
    if not ids:
        return 0
    proc.run(["scancel", *ids], timeout_s=30, check=False, env=env)

    def gone() -> bool:
        left = proc.run(["squeue", "-h", "-t", "all", "-o", "%F %T"], timeout_s=10,
                        check=False, env=env)
        return left.returncode != 0 or not any(
            job in ids and state in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING",
                                     "SUSPENDED")
            for job, state in (line.split() for line in left.stdout.splitlines()
                               if len(line.split()) == 2))
    procs.wait_for(gone, wait_s, "slurm: cancel all jobs", [spec.log_file("slurmctld")])
    return len(ids)


def requeue_running_jobs(spec: Spec, wait_s: float = 30.0) -> int:
    """Requeue every running job (its processes stop with the nodes) and wait until none
    runs; return how many there were. Slurm would otherwise show them running after the
    next ``up`` with no process behind them."""
    env = _slurm_env(spec)
    done = proc.run(["squeue", "-h", "-t", "RUNNING,CONFIGURING", "-o", "%A"], timeout_s=10,
                    check=False, env=env)
    ids = sorted(set(done.stdout.split())) if done.returncode == 0 else []
    if not ids:
        return 0
    proc.run(["scontrol", "requeue", ",".join(ids)], timeout_s=30, check=False, env=env)

    def stopped() -> bool:
        left = proc.run(["squeue", "-h", "-t", "RUNNING,CONFIGURING,COMPLETING", "-o", "%A"],
                        timeout_s=10, check=False, env=env)
        return left.returncode != 0 or not set(left.stdout.split()) & set(ids)
    procs.wait_for(stopped, wait_s, "slurm: requeue running jobs", [spec.log_file("slurmctld")])
    return len(ids)


def down(spec: Spec, cancel_jobs: bool = False) -> dict:
    """Stop every daemon of this cluster, leave no process or pid file. Slurm keeps its jobs
    for the next ``up``: running ones are requeued first (they start again after ``up``);
    ``cancel_jobs`` cancels every job instead."""
    cancelled = requeued = 0
    if procs.running_pid(spec.pid_file("slurmctld"), "slurmctld"):
        if cancel_jobs:
            cancelled = cancel_all_jobs(spec)
        else:
            requeued = requeue_running_jobs(spec)
    stopped = []
    for name, pid_file, program in _daemon_pid_files(spec):
        pid = procs.running_pid(pid_file, program)
        if pid:
            procs.stop_pid(pid)
            stopped.append(name)
        pid_file.unlink(missing_ok=True)
    for pid in procs.pids_under(spec.state_dir, spec.slurm_conf):   # slurmstepd and job processes left over
        procs.stop_pid(pid, timeout_s=5)
        stopped.append(f"pid {pid}")
    if default_conf.release(spec.slurm_conf):
        stopped.append(f"link {default_conf.DEFAULT_SLURM_CONF}")
    ours = spec.path("run", "munged.ours")
    if ours.exists():
        pid = procs.running_pid(MUNGE_PID, "munged")
        if pid:
            procs.stop_pid(pid)
            stopped.append("munged")
        ours.unlink()
    return {"state_dir": str(spec.state_dir), "cancelled_jobs": cancelled,
            "requeued_jobs": requeued, "stopped": stopped}


def status_daemons(spec: Spec) -> dict[str, int | None]:
    """Daemon name -> pid if it runs, else None (munged is the system one)."""
    daemons = {name: procs.running_pid(pid_file, program)
               for name, pid_file, program in _daemon_pid_files(spec)}
    daemons["munged"] = procs.running_pid(MUNGE_PID, "munged")
    return daemons


def status(spec: Spec) -> dict:
    """Which daemons run (pid or None), node states, InfluxDB ping."""
    daemons = status_daemons(spec)
    running = daemons.get("slurmctld") is not None
    nodes = node_states(spec) if running else {}
    influx = influx_ping(spec) if daemons.get("influxd") else False
    all_up = all(daemons.values()) and influx and bool(nodes) and all(
        s in ("idle", "mixed", "allocated") for s in nodes.values())
    return {"state_dir": str(spec.state_dir), "up": all_up, "daemons": daemons,
            "nodes": nodes, "influx_ping": influx, "influx_url": spec.influx_url,
            "env": spec.env(), "default_slurm_conf": default_conf.holder(spec.slurm_conf)}


def as_json(data: dict) -> str:
    return json.dumps(data, indent=2, sort_keys=True)
