"""``wattctl carbon budget``: the carbon budget of the period against what jobs spent.

Spent: the ``co2_g`` of every ``job_energy`` point (one per job and node, written by the
epilog, docs/energy.md) in the budget period, per Slurm account. Forecast to the end of the
period: spent plus the cluster's GPU power now (the newest ``gpu`` readings) times the
forecast intensity over the rest of the period (the intensity now where no forecast covers
it). Jobs deferred or capped: ``reconcile_action`` points of kind ``defer`` or ``power_cap``
in the period. The budget is GreenFlow's (``[greenflow]`` in the site config).

A report over the telemetry adapter and greenflow's own history keys: it lives here, not in
``telemetry/``, so that no adapter imports a policy.

Pacing: what the ``greenflow`` policy paced on at its last hourly reconcile pass in the
period, from the reconciler's history (``reconcile.state_dir``): the carbon owed by the queued
and running jobs (counted as spent: docs/greenflow.md) at the share of their time limits that
jobs use, and the carbon weight that followed,
for the cluster and each account with a budget. None, with a warning, before its first pass.
"""

from __future__ import annotations

from types import MappingProxyType

from ..errors import WattError
from ..history import read_view
from ..policy.greenflow.observe import (FLOOR_G, LAST_S, LIMIT_USE, OWED_G, PERIOD_START_S,
                                        WEIGHT, account_weight_key)
from ..policy.greenflow.settings import parse_settings
from ..telemetry.carbon import planning_provider
from ..telemetry.influx import InfluxClient, quote_str
from ..telemetry.lineproto import time_ns
from ..telemetry.readers import latest_gpu_readings, read_carbon

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping

JOULES_PER_KWH = 3.6e6


def _kg(grams: float | None) -> float | None:
    return None if grams is None else round(grams / 1000.0, 6)


def spent_by_account(client: InfluxClient, cluster: str, start_s: float, end_s: float
                     ) -> dict[str, float]:
    """Account -> grams CO2e of the ``job_energy`` points in ``(start_s, end_s]``."""
    where = f"time > {time_ns(start_s)} AND time <= {time_ns(end_s)}"
    if cluster:
        where += f' AND "cluster" = {quote_str(cluster)}'
    out: dict[str, float] = {}
    for s in client.query(f'SELECT sum("co2_g") AS co2_g FROM "job_energy" WHERE {where} '
                          'GROUP BY "account"'):
        for row in s.rows():
            if isinstance(row.get("co2_g"), (int, float)):
                out[s.tags.get("account", "")] = float(row["co2_g"])
    return out


def period_spent_g(client: InfluxClient, cluster: str, start_s: float, now_s: float
                   ) -> tuple[float, float, Mapping[str, float]]:
    """What jobs spent in the period from ``start_s`` to ``now_s``, as
    ``Readings.period_spent_g``: (``start_s``, grams CO2e, account -> grams CO2e)."""
    by_account = spent_by_account(client, cluster, start_s, now_s)
    return start_s, sum(by_account.values()), MappingProxyType(by_account)


def rest_of_period_g(power_w: float, now_g: float | None,
                     forecast: tuple[tuple[float, float], ...], now_s: float, end_s: float
                     ) -> float:
    """Grams CO2e of ``power_w`` held from ``now_s`` to ``end_s`` under the forecast (each
    point holds until the next; the intensity now before the first one)."""
    grams, t, g = 0.0, now_s, now_g
    for point_s, point_g in forecast:
        if point_s >= end_s:
            break
        if point_s > t and g is not None:
            grams += power_w * (point_s - t) * g / JOULES_PER_KWH
        if point_s > t:
            t = point_s
        g = point_g
    if g is not None and end_s > t:
        grams += power_w * (end_s - t) * g / JOULES_PER_KWH
    return grams


def pacing(history, accounts, start_s: float) -> dict[str, Any] | None:
    """What greenflow paced on at its last pass in the period starting ``start_s`` (None: no
    pass in it): when, the carbon owed then (kg), the share of their time limits it priced jobs
    at (``Cluster.limit_use``), the least the period can end with (``floor_kg``: spent plus the
    owed work at its most efficient in the cleanest hour forecast), the cluster's carbon weight
    and each of ``accounts``' (0: JCT alone counts, 1: carbon alone)."""
    last_s = history.get(LAST_S)
    if last_s is None or history.get(PERIOD_START_S) != start_s:
        return None
    owed_g = history.get(OWED_G)
    return {"at_s": last_s, "owed_kg": _kg(owed_g), "limit_use": history.get(LIMIT_USE),
            "floor_kg": _kg(history.get(FLOOR_G)),
            "weight": history.get(WEIGHT),
            "accounts": {a: history.get(account_weight_key(a)) for a in sorted(accounts)}}


def _moves(client: InfluxClient, cluster: str, start_s: float, now_s: float
           ) -> dict[str, list[dict[str, Any]]]:
    where = (f"time > {time_ns(start_s)} AND time <= {time_ns(now_s)} AND "
             "(\"kind\" = 'defer' OR \"kind\" = 'power_cap')")
    if cluster:
        where += f' AND "cluster" = {quote_str(cluster)}'
    out: dict[str, list[dict[str, Any]]] = {"deferred": [], "capped": []}
    for s in client.query(f'SELECT "job_id", "why", "status" FROM "reconcile_action" '
                          f'WHERE {where} GROUP BY "kind"'):
        key = "deferred" if s.tags.get("kind") == "defer" else "capped"
        out[key] += [{"job_id": r.get("job_id"), "at_s": r.get("time"), "why": r.get("why"),
                      "status": r.get("status")} for r in s.rows()]
    return out


def budget_report(cfg: Any, now_s: float) -> dict[str, Any]:
    """Budget, spent and forecast of the period holding ``now_s``, for the cluster and each
    account, and the jobs deferred or capped in it. A source that cannot be read leaves its
    figure out with a warning; InfluxDB down raises."""
    settings = parse_settings(cfg.section("greenflow"))
    client = InfluxClient.from_config(cfg)
    cluster = cfg["cluster.name"]
    start_s, end_s = settings.period_of(now_s)
    _, spent_g, spent = period_spent_g(client, cluster, start_s, now_s)
    warnings: list[str] = []
    forecast_g = None
    try:
        power_w = sum(r.power_w for r in latest_gpu_readings(
            client, now_s, cluster=cluster, warnings=warnings).values())
        now_g, points = read_carbon(planning_provider(cfg, client), now_s, end_s - now_s,
                                    cfg["carbon.max_age_s"], warnings)
        if now_g is None and not points:
            warnings.append("forecast not made: no carbon intensity now or ahead")
        else:
            forecast_g = spent_g + rest_of_period_g(power_w, now_g, points, now_s, end_s)
    except WattError as exc:
        warnings.append(f"forecast not made: {exc}")
    try:
        moves = _moves(client, cluster, start_s, now_s)
    except WattError as exc:
        moves = {"deferred": [], "capped": []}
        warnings.append(f"deferred and capped jobs not read: {exc}")
    accounts = sorted(set(spent) | set(settings.accounts_g))
    paced = pacing(read_view(cfg["reconcile.state_dir"]), settings.accounts_g, start_s)
    if paced is None:
        warnings.append("no greenflow pass in this period yet: pacing unknown (is wattctl "
                        "reconcile running with policy = \"greenflow\"?)")
    return {
        "cluster": cluster, "zone": cfg["carbon.zone"], "now_s": now_s,
        "period": {"start_s": start_s, "end_s": end_s},
        "budget_kg": _kg(settings.budget_g), "spent_kg": _kg(spent_g),
        "forecast_kg": _kg(forecast_g),
        "accounts": [{"account": a, "budget_kg": _kg(settings.accounts_g.get(a)),
                      "spent_kg": _kg(spent.get(a, 0.0))} for a in accounts],
        "pacing": paced, **moves, "warnings": warnings,
    }
