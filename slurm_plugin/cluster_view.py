"""The cluster view: what policies need of Slurm and InfluxDB, published once per reconcile pass
for every user's wattbatch to decide from.

A site with thousands of users cannot let each submission run ``squeue --json`` over the whole
cluster (sites forbid polling squeue for that reason) nor give every user InfluxDB credentials.
The reconciler already reads both once per pass, as the site's service user, so it writes what
it read to ``view.path`` (``publish``): the snapshot, the newest GPU readings and the running
jobs' progress, as plain JSON, readable by all (0644) and written whole (a temporary file in
the same directory, flushed to disk, then renamed over the old one: a crash mid-write leaves the
previous view, never half a file).

wattbatch reads it (``read``) and decides from it, with the jobs its user submitted since it
was written added (``placed``), when it is trusted and fresh; otherwise it reads Slurm itself,
as before, and says why in ``--wb-explain``. Trusted: the file and its directory belong to
root or to ``view.owner`` (the reconciler's user) and no one else may write them, so no user
can make another user's submissions decide from a forged view. Refused, with the reason: a view
of another cluster, of an unknown format version, cut short, from the future, or older than
``view.max_age_s``. A view holds no more of other users' jobs than ``squeue`` shows them
(``view_codec``).
"""

from __future__ import annotations

import json
import os
import stat
import time

from .gc_pause import gc_paused
from .view_codec import decode_cluster, decode_job, decode_readings, encode_cluster, \
    encode_job, encode_readings

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Any

    from .model import Cluster, Job, Readings

FORMAT = "wattbatch-cluster-view"
VERSION = 2                   # 2: records as tables (view_codec)
FUTURE_SKEW_S = 60.0          # a view this much ahead of the reader's clock is refused
PLACED_FILE = "view-placed.json"
PLACED_KEEP = 200             # the newest jobs a user's wattbatch remembers having submitted
STALE_TMP_S = 3600.0          # a temporary file this old was left by a pass killed mid-write


class ViewRefused(Exception):
    """The view cannot be decided from: the reason, naming the file."""


def publish(path: str, cfg: Any, cluster: Cluster, readings: Readings | None,
            now_s: float | None = None) -> None:
    """Write the view of this pass to ``path`` atomically, readable by all."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, mode=0o755, exist_ok=True)
    doc = {"format": FORMAT, "version": VERSION, "cluster": cfg["cluster.name"],
           "written_s": time.time() if now_s is None else now_s,
           "snapshot": encode_cluster(cluster, cfg["view.hide_job_owners"]),
           "readings": None if readings is None else encode_readings(readings)}
    import tempfile     # the reconciler's side: a submission that reads the view never loads it

    _sweep(folder, time.time())
    fd, tmp = tempfile.mkstemp(prefix=".view-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, separators=(",", ":"))
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:                        # the rename itself reaches the disk
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def _sweep(folder: str, now_s: float) -> None:
    """Remove the temporary files of passes killed while writing (older than an hour: a pass
    writing now is never touched)."""
    try:
        names = [n for n in os.listdir(folder) if n.startswith(".view-") and n.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        path = os.path.join(folder, name)
        try:
            if now_s - os.stat(path).st_mtime > STALE_TMP_S:
                os.unlink(path)
        except OSError:
            pass


def _trusted_uids(cfg: Any) -> set[int]:
    uids = {0}
    owner = cfg["view.owner"]
    if owner:
        import pwd
        try:
            uids.add(pwd.getpwnam(owner).pw_uid)
        except KeyError:
            pass            # an unknown user trusts no one but root
    return uids


def _check_owner(path: str, st: os.stat_result, uids: set[int], what: str) -> None:
    if st.st_uid not in uids:
        raise ViewRefused(f"cluster view {path}: {what} belongs to uid {st.st_uid}, not to root "
                          "or view.owner: not trusted")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ViewRefused(f"cluster view {path}: {what} may be written by others "
                          f"(mode {stat.S_IMODE(st.st_mode):o}): not trusted")


def read(path: str, cfg: Any, now_s: float) -> tuple[Cluster, Readings | None]:
    """The view at ``path`` as (snapshot, readings); ``ViewRefused`` with the reason when it
    cannot be decided from. The cyclic garbage collector is off meanwhile (then as it was):
    a large view makes millions of objects and no cycle, and each full collection would walk
    every live one."""
    with gc_paused():
        return _read(path, cfg, now_s)


def _read(path: str, cfg: Any, now_s: float) -> tuple[Cluster, Readings | None]:
    uids = _trusted_uids(cfg)
    try:
        _check_owner(path, os.stat(os.path.dirname(os.path.abspath(path))), uids,
                     "its directory")
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            _check_owner(path, st, uids, "the file")
            got = _KEPT.get(path)
            if got is None or got[0] != _stamp(st):
                got = _decoded(path, _stamp(st), fh.read(), store=False)
    except FileNotFoundError:
        raise ViewRefused(f"cluster view {path}: missing (no reconcile pass has written it)") \
            from None
    except OSError as exc:
        raise ViewRefused(f"cluster view {path}: cannot read ({exc.strerror})") from None
    _, name, cluster, readings = got
    if name != cfg["cluster.name"]:
        raise ViewRefused(f"cluster view {path}: of cluster {name!r}, this site is "
                          f"{cfg['cluster.name']!r} (cluster.name)")
    age_s = now_s - cluster.taken_s
    if age_s < -FUTURE_SKEW_S:
        raise ViewRefused(f"cluster view {path}: taken {-age_s:.0f} s in the future (clocks "
                          "disagree, or the file was made by hand)")
    if age_s > cfg["view.max_age_s"]:
        raise ViewRefused(f"cluster view {path}: {age_s:.0f} s old, over view.max_age_s = "
                          f"{cfg['view.max_age_s']:g}")
    return cluster, readings


# ---------------------------------------------------------------- a view kept decoded
# path -> (the file's stamp, its cluster name, snapshot, readings): the view the warm server
# keeps decoded (``keep``), so the calls it forks find it decoded. A call uses it only for the
# very file it opened and checked (each pass renames a new file in: another inode, another
# stamp), so what is kept never outlives the file or skips a check.
_KEPT: dict[str, tuple[tuple, str, Cluster, Readings | None]] = {}


def _stamp(st: os.stat_result) -> tuple:
    """What changes whenever the file's content may have: a new file renamed in (device,
    inode), or one written in place (size, and the change time, which no user can set)."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _decoded(path: str, stamp: tuple, raw: bytes, store: bool
             ) -> tuple[tuple, str, Cluster, Readings | None]:
    """The view's bytes decoded (``ViewRefused`` when they are no view this reads); ``store``:
    kept as this process's view of ``path``."""
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise ViewRefused(f"cluster view {path}: not whole JSON ({exc.msg} at byte {exc.pos}"
                          f" of {len(raw)})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ViewRefused(f"cluster view {path}: not a wattbatch cluster view")
    if doc.get("version") != VERSION:
        raise ViewRefused(f"cluster view {path}: format version {doc.get('version')!r}, this "
                          f"wattbatch reads version {VERSION}")
    try:
        cluster = decode_cluster(doc["snapshot"])
        readings = decode_readings(doc["readings"]) if doc.get("readings") else None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ViewRefused(f"cluster view {path}: a record not understood "
                          f"({type(exc).__name__}: {exc})") from None
    got = (stamp, doc.get("cluster"), cluster, readings)
    if store:
        _KEPT.clear()           # one view at a time: a site names one
        _KEPT[path] = got
    return got


def keep(path: str) -> bool:
    """Decode the view at ``path`` ahead of the calls that will read it (the warm server,
    between calls), unless the one kept is of the same file; True: decoded now. Whether a
    call may decide from it is the call's to check (``read``: owner, cluster, age), so
    nothing here depends on a call's site config; a file that is no view is left alone."""
    try:
        with open(path, "rb") as fh, gc_paused():
            stamp = _stamp(os.fstat(fh.fileno()))
            got = _KEPT.get(path)
            if got is not None and got[0] == stamp:
                return False
            _decoded(path, stamp, fh.read(), store=True)
            return True
    except (OSError, ViewRefused):
        return False


def kept(path: str) -> tuple[Cluster, Readings | None] | None:
    """The view of ``path`` kept decoded (``keep``), unchecked: for the warm server's own
    head start on a decision (``snapshot_cache.decide_again``), never to decide a call."""
    got = _KEPT.get(path)
    return None if got is None else (got[2], got[3])


# ---------------------------------------------------------------- this user's jobs since
def remember(folder: str | None, job: Job, placed_s: float,
             max_age_s: float = float("inf")) -> None:
    """Keep ``job`` (just submitted by this user) in ``folder`` (only this user's), so a
    submission that decides from a view older than it counts it. Jobs placed more than
    ``max_age_s`` (``view.max_age_s``) ago go: any view a submission accepts is newer, so it
    shows them, and each one kept costs every later submission its decoding."""
    if folder is None:
        return
    path = os.path.join(folder, PLACED_FILE)
    recent = [e for e in _placed(path) if _placed_at(e) >= placed_s - max_age_s]
    kept = recent[-(PLACED_KEEP - 1):] + [[placed_s, encode_job(job)]]
    # this process's own temporary name (the folder is only this user's), then renamed over:
    # a reader sees the old list or the new one (no tempfile: it costs a submission ~9 ms)
    tmp = os.path.join(folder, f".placed-{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(kept, fh)
    os.replace(tmp, path)


def _placed_at(entry: object) -> float:
    """When an entry of the list was placed (-inf for one not understood: dropped)."""
    try:
        return float(entry[0])      # type: ignore[index]
    except (TypeError, ValueError, IndexError):
        return float("-inf")


def _placed(path: str) -> list:
    try:
        with open(path, encoding="utf-8") as fh:
            got = json.load(fh)
        return got if isinstance(got, list) else []
    except (OSError, ValueError):
        return []


def placed(folder: str | None, since_s: float) -> list[Job]:
    """The jobs this user's wattbatch submitted at or after ``since_s``."""
    if folder is None:
        return []
    out = []
    for entry in _placed(os.path.join(folder, PLACED_FILE)):
        try:
            if float(entry[0]) >= since_s:
                out.append(decode_job(entry[1]))
        except (TypeError, ValueError, KeyError, IndexError):
            continue
    return out
