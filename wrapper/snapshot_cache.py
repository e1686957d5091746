"""The warm server's snapshot cache: a burst of submissions decides without waiting on Slurm
and InfluxDB each time.

After a call that read the Slurm snapshot has answered its caller, came at most
``wrapper.snapshot_cache_s`` after the previous such call (a burst: a lone submission costs
Slurm and InfluxDB nothing more) and found no snapshot younger than half that window, it reads
the snapshot and the readings again (so they show its own job) and hands them to the server,
which keeps the newest per site configuration. The next call whose snapshot is at most
``wrapper.snapshot_cache_s`` old decides on it, with every job a call submitted after that
snapshot was taken overlaid: such a job counts as the pending, pinned job Slurm will show
(``placed_job``), so a burst cannot co-locate past what the policy allows because its snapshot
missed the burst's earlier jobs. What the cache can miss is another user's submission, or a job
ending, inside that window: Slurm's GRES accounting still holds the limit, and reconcile's next
pass judges the co-location as it judges any other.

Messages from a call's child to the server go over a pipe as length-prefixed ``marshal``
tuples: ``("call", key, at_s, b"")`` when a call asks for the snapshot, ``("placed", key,
placed_s, job)`` before the caller gets its answer, and ``("cache", key, taken_s, snapshot)``
after; the job and the snapshot are pickled.
"""

from __future__ import annotations

import copyreg
import hashlib
import os
import pickle
import time
from _thread import allocate_lock
from types import MappingProxyType

from slurm_plugin.model import Cluster, Job
from slurm_plugin.record import replace

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping

MAX_MESSAGE_BYTES = 256 << 20
WARM_EVERY_S = 60.0


def _proxy(values: dict) -> MappingProxyType:
    return MappingProxyType(values)


copyreg.pickle(MappingProxyType, lambda m: (_proxy, (dict(m),)))


def cache_key(cfg: Any, environ: Mapping[str, str]) -> str:
    """Calls share a snapshot only when it would have been read the same way: the same site
    configuration, ``SLURM_CONF`` and ``PATH`` (which ``squeue`` runs)."""
    text = repr((sorted(cfg.as_dict().items()), environ.get("SLURM_CONF"), environ.get("PATH")))
    return hashlib.sha1(text.encode("utf-8", "surrogateescape")).hexdigest()


def submitted_job_id(stdout: str) -> str | None:
    """The job id in sbatch's answer: ``Submitted batch job N``, or ``--parsable``'s ``N[;cluster]``."""
    for line in stdout.splitlines():
        if line.startswith("Submitted batch job "):
            word = line.split()[3] if len(line.split()) > 3 else ""
        else:
            word = line.split(";", 1)[0].strip()
        if word.isdigit():
            return word
    return None


def placed_job(outcome: Any, cluster: Cluster, job_id: str, now_s: float) -> Job:
    """The job a call just submitted, as the next snapshot will show it: pending, on the typed
    GPUs its placement pinned (each GPU's holder from then on, as ``attach_jobs`` counts it)."""
    p, r = outcome.placement, outcome.request
    shared = p is not None and p.share_mode != "exclusive"
    pinned: tuple[tuple[str, str, int], ...] = ()
    if p is not None and len(p.nodes) == 1 and p.gpu_indexes:
        types = {g.index: g.gres_type for n in cluster.nodes if n.name == p.nodes[0]
                 for g in n.gpus}
        pinned = tuple((p.nodes[0], types[i], p.shards if shared else 0)
                       for i in p.gpu_indexes if types.get(i))
    gpus = 0 if p is None or shared else p.gpus
    return Job(job_id=job_id, state="PENDING", name=r.name if r else "",
               user=r.user if r else "", partition=r.partition if r else "",
               gpus=gpus, shards=p.shards * max(1, len(p.gpu_indexes)) if shared else 0,
               num_nodes=r.num_nodes if r else 1, submit_s=now_s, app=r.app if r else "",
               time_limit_s=r.time_limit_s if r else None, pinned=pinned)


def with_jobs(cluster: Cluster, jobs: list[Job]) -> Cluster:
    """``cluster`` with ``jobs`` it does not show yet, each GPU's holders counted again: only
    on the nodes they pin when they are pending (as a submission's are; at 10,000 nodes,
    counting every GPU again would cost a call a third of a second)."""
    from slurm_plugin.holders import attach_jobs, with_pins
    new = [j for j in jobs if j.job_id not in cluster.jobs]
    if not new:
        return cluster
    every = dict(cluster.jobs)
    every.update((j.job_id, j) for j in new)
    nodes = with_pins(cluster.nodes, new)
    pending = cluster.pending_count
    return replace(cluster, nodes=attach_jobs(cluster.nodes, every.values()) if nodes is None
                   else nodes, jobs=MappingProxyType(every),
                   pending_count=None if pending is None else
                   pending + sum(j.state == "PENDING" for j in new))


class Shared:
    """The server's side: the newest snapshot per key, and the jobs placed since."""

    def __init__(self) -> None:
        self.snapshots: dict[str, tuple[float, bytes]] = {}
        self.placed: list[tuple[str, float, bytes]] = []
        self.last_call_s: dict[str, float] = {}
        self.warmed_s: dict[str, float] = {}
        # key -> (when a call last decided from the site's view, (its path, that decision))
        self.views: dict[str, tuple[float, bytes]] = {}

    def warm_due(self, key: str, now_s: float) -> bool:
        """Whether to make a decision again on ``key``'s new snapshot (``warm``): at most once
        a minute per key, so the server spends little time away from accepting calls."""
        if now_s - self.warmed_s.get(key, -WARM_EVERY_S) < WARM_EVERY_S:
            return False
        self.warmed_s[key] = now_s
        return True

    def take(self, message: Any) -> bool:
        """Apply one child's message; True: it brought a newer snapshot. Anything malformed
        is dropped."""
        try:
            kind, key, at_s, blob = message
        except (TypeError, ValueError):
            return False
        if not (isinstance(key, str) and isinstance(at_s, float) and isinstance(blob, bytes)):
            return False
        if kind == "call":
            self.last_call_s[key] = max(at_s, self.last_call_s.get(key, 0.0))
        elif kind == "placed":
            self.placed.append((key, at_s, blob))
        elif kind == "view":
            self.views[key] = (at_s, blob)
        elif kind == "cache" and at_s > self.snapshots.get(key, (0.0, b""))[0]:
            self.snapshots[key] = (at_s, blob)
            self.placed = [p for p in self.placed if p[0] != key or p[1] >= at_s]
            return True
        return False

    def prune(self, now_s: float, keep_s: float) -> None:
        self.snapshots = {k: v for k, v in self.snapshots.items() if now_s - v[0] <= keep_s}
        self.placed = [p for p in self.placed if now_s - p[1] <= keep_s]
        self.last_call_s = {k: t for k, t in self.last_call_s.items() if now_s - t <= keep_s}
        self.views = {k: v for k, v in self.views.items() if now_s - v[0] <= keep_s}


def frame(message: tuple) -> bytes:
    import marshal
    body = marshal.dumps(message)
    return len(body).to_bytes(4, "big") + body


def unframe(buffer: bytearray) -> list[Any]:
    """The whole messages at the front of ``buffer`` (removed from it); ValueError: garbage."""
    import marshal
    out = []
    while len(buffer) >= 4:
        size = int.from_bytes(buffer[:4], "big")
        if size > MAX_MESSAGE_BYTES:
            raise ValueError(f"message of {size} bytes")
        if len(buffer) < 4 + size:
            break
        out.append(marshal.loads(bytes(buffer[4:4 + size])))
        del buffer[:4 + size]
    return out


class CachedProviders:
    """A call's child's side: the snapshot and readings from ``shared`` when fresh enough
    for this call's configuration, else from ``live``; ``send`` reaches the server."""

    def __init__(self, shared: Shared, live: Any, send: Callable[[tuple], None]) -> None:
        self.shared, self.live, self.send = shared, live, send
        self.cfg: Any = None
        self.key = ""
        self.cluster: Cluster | None = None
        self.stale = False              # in a burst, and no snapshot younger than half the window
        self.outcome: Any = None
        self._hit: tuple[Cluster, Any] | None = None
        self._lock = allocate_lock()

    def _cached(self, cfg: Any) -> tuple[Cluster, Any] | None:
        """This call's cached snapshot and readings, or None; looked up once (the snapshot
        and the readings may be asked for from two threads at once)."""
        with self._lock:
            if self.cfg is None:
                self.cfg, self.key = cfg, cache_key(cfg, os.environ)
                self._hit = self._look_up(cfg["wrapper.snapshot_cache_s"])
            return self._hit

    def _look_up(self, cache_s: float) -> tuple[Cluster, Any] | None:
        now_s = time.time()
        in_burst = now_s - self.shared.last_call_s.get(self.key, 0.0) <= cache_s
        if cache_s > 0:
            self.send(("call", self.key, now_s, b""))
        taken_s, blob = self.shared.snapshots.get(self.key, (0.0, b""))
        # half the window: a burst reads Slurm every cache_s / 2 seconds, not once per call
        self.stale = in_burst and not 0.0 <= now_s - taken_s <= cache_s / 2
        if not blob or not 0.0 <= now_s - taken_s <= cache_s:
            return None
        try:
            cluster, readings, _ = pickle.loads(blob)
            jobs = [pickle.loads(b) for k, at_s, b in self.shared.placed
                    if k == self.key and at_s >= taken_s]
            return with_jobs(cluster, jobs), readings
        except Exception:           # noqa: BLE001 - an unreadable entry: read Slurm instead
            return None

    def snapshot(self, cfg: Any) -> Cluster:
        hit = self._cached(cfg)
        self.cluster = hit[0] if hit else self.live.snapshot(cfg)
        return self.cluster

    def readings(self, cfg: Any, cluster: Any, now_s: float, carbon: bool = True) -> Any:
        """The cached readings (read with carbon, for any policy), else read now."""
        hit = self._cached(cfg)
        return hit[1] if hit else self.live.readings(cfg, cluster, now_s, carbon)

    def decided(self, outcome: Any) -> None:
        """The call's decision, for the server to make again on a new snapshot or view."""
        self.outcome = outcome

    def submitted(self, outcome: Any, stdout: str) -> None:
        """Said before the caller hears back, so the server knows of the job in time for the
        caller's next submission."""
        job_id = submitted_job_id(stdout)
        if self.cluster is None or job_id is None or outcome.placement is None:
            return
        self.outcome = outcome
        job = placed_job(outcome, self.cluster, job_id, time.time())
        self.send(("placed", self.key, time.time(), pickle.dumps(job)))
        if getattr(self.live, "submitted", None) is not None:     # the site's cluster view
            self.live.submitted(outcome, stdout)

    def refresh(self) -> None:
        """After the call: read the snapshot and readings anew for the next calls, when this
        call read one, came in a burst and found no snapshot younger than half the window (a
        site that sets ``wrapper.snapshot_cache_s = 0`` reads none). At low priority: the
        burst's next call is running meanwhile. A call that decided from the site's cluster
        view reads nothing: it tells the server which view to keep decoded (``keep_view``)."""
        if self.cfg is None:
            return
        source = getattr(self.cluster, "source", "")
        if source.startswith("view "):
            if self.cfg["view.keep_in_server"]:
                self.send(("view", self.key, time.time(), view_blob(source[5:], self._replay())))
            return
        if not self.stale:
            return
        try:
            os.nice(10)
        except OSError:
            pass
        taken_s = time.time()
        cluster = self.live.snapshot(self.cfg)
        readings = self.live.readings(self.cfg, cluster, time.time())
        self.send(("cache", self.key, taken_s, pickle.dumps((cluster, readings, self._replay()))))

    def _replay(self) -> tuple | None:
        """This call's decision, for the server to make again on the new snapshot (``warm``)."""
        o = self.outcome
        if o is None or o.request is None:
            return None
        from slurm_plugin.config import policy_settings
        return o.policy, dict(policy_settings(self.cfg, o.policy)), o.request, \
            self.cfg["reconcile.state_dir"]


def warm(blob: bytes) -> None:
    """In the server: make the last call's decision again on the snapshot it sent, so that what
    the policy computes once (EaCO's shard weights of a GPU kind, under the site's settings and
    history) is in memory before the next call's child is forked. Pure policy code: no Slurm,
    no InfluxDB; the result is thrown away."""
    decide_again(*pickle.loads(blob))


def view_blob(path: str, replay: tuple | None = None) -> bytes:
    """A ``("view", ...)`` message's body: the view's path and the decision to make again."""
    return pickle.dumps((path, replay))


def keep_view(blob: bytes) -> None:
    """In the server: keep the view a call decided from decoded (``cluster_view.keep``: when it
    is a new file), and make that call's decision again on it (``decide_again``) once per
    policy and view, so the calls forked next read none of it and find the policy's caches of
    it made."""
    from slurm_plugin import cluster_view
    import gc
    path, replay = pickle.loads(blob)
    if cluster_view.keep(path):
        _VIEW_WARMED.clear()
    name = replay[0] if replay else None
    got = cluster_view.kept(path)
    if got is None or (name in _VIEW_WARMED):
        return
    _VIEW_WARMED.add(name)
    decide_again(*got, replay)
    # the view's millions of objects, and the policy's caches of them, out of the collector's
    # sight: a collection in a forked call would otherwise touch, and so copy, every page
    gc.freeze()


_VIEW_WARMED: set[str | None] = set()      # the policies decided again on the kept view


def decide_again(cluster: Cluster, readings: Any, replay: tuple | None) -> None:
    """A call's decision (``CachedProviders._replay``) made again on ``cluster``; thrown away."""
    from slurm_plugin.history import read_view
    from slurm_plugin.model import Readings
    from slurm_plugin.policy.base import Context
    from slurm_plugin.policy.registry import kept_policy
    if replay is None:
        return
    name, settings, request, state_dir = replay
    kept_policy(name).advise(request, Context(cluster=cluster, readings=readings or Readings(),
                                             now_s=time.time(), settings=settings,
                                             history=read_view(state_dir)))
