"""GreenFlow's sizing of running elastic jobs: a new GPU count through the journaled requeue.

A running job that declared a range (``--wb-elastic=MIN-MAX``; one node) may run on another
count of GPUs for the next ``resize_interval_s`` (``D``). Against going on at its count now
``n``, a count ``g`` (a power of two in its range that its node can hold: its own GPUs plus the
node's free ones) does ``speedup(g) / speedup(n)`` of the work in ``D``; the difference is made
up (or saved) after ``D`` at count ``n``, under the forecast's mean intensity of the day after
``D``. Both the JCT change (that difference, plus ``restart_cost_s``) and the carbon change
are taken relative to the job going on unchanged (what is left of its time limit) and weighed
by the budget's carbon weight ``w``: ``(1 - w) * dJCT + w * dCarbon``; the lowest below zero
is taken. Power over ``D`` counts the GPUs either count holds (``max(n, g)``): a GPU given back
idles powered, and the node's base power is paid either way (the job's share of it by ``n``);
made-up time costs the job's power at ``n``. So a job shrinks only through hours much
dirtier than the day after them, when its GPUs' dynamic power is most of its draw; on nodes
that stay on, giving GPUs back saves little.
A resize is a restart, so it is taken only:

- while no job is queued (a requeued job waits behind the queue: a long job, low in
  greenflow's tiers, would wait for days on a saturated cluster);
- at most once per ``D`` per job (from its last start), at most ``MAX_RESIZES_PER_PASS`` per
  pass.
"""

from __future__ import annotations

from collections.abc import Callable

from ...model import Action, Cluster, Job
from ...physics import job_class
from .settings import DAY_S

MAX_RESIZES_PER_PASS = 8
POWERS = (1, 2, 4, 8, 16, 32, 64)     # the GPU counts greenflow gives a job (as at submit)


def is_resizable(job: Job) -> bool:
    return (job.running and job.num_nodes == 1 and bool(job.app) and job.min_gpus is not None
            and job.max_gpus is not None and job.max_gpus > job.min_gpus)


def free_per_node(cluster: Cluster) -> dict[str, int]:
    """Free GPUs per available node."""
    return {n.name: sum(1 for g in n.gpus if g.is_free) for n in cluster.nodes if n.available}


def size_change(s_n: float, p_n_w: float, s_g: float, p_g_w: float, p_stay_w: float,
                window_s: float, left_s: float, ci_window: float, ci_after: float,
                restart_cost_s: float, w: float) -> float:
    """The weighted change of running ``window_s`` at speed ``s_g`` and power ``p_g_w``
    instead of ``s_n`` and ``p_stay_w`` (both over the GPUs either count holds), the time
    made up after it at power ``p_n_w`` (see the module doc); below zero: better."""
    made_up_s = (s_n - s_g) / s_n * window_s + restart_cost_s   # more time at n after it
    d_jct = made_up_s / left_s
    c_ref = p_n_w * left_s * ci_window
    d_carbon = ((p_g_w - p_stay_w) * window_s * ci_window + p_n_w * made_up_s * ci_after) / c_ref
    return (1 - w) * d_jct + w * d_carbon


def resize(job: Job, now_s: float, free: dict[str, int], gpn: int,
           gpu_w: Callable[[int], float], idle_w: float, base_w: float,
           mean_ci: Callable[[float, float], float], w: float, restart_cost_s: float,
           window_s: float, name: str) -> Action | None:
    """The resize of ``job`` this hour, or None. ``gpu_w(count)``: the job's power per GPU on
    that many GPUs (uncapped); ``idle_w``: a powered idle GPU's; ``base_w``: a node's base
    power; ``mean_ci(a, b)``: the forecast's mean intensity over [a, b]."""
    if job.start_s is None or now_s - job.start_s < window_s:
        return None
    left_s = job.start_s + (job.time_limit_s or 0.0) - now_s
    if left_s <= window_s:
        return None                 # ends (by its limit) within the window: leave it be
    n = len(job.uses) or job.gpus
    room = n + (free.get(job.nodes[0], 0) if job.nodes else 0)
    counts = [g for g in POWERS if job.min_gpus <= g <= min(job.max_gpus, gpn, room) and g != n]
    if not counts:
        return None
    cls = job_class(job.app)
    share_w = base_w * n / gpn                  # its share of the node, paid either way
    s_n, p_n = cls.speedup(n), n * gpu_w(n) + share_w
    ci_window = mean_ci(now_s, now_s + window_s)
    ci_after = mean_ci(now_s + window_s, now_s + window_s + DAY_S)
    best, best_change = n, 0.0
    for g in counts:
        held = max(n, g)
        p_stay = p_n + (held - n) * idle_w
        p_g = g * gpu_w(g) + (held - g) * idle_w + share_w
        change = size_change(s_n, p_n, cls.speedup(g), p_g, p_stay, window_s, left_s,
                             ci_window, ci_after, restart_cost_s, w)
        if change < best_change:
            best, best_change = g, change
    if best == n:
        return None
    return Action(kind="resize", job_id=job.job_id, policy=name, gpus=best,
                  run=job.restart_count,
                  why=f"carbon weight {w:.2f}: {n} -> {best} GPU(s) for {window_s / 3600:g} h "
                      f"(intensity {ci_window:.0f} g/kWh then, {ci_after:.0f} after)")
