"""Debian roots for running the local cluster on a newer Slurm than the host's.

``--slurm 24.11`` runs the cluster inside a Debian trixie root, ``--slurm 26.05`` inside a Debian
sid root; ``system`` (the default) is the host's own Slurm. A root is built once with
``debootstrap`` from the mirror of the host's apt sources and cached in
``/var/cache/wattbatch/roots/<suite>`` (``$WATTBATCH_ROOTS_DIR``). The project runs inside from
a copy of this checkout at ``/opt/wattbatch/src`` with its own ``.venv`` (the root's Python).

Mounts (/proc, /sys recursively, /dev, /dev/pts) are recorded next to the root and undone by
``unmount`` (``wattctl localcluster down --slurm V``) whatever state they are in.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from .. import proc
from ..errors import CommandError, ConfigError
from . import install, procs
from .spec import DEFAULT_PORTS, DEFAULT_STATE_DIR, Spec

SYSTEM = "system"
RELEASES: Mapping[str, str] = {"24.11": "trixie", "26.05": "sid"}
CHOICES = (SYSTEM, *RELEASES)
# Each release's cluster gets its own ports (daemons listen on 0.0.0.0), so the host cluster
# and every root cluster can run at the same time.
PORT_OFFSETS: Mapping[str, int] = {"24.11": 100, "26.05": 200}
DEFAULT_ROOTS_DIR = "/var/cache/wattbatch/roots"
SRC_IN_ROOT = "/opt/wattbatch/src"
VENV_BIN_IN_ROOT = f"{SRC_IN_ROOT}/.venv/bin"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
INCLUDE = ("python3", "python3-venv", "ca-certificates")
DEBOOTSTRAP_TIMEOUT_S = 1800.0
MIRROR_HINT = ("set WATTBATCH_DEBIAN_MIRROR to a reachable Debian mirror (e.g. "
               "WATTBATCH_DEBIAN_MIRROR=http://<mirror>/debian) or fix the host's apt sources")
# Debian suite names (a codename or alias, with -updates etc. after it) tell a Debian
# archive apart from third-party repositories that also have a "main" component.
DEBIAN_SUITES = frozenset({
    "buster", "bullseye", "bookworm", "trixie", "forky", "duke", "sid", "stable", "testing",
    "unstable", "oldstable", "oldoldstable", "experimental"})
# Variables a command inside a root may see from the caller's environment.
PASS_EXACT = frozenset({"PATH", "HOME", "LANG", "LANGUAGE", "LC_ALL", "TERM", "CI", "TZ",
                        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                        "http_proxy", "https_proxy", "no_proxy", "all_proxy", "HTTP_PROXY",
                        "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY"})
PASS_PREFIXES = ("PIP_", "WATTBATCH_")
# WATTBATCH_* that describe the host's cluster, not the root's: never passed in.
HOST_ONLY = ("WATTBATCH_SITE_CONFIG", "WATTBATCH_LOCALCLUSTER_", "WATTBATCH_ROOTS_DIR",
             "WATTBATCH_DEBIAN_MIRROR", "WATTBATCH_ROOT_PORT_OFFSET")
HOST_FILES = ("/etc/hosts", "/etc/resolv.conf")
PIP_CONFIG = ("/etc/pip.conf", "/etc/xdg/pip", "/root/.config/pip")
HOST_CA_DIR = "/usr/local/share/ca-certificates"


def say(message: str) -> None:
    """A progress line on stderr (stdout stays for results)."""
    print(f"localcluster: {message}", file=sys.stderr, flush=True)


# --- releases --------------------------------------------------------------------------------
def suite_of(release: str) -> str:
    """The Debian suite whose Slurm is ``release``."""
    try:
        return RELEASES[release]
    except KeyError:
        raise ConfigError("--slurm", "release", release,
                          f"choose one of {', '.join(CHOICES)}") from None


def state_dir_in_root(release: str) -> str:
    """The cluster's state dir inside the root: its own name, so a process list never mixes
    it up with the host cluster's (/var/tmp/wattbatch-localcluster)."""
    suite_of(release)
    return f"{DEFAULT_STATE_DIR}-{release}"


def ports_of(release: str, environ: Mapping[str, str] | None = None) -> dict[str, int]:
    """Default ports of ``release``'s cluster: the host cluster's plus the release's offset,
    plus ``$WATTBATCH_ROOT_PORT_OFFSET`` (a second set of roots beside the first)."""
    environ = {} if environ is None else environ
    raw = environ.get("WATTBATCH_ROOT_PORT_OFFSET") or "0"
    try:
        extra = int(raw)
    except ValueError:
        extra = -1
    if not 0 <= extra <= 40000:
        raise ConfigError("$WATTBATCH_ROOT_PORT_OFFSET", "port offset", raw,
                          "give a number between 0 and 40000")
    offset = PORT_OFFSETS[release] + extra
    return {name: port + offset for name, port in DEFAULT_PORTS.items()}


def roots_dir(environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    return Path(environ.get("WATTBATCH_ROOTS_DIR") or DEFAULT_ROOTS_DIR)


def root_path(release: str, environ: Mapping[str, str] | None = None) -> Path:
    return roots_dir(environ) / suite_of(release)


def _record_file(root: Path) -> Path:
    return root.with_name(root.name + ".mounts.json")


def _lock_file(root: Path) -> Path:
    return root.with_name(root.name + ".lock")


# --- the Debian mirror -----------------------------------------------------------------------
def _is_debian_main(suites: Iterable[str], components: Iterable[str], uri: str) -> bool:
    if "main" not in components or "security" in uri:
        return False
    return any(s.split("-")[0].split("/")[0] in DEBIAN_SUITES and not s.endswith("-security")
               for s in suites)


def mirrors_from_deb822(text: str) -> list[str]:
    """URIs of enabled ``Types: deb`` stanzas for a Debian suite's main component."""
    found = []
    for stanza in re.split(r"\n[ \t]*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line[0] in " \t" and key:          # continuation line
                fields[key] += " " + line.strip()
                continue
            key, sep, value = line.partition(":")
            if not sep:
                key = None
                continue
            key = key.strip().lower()
            fields[key] = value.strip()
        if not fields:
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        if "deb" not in fields.get("types", "").split():
            continue
        for uri in fields.get("uris", "").split():
            if _is_debian_main(fields.get("suites", "").split(),
                               fields.get("components", "").split(), uri):
                found.append(uri.rstrip("/"))
    return found


def mirrors_from_list(text: str) -> list[str]:
    """URIs of one-line ``deb URI SUITE COMPONENTS`` entries for a Debian suite's main."""
    found = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line.startswith("deb "):
            continue
        line = re.sub(r"\[[^\]]*\]", " ", line[4:])      # [arch=... signed-by=...]
        words = line.split()
        if len(words) >= 3 and _is_debian_main([words[1]], words[2:], words[0]):
            found.append(words[0].rstrip("/"))
    return found


def host_mirror(environ: Mapping[str, str] | None = None, etc_apt: Path = Path("/etc/apt")) -> str:
    """The Debian archive to build roots from: $WATTBATCH_DEBIAN_MIRROR, else the first Debian
    main URI of the host's apt sources."""
    environ = os.environ if environ is None else environ
    if environ.get("WATTBATCH_DEBIAN_MIRROR"):
        return environ["WATTBATCH_DEBIAN_MIRROR"].rstrip("/")
    found: list[str] = []
    files = [etc_apt / "sources.list", *sorted((etc_apt / "sources.list.d").glob("*.list"))]
    for path in files:
        if path.is_file():
            found += mirrors_from_list(path.read_text(errors="replace"))
    for path in sorted((etc_apt / "sources.list.d").glob("*.sources")):
        found += mirrors_from_deb822(path.read_text(errors="replace"))
    if not found:
        raise ConfigError(str(etc_apt), "Debian main mirror", None,
                          "no apt source for Debian main found; " + MIRROR_HINT)
    return found[0]


# --- the clean environment -------------------------------------------------------------------
def passed_env(environ: Mapping[str, str]) -> dict[str, str]:
    """What of the caller's environment a command inside a root sees."""
    return {k: v for k, v in environ.items()
            if (k in PASS_EXACT or k.startswith(PASS_PREFIXES))
            and not k.startswith(HOST_ONLY)}


def root_env(release: str, environ: Mapping[str, str],
             cluster_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a command inside ``release``'s root: the passed part of
    ``environ``, the project's .venv first on PATH, the release's cluster dir and ports, and
    the cluster's SLURM_CONF/WATTBATCH_SITE_CONFIG when it is up."""
    env = passed_env(environ)
    env["PATH"] = f"{VENV_BIN_IN_ROOT}:{SYSTEM_PATH}"
    env.setdefault("HOME", "/root")
    env.setdefault("LANG", "C.UTF-8")
    env["DEBIAN_FRONTEND"] = "noninteractive"
    env["WATTBATCH_LOCALCLUSTER_DIR"] = state_dir_in_root(release)
    for name, port in ports_of(release, environ).items():
        env[f"WATTBATCH_LOCALCLUSTER_PORT_{name.upper()}"] = str(port)
    env.update(cluster_env or {})
    return env


def cluster_env(release: str, root: Path) -> dict[str, str]:
    """SLURM_CONF and WATTBATCH_SITE_CONFIG of the root's cluster (paths inside the root),
    or {} when its slurmctld does not run."""
    inner = Spec(state_dir=Path(state_dir_in_root(release)))
    pid_file = root / str(inner.pid_file("slurmctld")).lstrip("/")
    if procs.running_pid(pid_file, "slurmctld") is None:
        return {}
    return inner.env()


def chroot_argv(root: Path, env: Mapping[str, str], argv: Iterable[str],
                cwd: str = SRC_IN_ROOT) -> list[str]:
    """``chroot ROOT env -i --chdir=CWD K=V ... CMD ARGS``: nothing of ours leaks in."""
    return ["chroot", str(root), "/usr/bin/env", "-i", f"--chdir={cwd}",
            *(f"{k}={v}" for k, v in sorted(env.items())), *argv]


# --- mounts ----------------------------------------------------------------------------------
def mount_plan(root: Path) -> list[tuple[str, list[list[str]]]]:
    """(target, argv list) in mount order. Bind mounts are made slaves, so nothing unmounted
    under the root propagates back to the host's /sys or /dev."""
    r = str(root)
    return [
        (f"{r}/proc", [["mount", "-t", "proc", "proc", f"{r}/proc"]]),
        # recursive: slurmd sees the host's cgroup mounts under /sys/fs/cgroup
        (f"{r}/sys", [["mount", "--rbind", "/sys", f"{r}/sys"],
                      ["mount", "--make-rslave", f"{r}/sys"]]),
        (f"{r}/dev", [["mount", "--bind", "/dev", f"{r}/dev"],
                      ["mount", "--make-rslave", f"{r}/dev"]]),
        (f"{r}/dev/pts", [["mount", "--bind", "/dev/pts", f"{r}/dev/pts"],
                          ["mount", "--make-rslave", f"{r}/dev/pts"]]),
    ]


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[str]:
    """Mount points of /proc/self/mountinfo, in mount order."""
    return [_unescape(line.split()[4]) for line in text.splitlines() if len(line.split()) > 4]


def mounts_under(points: Iterable[str], root: Path | str) -> list[str]:
    """The mount points at or below ``root``."""
    r = str(root).rstrip("/")
    return [p for p in points if p == r or p.startswith(r + "/")]


def unmount_order(recorded: list[str], current: list[str], root: Path | str) -> list[str]:
    """What to unmount, in order: recorded mounts in reverse, then any other mount under
    ``root`` (deepest first), each only if it is still mounted."""
    live = set(mounts_under(current, root))
    order = [p for p in reversed(recorded) if p in live]
    extra = sorted(live - set(order), key=lambda p: (-p.count("/"), p))
    seen: set[str] = set()
    return [p for p in order + extra if not (p in seen or seen.add(p))]


def current_mounts() -> list[str]:
    return parse_mountinfo(Path("/proc/self/mountinfo").read_text())


def read_record(root: Path) -> list[str]:
    try:
        data = json.loads(_record_file(root).read_text())
    except (OSError, ValueError):
        return []
    return [str(p) for p in data.get("mounts", [])] if isinstance(data, dict) else []


def _write_record(root: Path, mounts: list[str]) -> None:
    path = _record_file(root)
    if not mounts:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"root": str(root), "mounts": mounts}, indent=2) + "\n")
    tmp.replace(path)


def mount(root: Path) -> list[str]:
    """Mount what the plan lists and is not mounted yet; return what was mounted now."""
    done = []
    recorded = read_record(root)
    for target, steps in mount_plan(root):
        if target in current_mounts():
            if target not in recorded:
                recorded.append(target)
                _write_record(root, recorded)
            continue
        Path(target).mkdir(parents=True, exist_ok=True)
        proc.run(steps[0], timeout_s=30)
        recorded.append(target)              # recorded as soon as it exists
        _write_record(root, recorded)
        for argv in steps[1:]:
            proc.run(argv, timeout_s=30)
        done.append(target)
    return done


def unmount(root: Path) -> list[str]:
    """Undo every mount under ``root`` (recorded or not); return what was unmounted.
    Raises ``CommandError`` if something stays mounted."""
    undone = []
    for target in unmount_order(read_record(root), current_mounts(), root):
        if target not in current_mounts():      # gone with a recursive unmount before it
            continue
        if proc.run(["umount", "-R", target], timeout_s=60, check=False).returncode != 0:
            proc.run(["umount", "-R", "-l", target], timeout_s=60)
        undone.append(target)
    left = mounts_under(current_mounts(), root)
    if left:
        _write_record(root, left)
        raise CommandError(["umount", *left], 1, f"still mounted under {root}: {left}")
    _write_record(root, [])
    return undone


# --- building a root -------------------------------------------------------------------------
@contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(_lock_file(root), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _ensure_debootstrap() -> None:
    """debootstrap on the host, installed with apt where missing: one installer at a time
    (scripts/test.sh builds the roots of several releases side by side, and a second apt run
    beside the first fails on apt's own lock)."""
    if shutil.which("debootstrap", path=SYSTEM_PATH):
        return
    with install.apt_lock():
        if shutil.which("debootstrap", path=SYSTEM_PATH):
            return                  # the other release's build installed it meanwhile
        say("installing debootstrap with apt")
        env = {"DEBIAN_FRONTEND": "noninteractive"}
        proc.run(["apt-get", "update", "-q"], timeout_s=600, env=env)
        proc.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", "debootstrap"],
                 timeout_s=600, env=env)


def _remove_partial(partial: Path) -> None:
    if not partial.exists():
        return
    unmount(partial)                 # debootstrap may leave /proc or /sys mounted on failure
    if mounts_under(current_mounts(), partial):
        raise CommandError(["rm", "-rf", str(partial)], 1, "mounts left; not removing")
    shutil.rmtree(partial)


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def debootstrap_argv(suite: str, target: Path, mirror: str) -> list[str]:
    return ["debootstrap", "--variant=minbase", f"--include={','.join(INCLUDE)}", suite,
            str(target), mirror]


def build(release: str, environ: Mapping[str, str] | None = None) -> Path:
    """Build ``release``'s root unless it exists; a root appears under its final name only
    when complete."""
    root = root_path(release, environ)
    with _locked(root):
        if root.is_dir():
            return root
        suite = suite_of(release)
        mirror = host_mirror(environ)
        _ensure_debootstrap()
        partial = root.with_name(root.name + ".partial")
        _remove_partial(partial)
        argv = debootstrap_argv(suite, partial, mirror)
        say(f"building a Debian {suite} root for Slurm {release} from {mirror} "
            f"(debootstrap, about a minute) in {partial}")
        t0 = time.monotonic()
        done = proc.run(argv, timeout_s=DEBOOTSTRAP_TIMEOUT_S, check=False)
        if done.returncode != 0:
            log = procs.tail(partial / "debootstrap" / "debootstrap.log", 15)
            try:
                unmount(partial)
            except CommandError:
                pass
            raise CommandError(argv, done.returncode,
                               f"{_tail(done.stderr or done.stdout)}\n{log}\n"
                               f"hint: is the Debian archive {mirror} reachable? {MIRROR_HINT}")
        _configure(partial)
        partial.rename(root)
        say(f"root {root} built in {time.monotonic() - t0:.0f} s")
        return root


def _configure(root: Path) -> None:
    """One-time settings of a fresh root: no daemon starts from a package's install script
    (the cluster starts its own), apt without recommends."""
    policy = root / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\n# packages installed here never start their daemons\nexit 101\n")
    policy.chmod(0o755)
    (root / "etc/apt/apt.conf.d/90wattbatch").write_text(
        'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n')


def _copy_if_changed(src: Path, dst: Path) -> bool:
    if dst.is_symlink() or (dst.exists() and not dst.is_file()):
        if dst.is_dir() and not dst.is_symlink():
            shutil.rmtree(dst)
        else:
            dst.unlink()
    elif dst.is_file() and dst.read_bytes() == src.read_bytes():
        return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    shutil.copymode(src, dst)
    return True


def release_valid_until(text: str) -> float | None:
    """``Valid-Until`` of an apt Release/InRelease file as a Unix time, or None."""
    match = re.search(r"^Valid-Until:\s*(.+)$", text, re.M)
    if not match:
        return None
    from email.utils import parsedate_to_datetime
    try:
        return parsedate_to_datetime(match.group(1).strip()).timestamp()
    except (TypeError, ValueError):
        return None


def allow_expired_release(root: Path, now: float | None = None) -> bool:
    """A mirror that serves a fixed snapshot of sid serves a Release file past its
    Valid-Until (7 days for sid), and apt in the root refuses it. When the root's own
    (debootstrap-fetched) Release file is expired, let apt accept it. True if it was."""
    now = time.time() if now is None else now
    conf = root / "etc/apt/apt.conf.d/91wattbatch-snapshot"
    for release in (root / "var/lib/apt/lists").glob("*_InRelease"):
        until = release_valid_until(release.read_text(errors="replace"))
        if until is not None and until < now:
            if not conf.exists():
                say(f"the mirror's {release.name} expired "
                    f"{(now - until) / 86400:.0f} days ago (a snapshot): apt in "
                    f"{root.name} accepts it")
                conf.write_text("// the mirror serves a snapshot older than its Valid-Until\n"
                                'Acquire::Check-Valid-Until "false";\n')
            return True
    return False


def refresh_host_files(root: Path) -> None:
    """/etc/hosts, /etc/resolv.conf, the host's extra CA certificates and pip configuration,
    so name resolution and pip inside the root work as on the host."""
    for name in HOST_FILES:
        if Path(name).is_file():
            _copy_if_changed(Path(name), root / name.lstrip("/"))
    changed = False
    ca_dir = Path(HOST_CA_DIR)
    if ca_dir.is_dir():
        for src in sorted(ca_dir.rglob("*")):
            if src.is_file():
                changed |= _copy_if_changed(src, root / str(src).lstrip("/"))
    bundle = root / "etc/ssl/certs/ca-certificates.crt"
    if changed or not bundle.exists():
        proc.run(["chroot", str(root), "update-ca-certificates"], timeout_s=120,
                 env={"PATH": SYSTEM_PATH})
    for name in PIP_CONFIG:
        src = Path(name)
        if src.is_file():
            _copy_if_changed(src, root / name.lstrip("/"))
        elif src.is_dir():
            for f in sorted(src.rglob("*")):
                if f.is_file():
                    _copy_if_changed(f, root / str(f).lstrip("/"))


# --- the checkout inside the root ------------------------------------------------------------
def find_checkout(start: Path | None = None) -> Path:
    """This project's git checkout: the working directory or a parent, else the one this
    module was loaded from."""
    here = Path(__file__).resolve().parents[2]
    for cand in [*(lambda p: [p, *p.parents])((start or Path.cwd()).resolve()), here]:
        pyproject = cand / "pyproject.toml"
        if (cand / ".git").exists() and pyproject.is_file() and \
                'name = "wattbatch"' in pyproject.read_text(errors="replace"):
            return cand
    raise ConfigError("checkout", "wattbatch source", str(start or Path.cwd()),
                      "run this from a git checkout of wattbatch")


def checkout_files(checkout: Path) -> list[str]:
    """Tracked and untracked-but-not-ignored files (never .venv or .git)."""
    out = proc.run(["git", "-C", str(checkout), "ls-files", "-z", "-co", "--exclude-standard"],
                   timeout_s=60).stdout
    files = sorted({f for f in out.split("\0") if f})
    return [f for f in files if not f.startswith((".venv/", ".git/"))
            and ((checkout / f).is_file() or (checkout / f).is_symlink())]


def copy_checkout(checkout: Path, root: Path) -> int:
    """Refresh ``/opt/wattbatch/src`` in the root from the checkout; files gone from the
    checkout are removed there (the root's .venv and build outputs stay). Return the number
    of files copied."""
    dest = root / SRC_IN_ROOT.lstrip("/")
    manifest = dest.with_name(dest.name + ".files")
    dest.mkdir(parents=True, exist_ok=True)
    files = checkout_files(checkout)
    try:
        before = set(json.loads(manifest.read_text()))
    except (OSError, ValueError):
        before = set()
    for gone in sorted(before - set(files)):
        (dest / gone).unlink(missing_ok=True)
    copied = 0
    for name in files:
        src, dst = checkout / name, dest / name
        st = src.lstat()
        try:
            dt = dst.lstat()
            if (dt.st_size, dt.st_mtime_ns) == (st.st_size, st.st_mtime_ns):
                continue
        except OSError:
            pass
        dst.parent.mkdir(parents=True, exist_ok=True)
        if dst.is_symlink() or dst.exists():
            dst.unlink()
        shutil.copy2(src, dst, follow_symlinks=False)
        copied += 1
    manifest.write_text(json.dumps(files))
    return copied


# --- using a root ----------------------------------------------------------------------------
def prepare(release: str, checkout: Path | None = None,
            environ: Mapping[str, str] | None = None) -> Path:
    """Build (once), mount, refresh host files and the checkout copy; return the root."""
    root = build(release, environ)
    with _locked(root):
        mount(root)
        refresh_host_files(root)
        allow_expired_release(root)
        copy_checkout(checkout or find_checkout(), root)
    return root


def provide_influxd(root: Path, host_influxd: Path = Path("/usr/bin/influxd")) -> bool:
    """Debian sid has no influxdb package: give a root without an influxd the host's (a Go
    binary that needs only libc) as /usr/local/bin/influxd. True if copied."""
    inside = [root / "usr/bin/influxd", root / "usr/local/bin/influxd"]
    if any(p.exists() for p in inside) or not host_influxd.is_file():
        return False
    say(f"no influxdb package in {root.name}: using the host's {host_influxd} there")
    _copy_if_changed(host_influxd, inside[1])
    return True


@contextmanager
def mounted(root: Path) -> Iterator[Path]:
    """Mount ``root`` (if not mounted yet) for the block; the mounts stay afterwards."""
    with _locked(root):
        mount(root)
    yield root


def is_mounted(root: Path) -> bool:
    return f"{root}/proc" in current_mounts()


def run_in_root(release: str, argv: list[str], environ: Mapping[str, str] | None = None,
                root: Path | None = None, stdout_to_stderr: bool = False) -> int:
    """Run ``argv`` inside the (prepared) root in /opt/wattbatch/src with a clean
    environment; output streamed, exit code returned."""
    environ = os.environ if environ is None else environ
    root = root or root_path(release, environ)
    env = root_env(release, environ, cluster_env(release, root))
    return proc.stream(chroot_argv(root, env, argv), env={"PATH": SYSTEM_PATH},
                  stdout_to_stderr=stdout_to_stderr)
