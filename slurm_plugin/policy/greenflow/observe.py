"""What GreenFlow learns from the cluster: carbon spent against its budget, and the weight of
carbon against JCT that follows from it.

Once an hour (``OBSERVE_S``; carbon intensity is hourly) a reconcile pass takes the cluster's
power (``Readings.cluster_power_w``, else the GPU readings plus ``node_base_power_w`` for every
powered node, one whose GPUs draw power), charges it at the current intensity for the time
since the last measurement, and compares the carbon spent in the budget period with the
budget's pro-rata share by now.

The carbon the cluster already owes counts as spent, as a commitment counts against a budget
(``owed_g``): the GPU-seconds left to every queued job and running job, at the power per
allocated GPU measured now and the mean forecast intensity. A job is expected to run the share
of its time limit that recently ended jobs used (``Cluster.limit_use``, GPU-weighted, from
Slurm's accounting: limits are upper bounds, often several times the run): a queued job
``use x limit``, a running one ``use x (limit - elapsed)``, the same share of what is left of
its limit (it never reaches 0 before the limit, as a job past its typical length still runs).
Without that figure, the whole limit. With a budget per day or week only what the cluster's
GPUs can run before the period ends counts (the rest is the next period's); with one budget
for a whole run
(``budget_kg``, whose period holds on past its end), all of it. Without this a budget would not
bind while a backlog builds up: on a saturated cluster the work of a run's last weeks is paid
after its period ends.

The weight is proportional to the deviation:
``w = clip(0.5 + gain * (spent + owed - pro_rata) / budget, 0, 1)``: on pace, carbon and JCT
count equally; a budget overspent by ``0.5 / gain`` of itself makes carbon all that counts, one
underspent as much makes JCT all that counts. No budget: weight 0 (free savings only).
Per-account budgets (``accounts``) are paced the same way, each with its own weight: an account's
carbon is the power of the GPUs its running jobs hold (a GPU shared by several jobs split
evenly between them) plus their share of their nodes' base power, at the same intensity. A
job's weight is the larger of the cluster's and its account's, so an account over its budget
is shifted and capped harder than the rest, and one within it never eases the cluster's.
The first pass with no history at all (a fresh state directory) starts from what jobs
measurably spent in the period so far (``Readings.period_spent_g``, the ``job_energy`` points
``wattctl carbon budget`` counts), for the cluster and each account, rather than from 0. Once
the history holds a pass, it alone counts: at a new period, the power since the period began
(the measurement would count the jobs that ended in that time twice); a measurement of
another period is ignored.
The figures go to the history through ``observe`` actions (the simulator and the live
reconciler keep them), so the policy itself keeps no state.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from functools import lru_cache

from ...errors import ConfigError
from ...model import Cluster, Node, Readings
from ...physics import (cap_settings_w, cap_slowdown, capped_power_w, class_names, job_class,
                        max_power_w)
from ..model_groups import cluster_models, node_model
from .settings import GreenFlowSettings

OBSERVE_S = 3600.0
LAST_S, SPENT_G, PERIOD_START_S, WEIGHT, OWED_G, LIMIT_USE, FLOOR_G = (
    "greenflow.last_s", "greenflow.spent_g", "greenflow.period_start_s", "greenflow.weight",
    "greenflow.owed_g", "greenflow.limit_use", "greenflow.floor_g")
OWED_GPU_W = 250.0      # power per owed GPU while no GPU is allocated to measure it by,
                        # where the GPU model is not known (the V100's top limit)
DEFAULT_LIMIT_S = 3600.0   # a job without a time limit is taken to need this long


def account_spent_key(account: str) -> str:
    return f"{SPENT_G}@{account}"


def account_weight_key(account: str) -> str:
    return f"{WEIGHT}@{account}"


def cluster_power_w(readings: Readings, node_base_power_w: float) -> float:
    """The cluster's power as measured, else the GPU power plus the base power of each node
    with a powered GPU."""
    if readings.cluster_power_w is not None:
        return readings.cluster_power_w
    total, powered = 0.0, set()
    for r in readings.gpus.values():
        if r.power_w > 0:
            total += r.power_w
            powered.add(r.node)
    return total + node_base_power_w * len(powered)


def account_power_w(cluster: Cluster, readings: Readings, node_base_power_w: float,
                    accounts) -> dict[str, float]:
    """The power of each of ``accounts``' running jobs now: their GPUs' measured power (a
    shared GPU split evenly) plus their GPUs' share of the node's base power."""
    out: dict[str, float] = defaultdict(float)
    for node in cluster.nodes:
        per_gpu_base_w = node_base_power_w / max(1, len(node.gpus))
        for gpu in node.gpus:
            holders = [cluster.jobs.get(j) for j in gpu.job_ids]
            holders = [j for j in holders if j is not None and j.account in accounts]
            if not holders:
                continue
            reading = readings.gpus.get(gpu.key)
            power_w = (reading.power_w if reading is not None else 0.0) + per_gpu_base_w
            for job in holders:
                out[job.account] += power_w / len(gpu.job_ids)
    return dict(out)


MIN_LIMIT_USE = 0.05     # a measured share below this is taken as this (a burst of failures)


def owed_share(cluster: Cluster | None) -> float:
    """The share of its time limit a job is expected to run: ``Cluster.limit_use`` within
    [MIN_LIMIT_USE, 1], the whole limit (1) when unknown."""
    use = cluster.limit_use if cluster is not None else None
    return 1.0 if use is None else min(1.0, max(MIN_LIMIT_USE, use))


def owed_gpu_s(cluster: Cluster, now_s: float, accounts=()) -> tuple[float, dict]:
    """(GPU-seconds owed by queued and running jobs, the same per account of ``accounts``): a
    job's GPUs times the share of its time limit jobs use (``Cluster.limit_use``; the whole
    limit when unknown), of what is left of it for a running job."""
    use = owed_share(cluster)
    owed = 0.0
    per_account: dict[str, float] = defaultdict(float)
    for job in cluster.jobs.values():
        gpus = job.gpus * job.num_nodes
        limit_s = job.time_limit_s or DEFAULT_LIMIT_S
        run_s = use * limit_s
        if job.running:
            gpus = len(job.uses) or gpus
            if job.start_s is not None:
                run_s = use * max(0.0, job.start_s + limit_s - now_s)
        elif not job.pending:
            continue
        owed += gpus * run_s
        if job.account in accounts:
            per_account[job.account] += gpus * run_s
    return owed, per_account


def power_per_allocated_gpu_w(cluster: Cluster, readings: Readings,
                              node_base_power_w: float) -> float:
    """The measured power of an allocated GPU, its share of its node's base power included
    (``owed_gpu_w`` while no GPU is allocated or read)."""
    total, count = 0.0, 0
    get = readings.gpus.get
    allocated = _ALLOCATED
    if len(allocated) > 4 * len(cluster.nodes) + 1024:     # nodes gone; a bound keeps it small
        allocated.clear()
    for node in cluster.nodes:
        hit = allocated.get(node.name)
        if hit is None or hit[0] is not node:
            hit = allocated[node.name] = (node, tuple(
                g.index for g in node.gpus if g.exclusive_job or g.shard_jobs))  # g.job_ids
        if not hit[1]:
            continue
        per_gpu_base_w = node_base_power_w / max(1, len(node.gpus))
        for index in hit[1]:
            reading = get((node.name, index))
            if reading is not None:
                total += reading.power_w + per_gpu_base_w
                count += 1
    return total / count if count else owed_gpu_w(cluster)


# per node name: its view last seen (views are frozen: the same object while the node is
# unchanged) and the indexes of its allocated GPUs, so an hourly pass over a large cluster
# reads the GPUs of changed nodes only
_ALLOCATED: dict[str, tuple[Node, tuple[int, ...]]] = {}


def _models(cluster: Cluster | None) -> tuple[str, ...]:
    """The cluster's GPU models (the V100 where none is known)."""
    try:
        return tuple(cluster_models(cluster)) or ("V100",)   # type: ignore[arg-type]
    except (AttributeError, ConfigError):
        return ("V100",)


def owed_gpu_w(cluster: Cluster | None) -> float:
    """Power per owed GPU while none is allocated: the top power limit of the cluster's GPU
    model, on a cluster of several the mean over its GPUs (``OWED_GPU_W`` where a model is not
    known)."""
    try:
        models = cluster_models(cluster)     # type: ignore[arg-type]
        if len(models) == 1:
            return max_power_w(models[0])
        top_w = sum(max_power_w(node_model(n)) * len(n.gpus)
                    for n in cluster.nodes if n.gpus)     # type: ignore[union-attr]
        return top_w / cluster.gpu_count if models else OWED_GPU_W    # type: ignore[union-attr]
    except (AttributeError, ConfigError):
        return OWED_GPU_W


@lru_cache(maxsize=64)
def least_work_power_w(models: tuple[str, ...]) -> float:
    """The least power a GPU of ``models`` draws per second of uncapped work: over the
    catalogued job classes and the model's cap settings, the power at the cap times the
    slowdown it causes (no idle node, no static share: a floor, not an estimate)."""
    return min(capped_power_w(p0, cap, m) * cap_slowdown(p0, cap, m)
               for m in models for p0 in {job_class(c).power_at(1, m) for c in class_names()}
               for cap in (None, *cap_settings_w(m)))


def floor_g(spent_g: float, owed_gpu_s: float, models: tuple[str, ...], ci_now: float | None,
            forecast: tuple[tuple[float, float], ...], now_s: float, end_s: float) -> float:
    """The least carbon the period can end with: what was spent, plus the work owed at
    ``least_work_power_w`` in the cleanest hour forecast before the period ends. A budget
    below it cannot be kept by any schedule."""
    ahead = [v for t, v in forecast if now_s < t <= end_s]
    cleanest = min(([ci_now] if ci_now is not None else []) + ahead, default=0.0)
    return spent_g + owed_gpu_s * least_work_power_w(models) / 3.6e6 * cleanest


def _owed_g(gpu_s: float, power_per_gpu_w: float, ci: float) -> float:
    return gpu_s * power_per_gpu_w / 3.6e6 * ci


def _pace(budget_g: float, spent_g: float, share: float, gain: float) -> float:
    deviation = (spent_g - budget_g * share) / max(budget_g, 1.0)
    return min(1.0, max(0.0, 0.5 + gain * deviation))


def weight(settings: GreenFlowSettings, history, account: str = "") -> float:
    """The carbon weight of a job of ``account``: the cluster's, or its account's budget's
    when that is higher (0 where no budget applies)."""
    w = history.get(WEIGHT, 0.5) if settings.budget_g is not None else 0.0
    if account in settings.accounts_g:
        w = max(w, history.get(account_weight_key(account), 0.5))
    return w


def period_spent(readings: Readings, start_s: float) -> tuple[float, Mapping[str, float]]:
    """(grams CO2e, account -> grams CO2e) that jobs measurably spent in the period starting
    ``start_s`` (``Readings.period_spent_g``); nothing where it was not measured, or was
    measured for another period."""
    measured = readings.period_spent_g
    if measured is None or measured[0] != start_s:
        return 0.0, {}
    return measured[1], measured[2]


def observe(settings: GreenFlowSettings, history, readings: Readings, now_s: float,
            node_base_power_w: float, cluster: Cluster | None = None) -> dict[str, float] | None:
    """The history update of this pass, or None when the last one is under an hour old.
    ``cluster`` (the running jobs and their accounts) is needed for per-account budgets."""
    last_s = history.get(LAST_S)
    if last_s is not None and now_s - last_s < OBSERVE_S:
        return None
    start_s, end_s = settings.period_of(now_s)
    same_period = history.get(PERIOD_START_S) == start_s
    measured_g, measured_account_g = period_spent(readings, start_s)
    if last_s is not None:      # the history's passes count the period; the measurement not
        measured_g, measured_account_g = 0.0, {}
    spent_g = history.get(SPENT_G, 0.0) if same_period else measured_g
    ci = readings.carbon_g_per_kwh
    if last_s is not None and ci is not None:
        dt = now_s - max(last_s, start_s)
        spent_g += cluster_power_w(readings, node_base_power_w) * max(0.0, dt) / 3.6e6 * ci
    out = {LAST_S: now_s, SPENT_G: spent_g, PERIOD_START_S: start_s}
    share = min(1.0, max(0.0, (now_s - start_s) / (end_s - start_s)))
    owed, owed_account = owed_gpu_s(cluster, now_s, settings.accounts_g) \
        if cluster is not None else (0.0, {})
    if settings.period_start_s is None and cluster is not None:
        # a day's or a week's budget: what cannot run before the period ends is the next one's
        room_gpu_s = cluster.gpu_count * max(0.0, end_s - now_s)
        owed = min(owed, room_gpu_s)
        owed_account = {a: min(v, room_gpu_s) for a, v in owed_account.items()}
    power_per_gpu_w = power_per_allocated_gpu_w(cluster, readings, node_base_power_w) \
        if owed else owed_gpu_w(cluster)
    points = readings.carbon_forecast
    mean_ci = sum(v for _, v in points) / len(points) if points else (ci or 0.0)
    if settings.budget_g is not None:
        out[OWED_G] = _owed_g(owed, power_per_gpu_w, mean_ci)
        out[LIMIT_USE] = owed_share(cluster)
        out[WEIGHT] = _pace(settings.budget_g, spent_g + out[OWED_G], share, settings.gain)
        out[FLOOR_G] = floor_g(spent_g, owed, _models(cluster), ci, tuple(points), now_s, end_s)
    if settings.accounts_g:
        power = account_power_w(cluster, readings, node_base_power_w, settings.accounts_g) \
            if cluster is not None else {}
        for account, budget_g in settings.accounts_g.items():
            key = account_spent_key(account)
            spent = history.get(key, 0.0) if same_period else \
                measured_account_g.get(account, 0.0)
            if last_s is not None and ci is not None:
                dt = max(0.0, now_s - max(last_s, start_s))
                spent += power.get(account, 0.0) * dt / 3.6e6 * ci
            out[key] = spent
            owed_g = _owed_g(owed_account.get(account, 0.0), power_per_gpu_w, mean_ci)
            out[account_weight_key(account)] = _pace(budget_g, spent + owed_g, share,
                                                     settings.gain)
    return out
