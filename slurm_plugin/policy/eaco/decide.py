"""``eaco``: energy-aware co-location of training jobs on shared GPUs (EaCO, arXiv 2412.08294).

``advise``, for a job that may share:
1. every candidate GPU set of one node holding shared jobs is checked: no exclusive job, fewer
   than ``max_jobs_per_gpu`` jobs, shards left for the job, residents' summed solo utilisation
   plus its own under the threshold, their peak memory plus its own under the memory threshold;
   every set of free GPUs of one node is a candidate too (the job alone, held as shards);
2. candidates are tried in the order of the node-on time the job would add (the job's time
   limit past the expected end of the node's last job; all of it on an empty node, plus the
   boot on a suspended one): a powered node costs idle and base power whatever its GPUs do,
   so the job goes where the node stays on anyway. Ties: sharing before a free GPU, the least
   utilised residents (least slowdown), the busiest node;
3. for a set with residents the slowdown of every job that would share is predicted (history
   of observed groups first, else the physics); the set is taken if all stay under
   ``max_slowdown`` and their deadlines and the objective ``alpha * energy + (1 - alpha) *
   time per epoch`` beats an exclusive GPU; a free GPU set is taken as it comes;
4. with no free GPU, or a queue so long the job would not start now, a one-GPU job is handed to
   Slurm as shards without naming a GPU: the shard count of each class (``shards``) is
   chosen so that any jobs whose shards fit on one GPU are predicted to share it well (per
   kind of GPU: on a cluster of several models, the largest of the job's counts on them, and
   whole GPUs when one of them takes no share of its class);
5. else whole GPUs where Slurm puts them (as ``slurm-default``).
A job that may not share (opted out, site default off, unknown class, multi-node, or a class
that shares well with no class) gets whole GPUs; ``why`` says which case applied. Every
candidate is a GPU set of one node, so of the node's model: a job shares a GPU only with jobs
on that model, with the weights and power of that model.

With ``share_modes`` holding "mig", a one-GPU job may instead take a MIG instance of an A100,
H100 or H200, beside other instances or alone on a free GPU put into MIG mode, where that adds
less node-on time or scores better than the time-sliced answer (``mig``; docs/eaco.md, "MIG").

``reconcile`` (``observe``): the early-stage observation of each shared GPU, recorded in
the history, and a move to an exclusive GPU for a job the observation (or the prediction, for
jobs that met on one GPU unplanned) shows is slowed too much or would miss its deadline.

Pure: imports only the model, the policy interface and the physics. See docs/eaco.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from dataclasses import dataclass
from types import MappingProxyType

from ...model import Action, Cluster, Gpu, Job, JobRequest, Node, Placement
from ...physics import JobClass, node_base_power_w, node_resume_delay_s
from ..base import Context, plain_placement
from ..powersave import POWER_SAVE
from ..queue import first_queued
from .index import KindIndex, NodeMemo, OfferIndex
from .mig import mig_placement
from .observe import ObserveMemo, observe
from .pins import stale_pins
from .predict import (
    deadline_of,
    group_slowdowns,
    known_class,
    objective,
    remaining_solo_s,
    repeat_key_of,
    solo_time_s,
    solo_util_pct,
)
from .settings import EacoSettings
from .shards import memory_cap_mib, share_weights

NAME = "eaco"
# Slurm looks at this many queued jobs per scheduling pass (slurm.conf default_queue_depth):
# a job submitted behind as many would not start now, and a GPU chosen for it now may hold
# other jobs by the time it starts, so the GPU is left for Slurm to choose then.
QUEUE_DEPTH = 100


@dataclass(slots=True)
class _Resident:
    job: Job
    cls: JobClass
    gpus: int


@dataclass(slots=True)
class _Candidate:
    node: Node
    pos: int
    busy: int                      # GPUs of the node holding any job (packing tie-break)
    gpus: list[Gpu]
    residents: list[list[_Resident]]
    util_pct: float                # summed solo utilisation of the residents of the set
    mem_mib: float                 # largest resident peak memory on one GPU of the set
    extend_s: float = 0.0          # node-on time the job adds (past the node's last job)
    alone: bool = False            # free GPUs only: the job runs alone, held as shards


class _Shares:
    """Per call: the shard weights of the job's class on each kind of GPU. ``tables`` (the
    policy's, kept between calls) holds the weight tables of one history version."""

    def __init__(self, app: str, need_mib: int, s: EacoSettings, history: Mapping[str, float],
                 version: int | None = None, tables: dict | None = None) -> None:
        self.app, self.need_mib, self.s, self.history = app, need_mib, s, history
        self._cache: dict[tuple, int] = {}
        self._tables = tables if version is not None and tables is not None else None
        if self._tables is not None and self._tables.get("version") != (version, s):
            self._tables.clear()
            self._tables["version"] = (version, s)

    def _table(self, g: Gpu, gpus_per_node: int) -> dict[str, int]:
        key = (g.shards_total, g.memory_mib, g.model, gpus_per_node)
        t = self._tables.get(key) if self._tables is not None else None
        if t is None:
            t = share_weights(g.shards_total, g.memory_mib, self.s, self.history, g.model,
                              gpus_per_node)
            if self._tables is not None:
                self._tables[key] = t
        return t

    def weight(self, g: Gpu, gpus_per_node: int) -> int:
        """Shards this job takes on ``g`` (0: it cannot share such a GPU, or its memory
        would not fit under the cap that goes with its shards)."""
        key = (g.shards_total, g.memory_mib, g.model, gpus_per_node)
        w = self._cache.get(key)
        if w is None:
            w = self._table(g, gpus_per_node).get(self.app, 0)
            if w and self.need_mib > memory_cap_mib(g.memory_mib, w, g.shards_total, self.s):
                w = 0
            self._cache[key] = w
        return w


def _residents(gpu: Gpu, jobs: Mapping[str, Job]) -> list[_Resident] | None:
    """The jobs on a shared GPU with their classes; None if one is unknown (cannot predict)."""
    out = []
    for jid in gpu.shard_jobs:
        job = jobs.get(jid)
        cls = known_class(job.app) if job is not None else None
        if cls is None:
            return None
        out.append(_Resident(job, cls, max(1, len(job.uses) or job.gpus)))
    return out


def _gpu_summary(node: Node, jobs: Mapping[str, Job], shared_gpus: dict[int, tuple]) -> tuple:
    """What a node's candidates for any request are built from: its GPUs holding any job, its
    free GPUs (highest index first), and its shared GPUs whose residents are all known, each
    with the residents' summed solo utilisation and peak memory and the residents (most
    utilised first). ``shared_gpus`` (the policy's, kept between calls): per shared GPU view,
    by identity, its entry or None."""
    busy, free, shared = 0, [], []
    for g in node.gpus:
        if g.exclusive_job is not None:
            busy += 1
        elif not g.shard_jobs:
            free.append(g)
        else:
            busy += 1
            hit = shared_gpus.get(id(g))
            if hit is None or hit[0] is not g:
                res = _residents(g, jobs)
                entry = None if res is None else (
                    g, sum(solo_util_pct(r.job.app, r.gpus) for r in res),
                    sum(r.cls.memory_mib for r in res), res)
                hit = shared_gpus[id(g)] = (g, entry)
            if hit[1] is not None:
                shared.append(hit[1])
    free.reverse()
    shared.sort(key=lambda e: (-e[1], e[0].index))
    return busy, tuple(free), tuple(shared)


def claimed_by_queue(cluster: Cluster, now_s: float) -> frozenset[tuple[str, int]]:
    """The free GPUs (node, index) Slurm gives the jobs already queued before a new one can
    start: each waiting one-node job on whole GPUs, not pinned nor held nor deferred, in
    submission order, on the first node with enough free GPUs, lowest index first (Slurm's
    first fit). A job pinned to one of them would wait for it while other GPUs stand idle."""
    if not cluster.pending_at_least(1):
        return frozenset()
    free: dict[str, list[int]] | None = None
    claimed: list[tuple[str, int]] = []
    for job in first_queued(cluster, QUEUE_DEPTH):
        if job.num_nodes != 1 or job.gpus < 1 or job.pinned or "Held" in job.reason \
                or (job.begin_s is not None and job.begin_s > now_s):
            continue
        if free is None:
            free = {n.name: [g.index for g in n.gpus
                             if g.exclusive_job is None and not g.shard_jobs]
                    for n in cluster.nodes if n.available}
        for name, idle in free.items():
            if len(idle) >= job.gpus:
                claimed += [(name, i) for i in idle[:job.gpus]]
                del idle[:job.gpus]
                break
    return frozenset(claimed)


def _joins(entry: tuple, w: int, need_mib: int, s: EacoSettings) -> bool:
    """Whether a job taking ``w`` shards and ``need_mib`` of memory fits on a shared GPU of
    ``_gpu_summary`` by job count, shards and memory (its utilisation is checked apart)."""
    g = entry[0]
    return len(g.shard_jobs) < s.max_jobs_per_gpu and g.shards_used + w <= g.shards_total \
        and entry[2] + need_mib <= g.memory_mib * s.mem_threshold_pct / 100


def _refusal(request: JobRequest, s: EacoSettings, cls: JobClass | None, own_util: float) -> str:
    """Why this job must not share, or "" if it may."""
    if request.allow_share is False:
        return "the job opted out of sharing"
    if "share" in request.opt_out:
        return "the job refused the share action"
    if request.allow_share is None and not s.allow_share:
        return "the site shares GPUs only with jobs that opt in"
    if request.gpus < 1:
        return "the job asks for no GPU"
    if request.num_nodes > 1:
        return "a multi-node job gets whole GPUs"
    if cls is None:
        return (f"workload class {request.app!r} is unknown, so its interference cannot be "
                "predicted")
    if own_util > s.util_threshold_pct:
        return (f"its own utilisation {own_util:.0f}% is over the threshold "
                f"{s.util_threshold_pct:.0f}%")
    return ""


def _node_idle(node: Node, jobs: Mapping[str, Job], busy: int,
               ctx: Context) -> tuple[bool, float | None]:
    """Whether ``node`` is empty, and then the boot it needs first (its GPUs read 0 W when it
    is suspended), else the expected end (start + time limit) of its last job, None when a
    job's end is unknown (the node stays on anyway)."""
    if not busy:
        reading = ctx.readings.gpus.get((node.name, node.gpus[0].index)) \
            if ctx.readings.gpus else None
        return True, node_resume_delay_s() if reading is not None and reading.power_w <= 0 else 0.0
    last = float("-inf")
    for g in node.gpus:
        for jid in ((g.exclusive_job,) if g.exclusive_job else g.shard_jobs):
            job = jobs.get(jid)
            if job is None or job.start_s is None or job.time_limit_s is None:
                return False, None
            last = max(last, job.start_s + job.time_limit_s)
    return False, last


def _extend_s(idle: tuple[bool, float | None], now: float, run_s: float | None) -> float:
    """Node-on time a job of ``run_s`` seconds started now adds to a node (``_node_idle``):
    past the expected end of the node's last job; all of it on an empty node, plus the boot on
    a suspended one. 0 when the job's run time or a resident's end is unknown."""
    empty, at = idle
    if run_s is None or at is None:
        return 0.0
    if empty:
        return run_s + at
    return max(0.0, now + run_s - max(now, at))


def _alone(node: Node, pos: int, busy: int, part: tuple, k: int, extend: float) -> _Candidate:
    """A node's candidate of ``k`` free GPUs (``Eaco._node_part``'s part)."""
    return _Candidate(node, pos, busy, list(part[1][:k]), [[] for _ in range(k)], 0.0, 0.0,
                      extend, alone=True)


def _shared(node: Node, pos: int, busy: int, part: tuple, k: int, extend: float) -> _Candidate:
    """A node's candidate of ``k`` GPUs joining its shared ones (most utilised first), free
    ones filling up."""
    _, free, shared, util, mem = part
    chosen = shared[:k]
    fill = list(free[:k - len(chosen)])
    return _Candidate(node, pos, busy, [e[0] for e in chosen] + fill,
                      [e[3] for e in chosen] + [[] for _ in fill], util, mem, extend)


class Eaco:
    name = NAME
    # EaCO's energy gain includes fewer active nodes: packing lets idle nodes power down. The
    # same slurm.conf power saving as ``slurm-powersave`` (SuspendTime 10 min).
    slurm_settings = POWER_SAVE

    def prefetch(self, request: JobRequest, settings: Mapping[str, Any]) -> tuple[str, ...]:
        s = EacoSettings.from_mapping(settings)
        cls = known_class(request.app)
        refused = _refusal(request, s, cls, cls.util_at(request.gpus) if cls else 0.0)
        return () if refused else ("cluster", "readings")

    def advise(self, request: JobRequest, ctx: Context) -> Placement:
        s = self._settings_of(ctx)
        if s.share_modes == ("shard",):
            return self._advise_sliced(request, ctx)
        placement = self._advise_sliced(request, ctx) if "shard" in s.share_modes else \
            plain_placement(self.name, request, "eaco: exclusive GPUs: time-sliced sharing is "
                            "off (share_modes)")
        cls = known_class(request.app)
        if "mig" not in s.share_modes or cls is None or request.gpus != 1 \
                or _refusal(request, s, cls, cls.util_at(1)) \
                or ctx.cluster.pending_at_least(QUEUE_DEPTH) >= QUEUE_DEPTH:
            return placement
        jobs, now = ctx.cluster.jobs, ctx.now_s

        def extend_of(node: Node, busy: int) -> float:
            return _extend_s(_node_idle(node, jobs, busy, ctx), now, request.time_limit_s)

        return mig_placement(self.name, request, ctx, s, cls, placement,
                             claimed_by_queue(ctx.cluster, now), extend_of)

    def _advise_sliced(self, request: JobRequest, ctx: Context) -> Placement:
        """The time-sliced answer (``share_modes`` "shard"): docs/eaco.md, "Placement"."""
        s = self._settings_of(ctx)
        cls = known_class(request.app)
        own_util = cls.util_at(request.gpus) if cls else 0.0
        why = _refusal(request, s, cls, own_util)
        if why:
            return plain_placement(self.name, request, f"eaco: exclusive GPUs: {why}")
        assert cls is not None
        need_mib = request.memory_per_gpu_mib or cls.memory_mib
        shares = _Shares(request.app, need_mib, s, ctx.history, ctx.history_version,
                         self._weights)
        samples = self._share_kinds(ctx, request)
        if not samples:
            return plain_placement(self.name, request,
                                   "eaco: exclusive GPUs: no GPU of this model offers shards")
        weights = [shares.weight(*x) for x in samples]
        if not any(weights):
            return plain_placement(
                self.name, request,
                f"eaco: exclusive GPUs: class {request.app!r} shares a GPU with no class within "
                f"the limits (slowdown {s.max_slowdown:g}, utilisation "
                f"{s.util_threshold_pct:g}%, memory {s.mem_threshold_pct:g}%)")
        queued = ctx.cluster.pending_at_least(QUEUE_DEPTH)
        summary = f"{queued}+ jobs queued, it would not start now"
        if queued < QUEUE_DEPTH:
            options = self._options(request, ctx, s, shares, own_util)
            rejected: dict[str, int] = {}
            tried = 0
            claimed = claimed_by_queue(ctx.cluster, ctx.now_s)
            for cand in options:
                if claimed and any((cand.node.name, g.index) in claimed
                                   for g, res in zip(cand.gpus, cand.residents) if not res):
                    rejected["with a free GPU a job queued earlier takes first"] = \
                        rejected.get("with a free GPU a job queued earlier takes first", 0) + 1
                    continue
                if cand.alone:
                    reasons = ", ".join(f"{n} {r}" for r, n in sorted(rejected.items()))
                    return self._alone(request, s, shares, cand, tried, reasons)
                tried += 1
                placement = self._try(request, ctx, s, cls, shares, need_mib, own_util, cand,
                                      rejected)
                if placement is not None:
                    return placement
            reasons = ", ".join(f"{n} {r}" for r, n in sorted(rejected.items()))
            summary = f"{tried} candidate GPU sets" + (f" ({reasons})" if reasons else "")
        if request.gpus == 1 and request.deadline_s is None:
            return self._any_gpu(request, s, [g for g, _ in samples], weights, summary)
        return plain_placement(self.name, request,
                               f"eaco: exclusive GPUs: nothing to share with now ({summary}); "
                               "Slurm places it")

    def __init__(self) -> None:
        # work saved between calls on unchanged node views; never changes a decision
        self._memo = ObserveMemo()
        self._nodes: dict[str, NodeMemo] = {}
        self._index: dict[int, KindIndex] = {}   # per request kind: nodes offering a candidate
        self._offers = OfferIndex()     # the kinds of GPU that offer shards
        self._weights: dict = {}        # share weight tables of one history version
        self._kinds: dict[tuple, int] = {}   # request kinds seen (app, GPUs, memory, settings)
        self._gpu_kinds: dict[tuple, int] = {}   # node kinds seen (shards, memory, model, GPUs)
        self._kind_gpus: dict[int, tuple[Gpu, int]] = {}   # per node kind: a GPU, the GPU count
        self._shared_gpus: dict[int, tuple] = {}   # per shared GPU view: ``_gpu_summary``'s entry
        self._settings: tuple = (None, None)     # the settings mapping last seen, parsed

    def reconcile(self, ctx: Context) -> tuple[Action, ...]:
        s = self._settings_of(ctx)
        acts = observe(ctx, s, self.name, self._memo)
        unpin = stale_pins(ctx.cluster, ctx.now_s, s, self.name, {a.job_id for a in acts})
        return acts + unpin if unpin else acts

    def _settings_of(self, ctx: Context) -> EacoSettings:
        """The settings, parsed again only when the caller hands in another mapping (the
        simulator hands in the same read-only one on every call)."""
        if self._settings[0] is not ctx.settings:
            self._settings = (ctx.settings, EacoSettings.from_mapping(ctx.settings))
        return self._settings[1]

    # ------------------------------------------------------------------ placements
    def _alone(self, request: JobRequest, s: EacoSettings, shares: _Shares, cand: _Candidate,
               tried: int, reasons: str) -> Placement:
        node, gpus = cand.node, cand.gpus
        w = shares.weight(gpus[0], len(node.gpus))
        cap = memory_cap_mib(gpus[0].memory_mib, w, gpus[0].shards_total, s)
        where = ",".join(f"{node.name}:{g.index}" for g in gpus)
        summary = f"{tried} candidate GPU sets before it" + (f" ({reasons})" if reasons else "")
        return Placement(
            policy=self.name, gpus=request.gpus, nodes=(node.name,),
            gpu_indexes=tuple(g.index for g in gpus), share_mode=s.share_gres, shards=w,
            gpu_memory_cap_mib=cap,
            why=((f"eaco: alone on free GPU {where}: keeps its node on "
                  f"{cand.extend_s:,.0f} s longer, the least of the GPU sets left ({summary})"),
                 (f"held as {w} of {gpus[0].shards_total} {s.share_gres}s so a compatible job "
                  f"can join; GPU memory capped at {cap} MiB")),
            predicted=MappingProxyType({"slowdown": 1.0, "energy_saving_pct": 0.0,
                                        "node_extend_s": cand.extend_s}))

    def _any_gpu(self, request: JobRequest, s: EacoSettings, samples: list[Gpu],
                 weights: list[int], summary: str) -> Placement:
        """Shards on whichever GPU Slurm finds first. On a cluster of several kinds of GPU
        (models, memory) the weight is the largest of the job's weights on them, so that jobs
        whose shards fit on one GPU fit under that GPU's own weights too, and the memory cap
        the least of theirs; a kind the job cannot share, or kinds of other shard counts,
        leave it whole GPUs."""
        if not all(weights) or len({g.shards_total for g in samples}) > 1:
            models = ", ".join(dict.fromkeys(g.model for g in samples))
            return plain_placement(
                self.name, request,
                f"eaco: exclusive GPUs: nothing to share with now ({summary}); shards on "
                f"whichever GPU Slurm finds may land on a kind of GPU ({models}) where its "
                f"class does not share")
        w = max(weights)
        sample = samples[0]
        cap = min(memory_cap_mib(g.memory_mib, w, g.shards_total, s) for g in samples)
        return Placement(
            policy=self.name, gpus=request.gpus, share_mode=s.share_gres, shards=w,
            gpu_memory_cap_mib=cap,
            why=((f"eaco: {w} of {sample.shards_total} {s.share_gres}s on whichever GPU Slurm "
                 f"finds first when it starts ({summary})"),
                 (f"the {s.share_gres} counts per class are chosen so that any jobs that fit on "
                 f"one GPU are predicted to stay under slowdown {s.max_slowdown:g}; GPU "
                 f"memory capped at {cap} MiB")),
            predicted=MappingProxyType({"slowdown_limit": s.max_slowdown}))

    # ------------------------------------------------------------------ candidates
    def _share_kinds(self, ctx: Context, request: JobRequest) -> list[tuple[Gpu, int]]:
        """Of each kind of GPU (shards, memory, model, its node's GPU count) that offers
        shards, of the model asked for, the first in node order and its node's GPU count:
        the share weights are per kind (``_Shares``)."""
        want = request.gpu_model.lower()
        cluster = ctx.cluster
        kinds = self._offers.refresh(cluster.nodes, cluster.nodes_log, cluster.nodes_version)
        return [k for k in kinds if k[0].model.lower() == want] if want else kinds

    def _options(self, request: JobRequest, ctx: Context, s: EacoSettings, shares: _Shares,
                 own_util: float) -> Iterator[_Candidate]:
        """Candidate GPU sets with residents and free GPU sets, in the order they are tried:
        the least node-on time the job adds first (``_extend_s``), then sharing before running
        alone, the most utilised set, the busiest node. Built one at a time as tried. Of empty
        nodes only the first of each boot delay (``index``): the others would come after
        it, and the first free GPU set tried is taken."""
        k = request.gpus
        want_model = request.gpu_model.lower()
        jobs = ctx.cluster.jobs
        now = ctx.now_s
        run_s = request.time_limit_s
        memo = self._nodes
        # what the candidate parts depend on besides the node and the weight, as a small number
        # (the settings may be a new object on every call: hashed once here, not once per node)
        kind = self._kinds.setdefault((request.app, k, want_model, shares.need_mib, own_util, s),
                                      len(self._kinds))
        weights: dict[int, int] = {}    # the job's share weight per kind of node

        def weight_of(kind_id: int) -> int:
            w = weights.get(kind_id)
            if w is None:
                g, gpn = self._kind_gpus[kind_id]
                w = weights[kind_id] = shares.weight(g, gpn) if g.shards_total > 0 and (
                    not want_model or g.model.lower() == want_model) else 0
            return w

        def build(pos: int, node: Node) -> tuple[NodeMemo, tuple | None, bool]:
            m = memo.get(node.name)
            if m is None or m.node is not node:
                m = memo[node.name] = NodeMemo(node, self._gpu_kinds)
                if m.kind is not None:
                    self._kind_gpus.setdefault(m.kind_id, (m.kind, len(node.gpus)))
            if not m.available or len(node.gpus) < k:
                return m, None, True
            if m.kind is not None:
                w = weight_of(m.kind_id)
                part = m.parts.get((kind, w), False)
                if part is False:
                    part = m.parts[(kind, w)] = self._node_part(node, m, k, want_model, jobs,
                                                                s, shares, own_util, w)
            else:
                part = self._node_part(node, m, k, want_model, jobs, s, shares, own_util, None)
            if part is not None and m.idle is None:
                m.idle = _node_idle(node, jobs, part[0], ctx)
            return m, part, m.kind is not None

        index = self._index.get(kind)
        if index is None:
            index = self._index[kind] = KindIndex(k)
        cluster = ctx.cluster
        index.refresh(cluster.nodes, weight_of, build, cluster.nodes_log, cluster.nodes_version)
        busy_at = index.busy
        # The order is (node-on time added, alone, utilisation, busiest first, position). The
        # sets that add none come first, in the index's ranking (which does not move with the
        # clock): a node holding jobs adds none when its last job ends after this one would
        # (or its end, or this job's run time, is unknown). They are yielded as they are
        # reached (a call mostly ends among them); the others are ordered only if it goes on.
        until = None if run_s is None else now + run_s

        def adds(m: NodeMemo) -> float:
            """``_extend_s`` of a node holding jobs (not empty), inline: it runs for every one;
            at most 0 where it adds none."""
            at = m.idle[1]
            return 0.0 if until is None or at is None else until - (at if at > now else now)

        for util, nbusy, pos in index.shared:
            m, part = busy_at[pos]
            if adds(m) <= 0.0:
                yield _shared(m.node, pos, -nbusy, part, k, 0.0)
        for nbusy, pos in index.alone:
            m, part = busy_at[pos]
            if adds(m) <= 0.0:
                yield _alone(m.node, pos, -nbusy, part, k, 0.0)
        later: list[tuple] = []
        for pos, m, part in sorted(index.firsts(), key=lambda e: e[0]):
            extend = _extend_s(m.idle, now, run_s)
            if extend == 0.0:
                yield _alone(m.node, pos, 0, part, k, 0.0)
            else:
                later.append((extend, True, 0.0, 0, pos, m.node, part))
        if until is not None:
            for pos, (m, part) in busy_at.items():
                extend = adds(m)
                if extend <= 0.0:
                    continue            # yielded above
                busy, free, shared = part[0], part[1], part[2]
                if len(free) >= k:
                    later.append((extend, True, 0.0, -busy, pos, m.node, part))
                if shared and len(shared) + len(free) >= k:
                    later.append((extend, False, part[3], -busy, pos, m.node, part))
        # (alone, pos) is unique: the sort never compares a node or a part
        later.sort()
        for extend, alone, _, nbusy, pos, node, part in later:
            yield (_alone if alone else _shared)(node, pos, -nbusy, part, k, extend)

    def _node_part(self, node: Node, m: NodeMemo, k: int, want_model: str,
                   jobs: Mapping[str, Job], s: EacoSettings, shares: _Shares, own_util: float,
                   w_all: int | None) -> tuple | None:
        """Of one node: GPUs holding any job, its free GPUs that may take the job (highest
        index first), its shared GPUs the job may join (most utilised first), and of the shared
        ones the job would take their summed utilisation and largest memory; None when the node
        offers no candidate. ``w_all``: the job's share weight on every GPU of the node when
        they are all of one kind (0: they do not take the job), else None."""
        if w_all == 0:
            return None
        if m.gpus is None:
            if len(self._shared_gpus) > 65536:     # views end; a bound keeps it small
                self._shared_gpus.clear()
            m.gpus = _gpu_summary(node, jobs, self._shared_gpus)
        busy, free_all, shared_all = m.gpus
        limit = s.util_threshold_pct
        # filters keep the summary's orders: free GPUs highest index first (the ones Slurm's
        # first fit, lowest index first, reaches last: a job queued earlier without a pin
        # would otherwise take the pinned GPU before it), shared ones most utilised first
        if w_all is not None:
            free = free_all
            shared = [e for e in shared_all
                      if e[1] + own_util <= limit and _joins(e, w_all, shares.need_mib, s)]
        else:
            gpn = len(node.gpus)

            def weight(g: Gpu) -> int:
                if g.shards_total <= 0 or (want_model and g.model.lower() != want_model):
                    return 0
                return shares.weight(g, gpn)

            free = tuple(g for g in free_all if weight(g))
            shared = [e for e in shared_all if e[1] + own_util <= limit and (w := weight(e[0]))
                      and _joins(e, w, shares.need_mib, s)]
        if len(free) < k and not shared:
            return None
        chosen = shared[:k]
        util = sum(e[1] for e in chosen)
        mem = max((e[2] for e in chosen), default=0.0)
        return busy, free, shared, util, mem

    # ------------------------------------------------------------------ one candidate
    def _try(self, request: JobRequest, ctx: Context, s: EacoSettings, cls: JobClass,
             shares: _Shares, need_mib: int, own_util: float, cand: _Candidate,
             rejected: dict[str, int]) -> Placement | None:
        def reject(why: str) -> None:
            rejected[why] = rejected.get(why, 0) + 1

        history, now = ctx.history, ctx.now_s
        own_hist = history.get(f"job:{request.repeat_key}:slowdown") if request.repeat_key else None
        per_gpu, new_slow, source = [], 1.0, "alone"
        res_new: dict[str, float] = {}
        res_old: dict[str, float] = {}
        res_of: dict[str, _Resident] = {}
        for res in cand.residents:
            apps = [r.job.app for r in res]
            old, _ = group_slowdowns(apps, history, model=cand.gpus[0].model,
                                     share_gres=s.share_gres)
            new, src = group_slowdowns(apps + [request.app], history,
                                       [None] * len(apps) + [own_hist],
                                       model=cand.gpus[0].model, share_gres=s.share_gres)
            if res:
                source = src
            new_slow = max(new_slow, new[-1])
            for r, o, n in zip(res, old, new):
                jid = r.job.job_id
                res_of[jid] = r
                res_old[jid] = max(res_old.get(jid, 1.0), o)
                res_new[jid] = max(res_new.get(jid, 1.0), n)
            per_gpu.append(([r.cls.dynamic_power_at(r.gpus, cand.gpus[0].model) for r in res],
                            old, new[:-1]))
        worst_res = max(res_new.values(), default=1.0)
        if max(new_slow, worst_res) > s.max_slowdown:
            return reject("over max slowdown")
        # deadlines: the new job, then every resident, must finish in time sharing
        solo = solo_time_s(request.repeat_key, request.time_limit_s, history)
        deadline = request.deadline_s
        if deadline is None and solo is not None:
            deadline = request.submit_s + s.deadline_factor * solo
        finish = now + solo * new_slow if solo is not None else None
        if finish is not None and deadline is not None and finish > deadline:
            return reject("would miss its deadline")
        slack = float("inf")
        progress = ctx.readings.progress
        for jid, r in res_of.items():
            r_solo = solo_time_s(repeat_key_of(r.job), r.job.time_limit_s, history)
            if r_solo is None:
                continue
            left = remaining_solo_s(r.job, progress.get(jid), r_solo, now, res_old[jid])
            end = now + left * res_new[jid]
            slack = min(slack, deadline_of(r.job, r_solo, s.deadline_factor) - end)
        if slack < 0:
            return reject("would make a resident miss its deadline")
        model = cand.gpus[0].model
        static_w = node_base_power_w() / max(1, len(cand.node.gpus))
        gain = objective(per_gpu, cls.dynamic_power_at(request.gpus, model), new_slow,
                         static_w, s.alpha, model)
        if gain.cost >= 1.0:
            return reject("not worth it (cost >= 1)")
        w = shares.weight(cand.gpus[0], len(cand.node.gpus))
        cap = memory_cap_mib(cand.gpus[0].memory_mib, w, cand.gpus[0].shards_total, s)
        where = ",".join(f"{cand.node.name}:{g.index}" for g in cand.gpus)
        with_ = ", ".join(f"{r.job.job_id} ({r.job.app})" for r in res_of.values())
        saving = 100 * (1 - gain.energy_ratio)
        predicted = {"slowdown": new_slow, "resident_slowdown_max": worst_res,
                     "energy_ratio": gain.energy_ratio, "energy_saving_pct": saving,
                     "time_ratio": gain.time_ratio, "cost": gain.cost,
                     "util_pct": cand.util_pct + own_util, "mem_mib": cand.mem_mib + need_mib}
        if finish is not None:
            predicted["finish_s"] = finish
        if deadline is not None:
            predicted["deadline_s"] = deadline
        if slack != float("inf"):
            predicted["resident_slack_s"] = slack
        return Placement(
            policy=self.name, gpus=request.gpus, nodes=(cand.node.name,),
            gpu_indexes=tuple(g.index for g in cand.gpus), share_mode=s.share_gres,
            shards=w, gpu_memory_cap_mib=cap,
            why=(f"eaco: share GPU {where} with {with_}",
                 (f"predicted slowdown {new_slow:.3f} for this job, at most {worst_res:.3f} for "
                 f"the residents (from {source}; limit {s.max_slowdown:g})"),
                 (f"predicted energy per epoch {saving:.0f}% below an exclusive GPU; objective "
                 f"{gain.cost:.3f} < 1 (alpha {s.alpha:g}); GPU memory capped at {cap} MiB")),
            predicted=MappingProxyType(predicted))
