"""EaCO's MIG mode (``share_modes`` with ``"mig"``): a one-GPU job may take a MIG instance of an
A100, H100 or H200 beside the jobs in the GPU's other instances, or alone on a free GPU that
goes into MIG mode so that others can take its other slices (docs/eaco.md, "MIG").

A GPU is either time-sliced or in MIG mode (``Gpu.mig_profiles``), never both, and a GPU
holding a whole-GPU job is not in MIG mode. The job's instance is the smallest profile of the
GPU's model in which its predicted slowdown stays within ``max_slowdown`` and whose memory,
filled to ``mem_threshold_pct``, holds its peak (``physics.mig.smallest_profile``); it joins a
GPU whose instances leave room for it (``physics.mig.layout_valid``). Instances do not slow each
other, so the residents keep their rates; the GPU draws idle power plus each job's dynamic
power times its rate, and the objective is EaCO's (``predict.objective``) with each job's
slowdown ``1 / rate``.

Candidates are tried in EaCO's order (the node-on time the job adds, then joining before
running alone, the fullest GPU, the busiest node); a join must meet the new job's deadline and
score below 1, a GPU put into MIG mode alone only the deadline (its slowdown, within the limit,
buys room for later jobs). The first that passes is weighed against the time-sliced
placement: the one that adds less node-on time wins, a tie goes to the lower objective (a
time-sliced job alone on a free GPU scores 1), and a tie there to MIG (no interference).
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType

from ...errors import ConfigError
from ...model import Gpu, JobRequest, Node, Placement
from ...physics import JobClass, node_base_power_w
from ...physics.mig import (COMPUTE_SLICES, MigProfile, layout_valid, mig_profile, mig_rate,
                            smallest_profile, supports_mig)
from ...record import replace
from ..base import Context
from .predict import Gain, known_class, objective, solo_time_s, solo_util_pct
from .settings import EacoSettings

# (node, how many of its GPUs hold a job) -> the node-on time the job adds there (decide's rule)
ExtendOf = Callable[[Node, int], float]


def mig_placement(name: str, request: JobRequest, ctx: Context, s: EacoSettings,
                  cls: JobClass, sliced: Placement, claimed: frozenset[tuple[str, int]],
                  extend_of: ExtendOf) -> Placement:
    """``sliced`` (EaCO's time-sliced answer), or a MIG instance where one does better."""
    got = _first_passing(name, request, ctx, s, cls, claimed, extend_of)
    if got is None:
        return sliced
    mig, key = got
    theirs = _sliced_key(sliced, ctx, extend_of)
    if theirs is not None and key > theirs:
        return sliced
    if sliced.why:
        mig = replace(mig, why=mig.why + (f"instead of the time-sliced answer: {sliced.why[0]}",))
    return mig


def _sliced_key(p: Placement, ctx: Context, extend_of: ExtendOf) -> tuple | None:
    """(node-on time added, alone, objective) of a time-sliced placement on a GPU it chose;
    None when Slurm chooses the GPU (any MIG instance now does better)."""
    if not p.nodes or p.share_mode == "exclusive":
        return None
    if "node_extend_s" in p.predicted:          # alone on a free GPU, held as shards
        return (p.predicted["node_extend_s"], True, 1.0)
    node = next((n for n in ctx.cluster.nodes if n.name == p.nodes[0]), None)
    if node is None or "cost" not in p.predicted:
        return None
    return (extend_of(node, _busy(node)), False, p.predicted["cost"])


def _busy(node: Node) -> int:
    return sum(1 for g in node.gpus if not g.is_free)


def _taken(g: Gpu) -> list[MigProfile] | None:
    """The instances of a GPU in MIG mode; None when it is not wholly in MIG mode or a profile
    is not its model's."""
    if not g.mig_profiles or "" in g.mig_profiles or g.exclusive_job is not None:
        return None
    try:
        return [mig_profile(g.model, n) for n in g.mig_profiles]
    except ConfigError:
        return None


def _candidates(request: JobRequest, ctx: Context, s: EacoSettings, util_pct: float,
                need_mib: float, claimed: frozenset[tuple[str, int]],
                extend_of: ExtendOf) -> list[tuple]:
    """Every GPU in MIG mode with room for the job and, per node, its free GPU of the highest
    index (the last Slurm's first fit reaches), each as a sort key ending in (GPU, profile,
    instances taken, node)."""
    want = request.gpu_model.lower()
    profiles: dict[str, MigProfile | None] = {}
    out = []
    for pos, node in enumerate(ctx.cluster.nodes):
        if not node.available:
            continue
        found = []
        free = None
        for g in node.gpus:
            if want and g.model.lower() != want:
                continue
            if g.model not in profiles:
                p = smallest_profile(g.model, util_pct, need_mib, s.max_slowdown,
                                     s.mem_threshold_pct) if supports_mig(g.model) else None
                profiles[g.model] = p if p is not None and p.compute_slices < COMPUTE_SLICES \
                    else None
            p = profiles[g.model]
            if p is None:
                continue
            if g.is_free:
                if (node.name, g.index) not in claimed:
                    free = (g, p)
                continue
            taken = _taken(g)
            if taken is not None and layout_valid(taken + [p]):
                found.append((g, p, taken))
        if free is not None:
            found.append((*free, []))
        if not found:
            continue
        busy = _busy(node)
        extend = extend_of(node, busy)
        for g, p, taken in found:
            used = sum(t.compute_slices for t in taken)
            out.append((extend, not taken, -used, -busy, pos, g.index, g, p, taken, node))
    out.sort(key=lambda c: c[:6])
    return out


def _first_passing(name: str, request: JobRequest, ctx: Context, s: EacoSettings,
                   cls: JobClass, claimed: frozenset[tuple[str, int]],
                   extend_of: ExtendOf) -> tuple[Placement, tuple] | None:
    """The first MIG candidate within the limits, as a placement with its key (node-on time
    added, alone, objective); None if none is."""
    util = solo_util_pct(request.app, 1)
    need_mib = request.memory_per_gpu_mib or cls.memory_mib
    history, now = ctx.history, ctx.now_s
    solo = solo_time_s(request.repeat_key, request.time_limit_s, history)
    deadline = request.deadline_s
    if deadline is None and solo is not None:
        deadline = request.submit_s + s.deadline_factor * solo
    jobs = ctx.cluster.jobs
    for extend, alone, _, _, _, _, g, p, taken, node in _candidates(
            request, ctx, s, util, need_mib, claimed, extend_of):
        rate = mig_rate(p, util)
        slow = 1.0 / rate
        finish = now + solo * slow if solo is not None else None
        if finish is not None and deadline is not None and finish > deadline:
            continue
        residents = [jobs.get(j) for j in g.shard_jobs]
        classes = [known_class(r.app) if r is not None else None for r in residents]
        if None in classes:
            continue
        model = g.model
        dyn = [c.dynamic_power_at(1, model) for c in classes]      # type: ignore[union-attr]
        old = [1.0 / mig_rate(t, solo_util_pct(r.app, 1)) for t, r in zip(taken, residents)]
        static_w = node_base_power_w() / max(1, len(node.gpus))
        gain = objective([(dyn, old, old)], cls.dynamic_power_at(1, model), slow, static_w,
                         s.alpha, model)
        if not alone and gain.cost >= 1.0:
            continue
        return _placement(name, s, node, g, p, taken, residents, util, rate, gain, extend,
                          finish, deadline), (extend, alone, gain.cost)
    return None


def _placement(name: str, s: EacoSettings, node: Node, g: Gpu, p: MigProfile,
               taken: list[MigProfile], residents: list, util: float, rate: float, gain: Gain,
               extend: float, finish: float | None, deadline: float | None) -> Placement:
    where = f"{node.name}:{g.index}"
    used = sum(t.compute_slices for t in taken) + p.compute_slices
    saving = 100 * (1 - gain.energy_ratio)
    if taken:
        with_ = ", ".join(f"{r.job_id} ({r.app} {t.name})" for r, t in zip(residents, taken))
        head = f"eaco: MIG instance {p.name} of GPU {where} beside {with_}"
        tail = (f"predicted energy per epoch {saving:.0f}% below an exclusive GPU; objective "
                f"{gain.cost:.3f} < 1 (alpha {s.alpha:g}); {used} of {COMPUTE_SLICES} compute "
                "slices taken")
    else:
        head = (f"eaco: MIG instance {p.name} alone on free GPU {where}: the GPU goes into MIG "
                f"mode, its other {COMPUTE_SLICES - p.compute_slices} compute slices left for "
                f"other jobs; keeps its node on {extend:,.0f} s longer")
        tail = f"objective {gain.cost:.3f} alone (alpha {s.alpha:g})"
    predicted = {"slowdown": 1.0 / rate, "mig_rate": rate, "energy_ratio": gain.energy_ratio,
                 "energy_saving_pct": saving, "time_ratio": gain.time_ratio, "cost": gain.cost,
                 "node_extend_s": extend, "mig_slices_used": float(used),
                 "instance_mem_mib": float(p.memory_mib)}
    if finish is not None:
        predicted["finish_s"] = finish
    if deadline is not None:
        predicted["deadline_s"] = deadline
    return Placement(
        policy=name, gpus=1, nodes=(node.name,), gpu_indexes=(g.index,), share_mode="mig",
        mig_profile=p.name,
        why=(head,
             (f"predicted slowdown {1.0 / rate:.3f}: the instance gives {p.share:.2f} of the "
              f"GPU to a job of {util:.0f}% solo utilisation (limit {s.max_slowdown:g}); "
              "instances do not slow each other"),
             tail),
        predicted=MappingProxyType(predicted))
