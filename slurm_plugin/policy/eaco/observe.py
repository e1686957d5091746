"""EaCO's early-stage observation (``Eaco.reconcile``): check predictions against the first
epochs a group of jobs runs together on one GPU, and undo a co-location that went wrong.

The first pass that sees a group (the set of jobs on one shared GPU) records each job's step
and time as marks in the history (``mark:<group>:<job>:step|t``, an ``observe`` action). Once
every job has run ``observe_epochs`` epochs past its mark, the group is judged: a job's
observed slowdown is its samples/s alone (history ``job:<key>:solo_rate``) over its latest
samples/s, or without that seed its time per step since the mark over its time per step alone
(run time alone / total steps). Each group then yields at most one ``observe`` action (history
keys ``pair:<apps>``, ``pair:<apps>:predicted``, ``job:<key>:slowdown`` and the marker
``seen:<group>`` that keeps later passes from recording it twice) and at most one
``move_exclusive`` action, for the most slowed job whose slowdown exceeds ``max_slowdown`` or
whose deadline only an exclusive GPU still meets (this one only while such a GPU is free). No
job gets two actions in one pass.

Repeated passes (``ObserveMemo``, kept by the policy object between its calls): a node's shared
GPUs are found again only when the node's view changed, and a *quiet* group (judged, nothing to
do, every job under 99% of the limit and its deadline out of an exclusive GPU's reach) is not
judged again while its members and the history figures its verdict rests on (``_verdict_keys``)
stay the same: its observed slowdown cannot move then, so neither can its verdict. When the
caller logs which history keys each version changed (``Context.history_log``), a node whose
quiet groups read none of the keys changed since the last pass is not looked at again; when
it also logs which node views changed (``Cluster.nodes_log``), a pass visits only those nodes,
the stale ones and those left with groups to judge, so its cost does not grow with the cluster.
A *waiting* group (its observation not started because a job does not step yet, or a job not
yet ``observe_epochs`` epochs past its mark; nothing to do) is checked on that one job's
progress alone while the history figures its verdict rests on stay the same: the verdict is
still "wait" as long as that job still waits. A judged group with nothing to do that is not
quiet is judged again on its jobs' progress alone while those figures stay the same (its
prediction and marks cannot have moved). Both stand when only the group's and pairs'
slowdowns changed and the prediction they make is still under the limit. The memo only
skips work; a pass without it decides the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from ...model import Action, Gpu, Job, Node, Progress
from ..base import Context
from ..queue import id_order
from .predict import (
    deadline_of,
    group_key,
    group_slowdowns,
    known_class,
    remaining_solo_s,
    repeat_key_of,
    solo_time_s,
)
from .settings import EacoSettings

# Observed slowdowns within this fraction of max_slowdown are not acted on: a step count read
# at one instant is accurate to about one step in a hundred.
TOLERANCE = 0.02


def _marks(gid: str, jid: str, history) -> tuple[float, float] | None:
    step, t = history.get(f"mark:{gid}:{jid}:step"), history.get(f"mark:{gid}:{jid}:t")
    return None if step is None or t is None else (float(step), float(t))


def _observed(job: Job, p: Progress, mark: tuple[float, float], s: EacoSettings,
              history) -> float | None:
    """The slowdown ``job`` shows since its group was first seen (``mark``: its step and the
    time then), or None if it has not run ``observe_epochs`` epochs since."""
    together = p.step - mark[0]
    if p.steps_per_epoch <= 0 or together < s.observe_epochs * p.steps_per_epoch \
            or p.taken_s <= mark[1]:
        return None
    key = repeat_key_of(job)
    solo_rate = history.get(f"job:{key}:solo_rate")
    if solo_rate and p.samples_per_s > 0:
        return max(1.0, float(solo_rate) / p.samples_per_s)
    solo_s = solo_time_s(key, job.time_limit_s, history)
    if solo_s is None or p.total_steps <= 0:
        return None
    return max(1.0, (p.taken_s - mark[1]) / together / (solo_s / p.total_steps))


@dataclass(slots=True)
class _Group:
    gid: str                              # its job ids, sorted, joined by "+"
    where: str                            # node:index
    members: list[tuple[Job, Progress]]
    predicted: tuple[float, ...]          # predicted slowdown of each member


def _group(node: str, gpu: Gpu, ctx: Context, s: EacoSettings) -> _Group | None:
    """The running jobs sharing ``gpu`` with their progress; None if one lacks either."""
    jobs, progress = ctx.cluster.jobs, ctx.readings.progress
    members: list[tuple[Job, Progress]] = []
    for jid in gpu.shard_jobs:
        job = jobs.get(jid)
        p = progress.get(jid)
        if job is None or p is None or not job.running or known_class(job.app) is None:
            return None
        members.append((job, p))
    predicted, _ = group_slowdowns([j.app for j, _ in members], ctx.history, model=gpu.model,
                                   share_gres=s.share_gres)
    return _Group("+".join(sorted(gpu.shard_jobs)), f"{node}:{gpu.index}", members, predicted)


def _free_gpus(ctx: Context, job: Job) -> bool:
    """Whether the job's GPU count is free on one available node now. A move for a deadline
    is worth it only then: requeued behind a queue, the job would lose more than it gains."""
    need = max(1, len({(u.node, u.index) for u in job.uses}) or job.gpus)
    return any(node.available and len(node.free_gpus()) >= need for node in ctx.cluster.nodes)


def _reason(job: Job, p: Progress, obs: float, ctx: Context, s: EacoSettings) -> str:
    """Why a job showing slowdown ``obs`` must leave its shared GPU ("" if it may stay)."""
    if obs > s.max_slowdown * (1 + TOLERANCE):
        return f"over the limit {s.max_slowdown:g}"
    solo_s = solo_time_s(repeat_key_of(job), job.time_limit_s, ctx.history)
    if solo_s is None:
        return ""
    deadline = deadline_of(job, solo_s, s.deadline_factor)
    left = remaining_solo_s(job, p, solo_s, ctx.now_s, obs)
    if ctx.now_s + left * obs > deadline >= ctx.now_s + left and _free_gpus(ctx, job):
        return (f"would finish at {ctx.now_s + left * obs:.0f}, after its deadline "
                f"{deadline:.0f}, which an exclusive GPU still meets")
    return ""


def _move(policy: str, g: _Group, job: Job, observed: float | None, predicted: float,
          reason: str) -> Action:
    others = ", ".join(f"{j.job_id} ({j.app})" for j, _ in g.members if j is not job)
    seen = f"observed slowdown {observed:.3f}, predicted" if observed is not None else \
        "not yet observed; predicted slowdown"
    figures = {"predicted_slowdown": predicted}
    if observed is not None:
        figures["observed_slowdown"] = observed
    uses = {(u.node, u.index) for u in job.uses}
    return Action(kind="move_exclusive", job_id=job.job_id, policy=policy,
                  gpus=max(1, len(uses) or job.gpus),
                  why=(f"eaco: {job.job_id} ({job.app}) on {g.where} with {others}: {seen} "
                       f"{predicted:.3f}: {reason}; requeued on exclusive GPUs, resuming from "
                       "its checkpoint"),
                  predicted=MappingProxyType(figures))


def _judge(g: _Group, ctx: Context, s: EacoSettings, policy: str,
           acted: set[str]) -> list[Action]:
    """The actions for one group (at most one move and one observe, no job twice)."""
    history = ctx.history
    free = [(j, p, pr) for (j, p), pr in zip(g.members, g.predicted) if j.job_id not in acted]
    if not free:
        return []
    # A group that was never admitted (jobs placed at once on one GPU) is undone on its
    # prediction alone, before it wastes an epoch. The prediction rests on the classes the
    # jobs declare, a hint any user can forge: so the job that joined last leaves, never one
    # that was there before it (a forged class cannot move another user's running job).
    worst = max(free, key=lambda x: x[2])
    if worst[2] > s.max_slowdown * (1 + TOLERANCE):
        newest = max(free, key=lambda x: (x[0].start_s or 0.0, id_order(x[0].job_id)))
        return [_move(policy, g, newest[0], None, newest[2],
                      f"the group is over the limit {s.max_slowdown:g} by prediction "
                      f"({worst[0].job_id}: {worst[2]:.3f}); the job that joined last leaves")]
    marks = [_marks(g.gid, j.job_id, history) for j, _ in g.members]
    if any(m is None for m in marks):
        if any(p.step <= 0 for _, p in g.members):
            return []        # a job not yet stepping (starting, or its node booting)
        figures: dict[str, float] = {}
        for (job, p), m in zip(g.members, marks):
            if m is None:
                figures[f"mark:{g.gid}:{job.job_id}:step"] = float(p.step)
                figures[f"mark:{g.gid}:{job.job_id}:t"] = p.taken_s
        return [Action(kind="observe", job_id=free[0][0].job_id, policy=policy,
                       why=f"eaco: group {g.gid} on {g.where} first seen: observation starts",
                       predicted=MappingProxyType(figures))]
    observed = []
    for (job, p), m in zip(g.members, marks):
        obs = _observed(job, p, m, s, history)
        if obs is None:
            return []
        observed.append(obs)
    out: list[Action] = []
    bad = [(obs, j, pr, _reason(j, p, obs, ctx, s))
           for (j, p), pr, obs in zip(g.members, g.predicted, observed) if j.job_id not in acted]
    bad = [b for b in bad if b[3]]
    mover = None
    if bad:
        obs, mover, pred, reason = max(bad, key=lambda b: (b[0], b[1].start_s or 0.0,
                                                      id_order(b[1].job_id)))
        out.append(_move(policy, g, mover, obs, pred, reason))
    marker = f"seen:{g.gid}"
    target = next((j for j, _, _ in free if j is not mover), None)
    if marker in history or target is None:
        return out
    key = group_key([j.app for j, _ in g.members])
    figures = {key: max(observed), f"{key}:predicted": max(g.predicted), marker: 1.0}
    for (job, _), obs in zip(g.members, observed):
        figures[f"job:{repeat_key_of(job)}:slowdown"] = obs
    detail = ", ".join(f"{j.job_id} ({j.app}) {obs:.3f} vs predicted {pr:.3f}"
                       for (j, _), obs, pr in zip(g.members, observed, g.predicted))
    out.append(Action(kind="observe", job_id=target.job_id, policy=policy,
                      why=f"eaco: observed on {g.where} after {s.observe_epochs} epoch(s) "
                          f"together: {detail}",
                      predicted=MappingProxyType(figures)))
    return out


@dataclass(slots=True)
class _Wait:
    """A group judged "wait" with no job acted on: the job it waits on, whether for its first
    step (``mark`` None) or for ``observe_epochs`` epochs past ``mark``, its jobs' apps in
    the GPU's order, and the settings, history version, keys and values the verdict rests
    on (``_verdict_keys``)."""
    job_id: str
    mark: tuple[float, float] | None
    apps: tuple[str, ...]
    s: EacoSettings
    version: int | None
    keys: tuple[str, ...]
    values: tuple


def _waits_on(g: _Group, ctx: Context, s: EacoSettings) -> _Wait | None:
    """After a verdict of nothing to do: the job the group waits on, else None (judged)."""
    history = ctx.history
    if f"seen:{g.gid}" in history:
        return None             # judged before: its marks are behind it
    marks = [_marks(g.gid, j.job_id, history) for j, _ in g.members]
    found = None
    if any(m is None for m in marks):
        found = next(((j.job_id, None) for j, p in g.members if p.step <= 0), None)
    else:
        found = next(((j.job_id, m) for (j, p), m in zip(g.members, marks)
                      if _observed(j, p, m, s, history) is None), None)
    if found is None:
        return None
    keys = _verdict_keys(g)
    return _Wait(found[0], found[1], tuple(j.app for j, _ in g.members), s,
                 ctx.history_version, keys, tuple(map(history.get, keys)))


def _still_waiting(w: _Wait, gpu: Gpu, ctx: Context, s: EacoSettings, acted: set[str]) -> bool:
    """Whether a group's verdict is "wait" again, from its ``_Wait`` alone: same settings, no
    job of it acted on in this pass, the figures its verdict reads unchanged
    (``_same_figures``), and the job it
    waits on still not stepping or not yet ``observe_epochs`` epochs past its mark."""
    if (w.s is not s and w.s != s) or not acted.isdisjoint(gpu.shard_jobs):
        return False
    if not _same_figures(w, ctx, s, gpu.model):
        return False
    history = ctx.history
    p = ctx.readings.progress.get(w.job_id)
    job = ctx.cluster.jobs.get(w.job_id)
    if p is None or job is None:
        return False
    if w.mark is None:
        return p.step <= 0
    return _observed(job, p, w.mark, s, history) is None


@dataclass(slots=True)
class _Judged:
    """A judged group with nothing to do that is not quiet (a job near the limit or late): its
    jobs' marks in the GPU's order, and the settings, history version, keys and values the
    verdict rests on. Its verdict moves with progress alone: it is worked out again from
    these and the jobs' progress, without the prediction (the history is the same)."""
    marks: tuple[tuple[str, tuple[float, float]], ...]
    apps: tuple[str, ...]
    s: EacoSettings
    version: int | None
    keys: tuple[str, ...]
    values: tuple


def _judged(g: _Group, ctx: Context, s: EacoSettings) -> _Judged | None:
    """After a verdict of nothing to do on a group judged before and not quiet: its
    ``_Judged``, else None (a job without a mark or an observed slowdown)."""
    history = ctx.history
    if f"seen:{g.gid}" not in history:
        return None
    marks = []
    for job, p in g.members:
        m = _marks(g.gid, job.job_id, history)
        if m is None or _observed(job, p, m, s, history) is None:
            return None
        marks.append((job.job_id, m))
    keys = _verdict_keys(g)
    return _Judged(tuple(marks), tuple(j.app for j, _ in g.members), s, ctx.history_version,
                   keys, tuple(map(history.get, keys)))


def _still_judged(jd: _Judged, gpu: Gpu, ctx: Context, s: EacoSettings, acted: set[str]) -> bool:
    """Whether a judged group again has nothing to do and is not quiet, from its ``_Judged``
    and its jobs' progress: same settings, no job of it acted on in this pass, the figures its
    verdict reads unchanged (``_same_figures``), every job running with an observed slowdown, none with a reason
    to move (``_reason``), one not calm (``_calm``). False: judge it in full."""
    if (jd.s is not s and jd.s != s) or not acted.isdisjoint(gpu.shard_jobs):
        return False
    if not _same_figures(jd, ctx, s, gpu.model):
        return False
    history = ctx.history
    jobs, progress = ctx.cluster.jobs, ctx.readings.progress
    calm = True
    for jid, mark in jd.marks:
        job = jobs.get(jid)
        p = progress.get(jid)
        if job is None or p is None or not job.running:
            return False
        obs = _observed(job, p, mark, s, history)
        if obs is None or _reason(job, p, obs, ctx, s):
            return False
        calm = calm and _calm(job, p, obs, ctx, s)
    return not calm


class ObserveMemo:
    """What one pass learnt that the next may reuse (see the module docstring): per node, its
    view, the history version then, its shared GPUs still to judge and all of them; per quiet
    group, the history keys and values its verdict rests on; per such key, the nodes whose
    quiet groups read it; per waiting group, what it waits on (``_Wait``); per judged group
    that is not quiet, what its verdict rests on (``_Judged``); the history and
    node versions of the last pass, each node's place in the cluster then, and the nodes left
    with GPUs to judge."""

    __slots__ = ("nodes", "quiet", "readers", "waiting", "judged", "version", "nodes_version",
                 "places", "active")

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[Node, int | None, tuple[Gpu, ...], tuple[Gpu, ...]]] = {}
        self.quiet: dict[str, tuple[tuple[str, ...], tuple]] = {}
        self.readers: dict[str, set[str]] = {}
        self.waiting: dict[str, _Wait] = {}
        self.judged: dict[str, _Judged] = {}
        self.version: int | None = None
        self.nodes_version: int | None = None
        self.places: dict[str, int] = {}
        self.active: set[str] = set()


def _to_visit(ctx: Context, memo: ObserveMemo | None,
              stale: set[str] | None) -> list[Node] | None:
    """The nodes a pass must look at, in cluster order, when the node log tells which views
    changed since the memo's pass: those, the ``stale`` ones and those left with GPUs to judge
    (every other one would be passed over). None when that is unknown: look at every node."""
    cluster = ctx.cluster
    log, now_v = cluster.nodes_log, cluster.nodes_version
    if memo is None or stale is None or log is None or now_v is None \
            or memo.nodes_version is None or now_v < memo.nodes_version \
            or len(memo.places) != len(cluster.nodes):
        return None
    names = stale | memo.active
    for v in range(memo.nodes_version + 1, now_v + 1):
        changed = log.get(v)
        if changed is None:
            return None
        names.update(changed)
    nodes = cluster.nodes
    out = []
    for pos in sorted(memo.places.get(name, -1) for name in names):
        if pos < 0 or nodes[pos].name not in names:
            return None         # a node the memo has not placed, or the order changed
        out.append(nodes[pos])
    return out


def _stale_nodes(ctx: Context, memo: ObserveMemo | None) -> set[str] | None:
    """Nodes whose quiet groups read a history key changed since the memo's pass (from
    ``Context.history_log``); None when that is unknown."""
    log, now_v = ctx.history_log, ctx.history_version
    if memo is None or log is None or now_v is None or memo.version is None \
            or now_v < memo.version:
        return None
    stale: set[str] = set()
    for v in range(memo.version + 1, now_v + 1):
        keys = log.get(v)
        if keys is None:
            return None
        for k in keys:
            nodes = memo.readers.get(k)
            if nodes:
                stale |= nodes
    return stale


def _verdict_keys(g: _Group) -> tuple[str, ...]:
    """The history keys a group's verdict reads: group and pair slowdowns (first, the
    prediction's ``_prediction_keys``), its marker and marks, each job's solo figures (not
    its own observed slowdown: only ``advise`` reads that)."""
    apps = [j.app for j, _ in g.members]
    keys = [group_key(apps)]
    keys += [group_key((a, b)) for i, a in enumerate(apps) for b in apps[i + 1:]]
    keys.append(f"seen:{g.gid}")
    for job, _ in g.members:
        key = repeat_key_of(job)
        keys += [f"job:{key}:solo_rate", f"job:{key}:solo_s",
                 f"mark:{g.gid}:{job.job_id}:step", f"mark:{g.gid}:{job.job_id}:t"]
    return tuple(keys)


def _prediction_keys(jobs: int) -> int:
    """How many of a group's ``_verdict_keys`` its prediction reads: the group's and pairs'."""
    return 1 + jobs * (jobs - 1) // 2


def _same_figures(entry: _Wait | _Judged, ctx: Context, s: EacoSettings, model: str) -> bool:
    """Whether the figures a waiting or judged group's verdict reads are as ``entry`` holds,
    or differ only in the group's and pairs' slowdowns and its prediction (on a GPU of
    ``model``) is still under the limit (the prediction is all they feed before the verdict);
    then ``entry`` takes them."""
    if entry.version is not None and entry.version == ctx.history_version:
        return True
    history = ctx.history
    values = tuple(map(history.get, entry.keys))
    if values != entry.values:
        n = _prediction_keys(len(entry.apps))
        if values[n:] != entry.values[n:]:
            return False
        predicted, _ = group_slowdowns(entry.apps, history, model=model,
                                       share_gres=s.share_gres)
        if max(predicted) > s.max_slowdown * (1 + TOLERANCE):
            return False
        entry.values = values
    entry.version = ctx.history_version
    return True


def _quiet(g: _Group, ctx: Context, s: EacoSettings) -> bool:
    """Judged, nothing to do, and nothing but the history or the members could change that:
    every job well under the limit and its deadline out of an exclusive GPU's reach."""
    history = ctx.history
    if f"seen:{g.gid}" not in history:
        return False
    for (job, p), m in zip(g.members, (_marks(g.gid, j.job_id, history) for j, _ in g.members)):
        obs = _observed(job, p, m, s, history) if m is not None else None
        if obs is None or not _calm(job, p, obs, ctx, s):
            return False
    return True


def _calm(job: Job, p: Progress, obs: float, ctx: Context, s: EacoSettings) -> bool:
    """A judged job showing slowdown ``obs`` is well under the limit and its deadline out of
    an exclusive GPU's reach (late sharing: a free GPU later could make it move)."""
    if obs > 0.99 * s.max_slowdown:
        return False
    solo_s = solo_time_s(repeat_key_of(job), job.time_limit_s, ctx.history)
    if solo_s is not None:
        left = remaining_solo_s(job, p, solo_s, ctx.now_s, obs)
        if ctx.now_s + left * obs > deadline_of(job, solo_s, s.deadline_factor):
            return False
    return True


def _still_true(hit: tuple, node: Node, version: int | None, stale: set[str] | None) -> bool:
    """Whether a node's memo entry ``hit`` (for this view of ``node``) still holds: the history
    is the same version, or every pass since logged no key its quiet groups read (a pass that
    found the node stale, or could not tell, wrote a new entry)."""
    return version is not None and (hit[1] == version
                                    or (stale is not None and node.name not in stale))


def _to_judge(node: Node, ctx: Context, memo: ObserveMemo | None,
              stale: set[str] | None) -> tuple[Gpu, ...]:
    """The GPUs of ``node`` with two or more time-sliced jobs (MIG instances do not slow each
    other), less quiet groups: from the memo while the node's view is the same object and the
    history the same version, or changed only in keys its quiet groups do not read
    (``stale``: the nodes whose do)."""
    hit = memo.nodes.get(node.name) if memo is not None else None
    if hit is not None and hit[0] is node:
        if _still_true(hit, node, ctx.history_version, stale):
            return hit[2]
        shared = hit[3]
    else:
        shared = tuple(g for g in node.gpus if len(g.shard_jobs) >= 2 and not g.mig_profiles)
    out = []
    history = ctx.history
    for gpu in shared:
        if memo is not None:
            q = memo.quiet.get("+".join(sorted(gpu.shard_jobs)))
            if q is not None and tuple(map(history.get, q[0])) == q[1]:
                continue
        out.append(gpu)
    return tuple(out)


def _remember(memo: ObserveMemo, node: Node, ctx: Context, to_judge: tuple[Gpu, ...]) -> None:
    hit = memo.nodes.get(node.name)
    if hit is not None and hit[0] is node and hit[1] == ctx.history_version and hit[2] == to_judge:
        return
    shared = hit[3] if hit is not None and hit[0] is node else \
        tuple(g for g in node.gpus if len(g.shard_jobs) >= 2 and not g.mig_profiles)
    memo.nodes[node.name] = (node, ctx.history_version, to_judge, shared)


def observe(ctx: Context, s: EacoSettings, policy: str,
            memo: ObserveMemo | None = None) -> tuple[Action, ...]:
    """One pass over every shared GPU (see the module docstring)."""
    actions: list[Action] = []
    acted: set[str] = set()
    history = ctx.history
    stale = _stale_nodes(ctx, memo)
    entries = memo.nodes if memo is not None else {}
    visit = _to_visit(ctx, memo, stale)
    if visit is None and memo is not None:
        memo.places = {node.name: pos for pos, node in enumerate(ctx.cluster.nodes)}
        memo.active = set()
    for node in ctx.cluster.nodes if visit is None else visit:
        hit = entries.get(node.name)
        if hit is not None and not hit[2] and hit[0] is node \
                and _still_true(hit, node, ctx.history_version, stale):
            continue        # nothing to judge there, as the last pass found
        gpus = _to_judge(node, ctx, memo, stale)
        if not gpus:
            if memo is not None:
                _remember(memo, node, ctx, gpus)
                memo.active.discard(node.name)
            continue
        keep = []
        for gpu in gpus:
            if memo is not None:
                gid = "+".join(sorted(gpu.shard_jobs))
                w = memo.waiting.get(gid)
                jd = memo.judged.get(gid) if w is None else None
                if (w is not None and _still_waiting(w, gpu, ctx, s, acted)) or \
                        (jd is not None and _still_judged(jd, gpu, ctx, s, acted)):
                    keep.append(gpu)
                    continue
            g = _group(node.name, gpu, ctx, s)
            if g is None:
                keep.append(gpu)
                continue
            free = acted.isdisjoint(gpu.shard_jobs)
            out = _judge(g, ctx, s, policy, acted)
            for a in out:
                actions.append(a)
                acted.add(a.job_id)
            if memo is not None and not out and _quiet(g, ctx, s):
                keys = _verdict_keys(g)
                memo.quiet[g.gid] = (keys, tuple(history.get(k) for k in keys))
                for k in keys:
                    memo.readers.setdefault(k, set()).add(node.name)
            else:
                keep.append(gpu)
                if memo is not None:
                    w = _waits_on(g, ctx, s) if free and not out else None
                    jd = _judged(g, ctx, s) if free and not out and w is None else None
                    for table, entry in ((memo.waiting, w), (memo.judged, jd)):
                        if entry is not None:
                            table[g.gid] = entry
                        else:
                            table.pop(g.gid, None)
        if memo is not None:
            _remember(memo, node, ctx, tuple(keep))
            if keep:
                memo.active.add(node.name)
            else:
                memo.active.discard(node.name)
    if memo is not None:
        memo.version = ctx.history_version
        memo.nodes_version = ctx.cluster.nodes_version
        for table in (memo.waiting, memo.judged):
            if len(table) > 4096:
                table.clear()
        if len(memo.quiet) > 4096:   # groups end; a bound keeps the memo small
            memo.quiet.clear()
            memo.readers.clear()
            memo.nodes.clear()       # their quiet groups are no longer tracked
            memo.nodes_version = None
    return tuple(actions)
