"""Reconcile action outcomes as InfluxDB points (measurement ``reconcile_action``), for the
Grafana dashboard. Built from ``Outcome.as_dict()`` of a pass (``PassResult.as_dict()["actions"]``)
so nothing here depends on how the pass runs.

``reconcile_action,cluster=..,kind=..,policy=..,status=.. job_id="..",gpus=Ni,why="..",
detail="..",count=1i <t>``. Points of one pass get times one microsecond apart: two outcomes
with the same tags at the same time would otherwise be stored as one (InfluxDB keeps the
last point of a series per timestamp).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from .lineproto import Point

MEASUREMENT = "reconcile_action"


def outcome_points(outcomes: Iterable[Mapping[str, Any]], cluster: str, now_s: float
                   ) -> list[Point]:
    out = []
    for i, o in enumerate(outcomes):
        out.append(Point(MEASUREMENT,
                         {"cluster": cluster, "kind": str(o["kind"]),
                          "policy": str(o.get("policy") or ""), "status": str(o["status"])},
                         {"job_id": str(o["job_id"]), "gpus": int(o.get("gpus") or 0),
                          "why": str(o.get("why") or ""), "detail": str(o.get("detail") or ""),
                          "count": 1},
                         now_s + i * 1e-6))
    return out
