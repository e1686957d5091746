"""What GreenFlow learns from the cluster: carbon spent against its budget, and the weight of
carbon against JCT that follows from it.

Once an hour (``OBSERVE_S``; carbon intensity is hourly) a reconcile pass takes the cluster's
power (``Readings.cluster_power_w``, else the GPU readings plus ``node_base_power_w`` for every powered node, one
whose GPUs draw power), charges it at the current intensity for the time since the last
measurement, and compares the carbon spent in the budget period with the budget's pro-rata
share by now. The weight is proportional to that deviation:
``w = clip(0.5 + gain * (spent - pro_rata) / budget, 0, 1)``: on pace, carbon and JCT count
equally; a budget overspent by ``0.5 / gain`` of itself makes carbon all that counts, one
underspent as much makes JCT all that counts. No budget: weight 0 (free savings only).
The figures go to the history through ``observe`` actions (the simulator and the live
reconciler keep them), so the policy itself keeps no state.
"""

from __future__ import annotations

from ...model import Readings
from .settings import GreenFlowSettings

OBSERVE_S = 3600.0
LAST_S, SPENT_G, PERIOD_START_S, WEIGHT = ("greenflow.last_s", "greenflow.spent_g",
                                           "greenflow.period_start_s", "greenflow.weight")


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


def weight(settings: GreenFlowSettings, history) -> float:
    if settings.budget_g is None:
        return 0.0
    return history.get(WEIGHT, 0.5)


def observe(settings: GreenFlowSettings, history, readings: Readings, now_s: float,
            node_base_power_w: float) -> dict[str, float] | None:
    """The history update of this pass, or None when the last one is under an hour old."""
    last_s = history.get(LAST_S)
    if last_s is not None and now_s - last_s < OBSERVE_S:
        return None
    start_s, end_s = settings.period_of(now_s)
    spent_g = history.get(SPENT_G, 0.0) if history.get(PERIOD_START_S) == start_s else 0.0
    ci = readings.carbon_g_per_kwh
    if last_s is not None and ci is not None:
        dt = now_s - max(last_s, start_s)
        spent_g += cluster_power_w(readings, node_base_power_w) * max(0.0, dt) / 3.6e6 * ci
    out = {LAST_S: now_s, SPENT_G: spent_g, PERIOD_START_S: start_s}
    if settings.budget_g is not None:
        share = min(1.0, max(0.0, (now_s - start_s) / (end_s - start_s)))
        deviation = (spent_g - settings.budget_g * share) / max(settings.budget_g, 1.0)
        out[WEIGHT] = min(1.0, max(0.0, 0.5 + settings.gain * deviation))
    return out
