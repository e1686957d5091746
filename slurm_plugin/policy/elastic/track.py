"""The running jobs as the ``elastic`` policy follows them from pass to pass: which jobs hold
GPUs, the model of each elastic one, and when each is expected to end per node. A pass costs
the nodes that changed since the last one (the simulator's ``nodes_log``; without it, every
node) and one step per running job; a job's progress is read again only once its model is
as old as a reading may be (``stale_s``, or an eighth of its remaining time when that is
longer) or when it restarts."""

from __future__ import annotations

from ...model import Job
from ..free_gpus import gpus_by_node, node_facts
from .observe import epoch_fraction, usable_rate
from .predict import JobModel, prior
from .settings import ElasticSettings

def elastic_range(lo: int | None, hi: int | None) -> tuple[int, int] | None:
    if lo is None or hi is None:
        return None
    lo, hi = max(1, lo), max(1, hi)
    return (lo, hi) if hi > lo else None


class Tracker:
    def __init__(self) -> None:
        self.version: int | None = None          # nodes_version of the last pass
        self.position: dict[str, int] = {}        # node name -> its place in Cluster.nodes
        self.seen = False                         # a pass has run
        self.node_ids: dict[str, tuple[str, ...]] = {}
        self.refs: dict[str, int] = {}            # job id -> nodes that list it
        # job id -> [view, GPUs, GPUs per node, elastic range, model, read at, expected end,
        # read again at, history keys]
        self.entries: dict[str, list] = {}
        self.elastic: dict[str, list] = {}        # the entries of elastic jobs
        self.node_ends: dict[str, dict[str, tuple[float, int]]] = {}   # node -> job -> (end, GPUs)
        self.sorted_ends: dict[str, list[tuple[float, int]]] = {}      # the same, soonest first
        # the last update's models of the jobs (re)started at least ``min_interval_s`` before
        self.movable: dict[str, JobModel] = {}
        self.expiry = float("inf")      # the last update's next hysteresis end

    def _changed(self, cluster) -> list | None:
        """The node views that changed since the last pass, None when unknown (all)."""
        ver, log = cluster.nodes_version, cluster.nodes_log
        last, self.version = self.version, ver
        if ver is None or last is None or log is None:
            return None
        if ver == last:
            return []
        names: set[str] = set()
        for v in range(last + 1, ver + 1):
            got = log.get(v)
            if got is None:
                return None
            names.update(got)
        nodes, position = cluster.nodes, self.position
        if len(position) != len(nodes):
            position = self.position = {n.name: i for i, n in enumerate(nodes)}
        at = sorted(position.get(name, -1) for name in names)
        if at and (at[0] < 0 or any(nodes[i].name not in names for i in at)):
            self.position = {}
            return None     # nodes came, went or moved: every one read again
        return [nodes[i] for i in at]

    def update(self, ctx, s: ElasticSettings, cap: int) -> tuple[list[JobModel], dict]:
        """This pass's models of the elastic jobs with usable progress, and the history
        updates of the readings taken."""
        cluster, now = ctx.cluster, ctx.now_s
        self.seen = True
        changed = self._changed(cluster)
        jobs = cluster.jobs
        entries = self.entries
        refs = self.refs
        if changed is None:
            changed = cluster.nodes           # every node read again, every job checked
            gone = set(self.node_ids) - {n.name for n in changed}
            for name in gone:
                for jid in self.node_ids.pop(name):
                    refs[jid] -= 1
        check = set()
        for n in changed:
            ids = node_facts(n)[1]
            old = self.node_ids.get(n.name, ())
            for jid in old:
                refs[jid] -= 1
            for jid in ids:
                refs[jid] = refs.get(jid, 0) + 1
            check.update(old)
            check.update(ids)
            self.node_ids[n.name] = ids
        if check:
            live = []
            for jid in check:
                if refs.get(jid, 0) <= 0:
                    refs.pop(jid, None)
                    if jid in entries:
                        self._drop(jid)
                else:
                    e = entries.get(jid)
                    if e is not None and e[0] is jobs.get(jid):
                        continue        # the same view: still running, followed as it is
                    live.append(jid)
            for jid in sorted(live):    # a fixed order
                job = jobs.get(jid)
                e = entries.get(jid)
                if job is None or not job.running or job.shards:
                    if e is not None:
                        self._drop(jid)
                    continue
                if e is None or e[0] is not job:
                    if e is not None:
                        self._drop(jid)
                    self._add(job)
        updates: dict[str, float] = {}
        models: list[JobModel] = []
        movable: dict[str, JobModel] = {}
        self.movable = movable
        since = now - s.min_interval_s
        expiry = float("inf")       # when the next elastic job's hysteresis ends
        hist, progress = ctx.history, ctx.readings.progress
        for jid, e in self.elastic.items():
            st = e[0].start_s
            if st is not None:
                t = st + s.min_interval_s
                if now < t < expiry:
                    expiry = t
            m = e[4]
            if m is None or now >= e[7]:
                m = _model(e[0], e[1], e[2], e[3], progress, hist, now, s, cap, updates, e[8])
                e[4], e[5] = m, now
                if m is None:
                    continue
                self._set_end(jid, e, now + m.remaining_s)
                e[7] = now + max(s.stale_s, 0.125 * m.remaining_s)     # read again then
            else:
                rem = e[6] - now
                m.remaining_s = rem if rem > 0.0 else 0.0
            models.append(m)
            if st is None or st <= since:
                movable[jid] = m
        self.expiry = expiry
        return models, updates

    def _add(self, job: Job) -> None:
        uses = gpus_by_node(job)
        n = len(job.uses) or job.gpus * job.num_nodes
        rng = elastic_range(job.min_gpus, job.max_gpus)
        e = [job, n, uses, rng, None, 0.0, None, 0.0,
             _keys(job.job_id) if rng is not None else None]
        self.entries[job.job_id] = e
        if e[3] is not None:
            self.elastic[job.job_id] = e
        if job.start_s is not None and job.time_limit_s:
            self._set_end(job.job_id, e, job.start_s + job.time_limit_s)   # Slurm's

    def _set_end(self, jid: str, e: list, end: float) -> None:
        e[6] = end
        for name, c in e[2].items():
            self.node_ends.setdefault(name, {})[jid] = (end, c)
            self.sorted_ends.pop(name, None)

    def ends_on(self, name: str) -> list[tuple[float, int]]:
        """(expected end, GPUs there) of the running jobs on node ``name``, soonest first."""
        got = self.sorted_ends.get(name)
        if got is None:
            got = self.sorted_ends[name] = sorted(self.node_ends.get(name, {}).values())
        return got

    def _drop(self, jid: str) -> None:
        e = self.entries.pop(jid)
        self.elastic.pop(jid, None)
        for name in e[2]:
            d = self.node_ends.get(name)
            if d is not None:
                d.pop(jid, None)
            self.sorted_ends.pop(name, None)

    def running(self):
        """(job view, GPUs) of every running job."""
        return [(e[0], e[1]) for e in self.entries.values()]


_KEY_NAMES = ("run", "s0", "t0", "n", "x", "pn", "px", "stop_t", "stop_step", "rc", "rc_run")
MAX_RESTART_S = 3600.0      # a measured restart cost is taken as at most this


def _keys(jid: str) -> tuple[str, ...]:
    """The history keys of job ``jid`` (``observe``'s): run, s0, t0, n, x, pn, px, stop_t,
    stop_step, rc, rc_run."""
    return tuple(f"elastic:{k}:{jid}" for k in _KEY_NAMES)


def stop_marks(job_id: str, now_s: float, progress, hist) -> dict[str, float]:
    """The history updates that mark job ``job_id`` stopped now for a resize: when, and the
    step it has reached by now at its current run's measured rate (none without one), from
    which its next run measures what the restart cost it (``restart_cost``)."""
    p = progress.get(job_id)
    if p is None:
        return {}
    k = _keys(job_id)
    s0, t0 = hist.get(k[1]), hist.get(k[2])
    if hist.get(k[0]) != float(p.started_s) or s0 is None or t0 is None \
            or p.taken_s <= t0 or p.step <= s0:
        return {}
    rate = (p.step - s0) / (p.taken_s - t0)         # steps/s of this run
    step = p.step + rate * max(0.0, now_s - p.taken_s)
    return {k[7]: float(now_s), k[8]: float(step)}


def restart_cost(run: float, step: float, taken_s: float, rate_steps_s: float, get,
                 keys: tuple[str, ...], default_s: float,
                 updates: dict[str, float]) -> float:
    """Job's restart cost (checkpoint + requeue + start-up + work lost since its checkpoint):
    after a stop marked by ``stop_marks``, the time since the stop less the time its progress
    since then took at this run's rate, measured once per run (``updates``) and averaged with
    the job's earlier restarts; ``default_s`` (the site's) until one is measured."""
    k_stop_t, k_stop_step, k_rc, k_rc_run = keys[7:11]
    rc = get(k_rc)
    stop_t, stop_step = get(k_stop_t), get(k_stop_step)
    if stop_t is not None and stop_step is not None and stop_t <= run + 1.0 \
            and get(k_rc_run) != run and rate_steps_s > 0:
        lost = (taken_s - stop_t) - (step - stop_step) / rate_steps_s
        lost = min(max(lost, 0.0), MAX_RESTART_S)
        rc = lost if rc is None else 0.5 * (rc + lost)
        updates[k_rc], updates[k_rc_run] = rc, run
    return rc if rc is not None else default_s


def _model(job: Job, n: int, uses: dict[str, int], rng: tuple[int, int], progress, hist,
           now: float, s: ElasticSettings, cap: int,
           updates: dict[str, float], keys: tuple[str, ...] | None = None) -> JobModel | None:
    """The job's model from its progress reading (``observe.usable_rate``), with its history
    updates (a new run restarts its step counter) and remaining time, each history key built
    once (``keys``, from ``_keys``)."""
    p = progress.get(job.job_id)
    if p is None:
        return None
    keys = keys or _keys(job.job_id)
    k_run, k_s0, k_t0, k_n, k_x, k_pn, k_px = keys[:7]
    get = hist.get
    pn, px = get(k_pn), get(k_px)
    x = usable_rate(p, job, n, now, s, pn, px)
    if x is None:
        return None
    run = float(p.started_s)
    if get(k_run) != run:   # a new run: its first reading gives no rate yet
        old_n, old_x = get(k_n), get(k_x)
        if old_n and old_x and old_n != n:
            updates[k_pn], updates[k_px] = old_n, old_x
        updates[k_run] = run
        updates[k_s0] = float(p.step)
        updates[k_t0] = float(p.taken_s)
        if old_n != n or old_x != x:
            updates[k_n], updates[k_x] = float(n), x
        return None
    if get(k_n) != n or get(k_x) != x:
        updates[k_n], updates[k_x] = float(n), x
    if p.total_steps <= 0:
        return None
    s0, t0 = get(k_s0), get(k_t0)
    if s0 is None or t0 is None or p.taken_s <= t0 or p.step <= s0:
        return None
    rate = (p.step - s0) / (p.taken_s - t0)         # steps/s of this run
    rem = max(0.0, p.total_steps - p.step) / rate
    rc = restart_cost(run, p.step, p.taken_s, rate, get, keys, s.restart_cost_s, updates)
    if not s.measure_restart_cost:
        rc = s.restart_cost_s      # measured and recorded, not used
    return JobModel(job.job_id, n, rng[0], min(rng[1], cap), prior(job.app), x, rem, uses,
                    int(pn) if pn is not None else 0, px if px is not None else 0.0,
                    epoch_fraction(p), job.submit_s, job.time_limit_s, rc)
