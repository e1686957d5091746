"""The batch-size history of jobs (``ones``): each advice reconcile wrote (``job_advice``) and
each change of the batch a job reported with its progress (``job_progress.batch_size``)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..telemetry.influx import InfluxClient, quote_str
from ..telemetry.lineproto import time_ns

ADVICE = "job_advice"
PROGRESS = "job_progress"


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 1 else None


def batch_events(advice: Iterable[Mapping[str, Any]], reported: Iterable[Mapping[str, Any]]
                 ) -> list[dict[str, Any]]:
    """One job's history, oldest first: every advice, and each report whose batch differs
    from the report before it (the first report too: the batch the job started at)."""
    out: list[dict[str, Any]] = []
    for row in advice:
        batch = _int(row.get("batch_size"))
        if batch is None:
            continue
        lr = row.get("lr_scale")
        out.append({"time_s": float(row.get("time", 0.0)), "source": "advice",
                    "batch_size": batch,
                    "lr_scale": float(lr) if isinstance(lr, (int, float)) else 1.0,
                    "why": row.get("why") if isinstance(row.get("why"), str) else ""})
    last = None
    for row in sorted(reported, key=lambda r: float(r.get("time", 0.0))):
        batch = _int(row.get("batch_size"))
        if batch is None or batch == last:
            continue
        last = batch
        out.append({"time_s": float(row.get("time", 0.0)), "source": "job", "batch_size": batch})
    out.sort(key=lambda e: (e["time_s"], e["source"] != "advice"))
    return out


def read_batch_history(client: InfluxClient, since_s: float, until_s: float,
                       job_id: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Job id -> its batch events in [since_s, until_s] (``batch_events``)."""
    where = f"time >= {time_ns(since_s)} AND time <= {time_ns(until_s)}"
    if job_id:
        where += f' AND "job_id" = {quote_str(job_id)}'
    rows: dict[str, tuple[list, list]] = {}
    for s in client.query(f'SELECT "batch_size", "lr_scale", "why" FROM "{ADVICE}" '
                          f'WHERE {where} GROUP BY "job_id"'):
        rows.setdefault(s.tags.get("job_id", ""), ([], []))[0].extend(s.rows())
    for s in client.query(f'SELECT "batch_size" FROM "{PROGRESS}" WHERE {where} '
                          'GROUP BY "job_id"'):
        rows.setdefault(s.tags.get("job_id", ""), ([], []))[1].extend(s.rows())
    out = {}
    for jid, (adv, rep) in rows.items():
        events = batch_events(adv, rep)
        if events:
            out[jid] = events
    return dict(sorted(out.items(), key=lambda kv: (len(kv[0]), kv[0])))


def batch_table(history: Mapping[str, list[dict[str, Any]]], when) -> str:
    """Lines ``JOB  TIME  advice|job  BATCH  [lr xS  why]``."""
    lines = []
    for jid, events in history.items():
        for e in events:
            extra = f"  lr x{e['lr_scale']:.4g}  {e['why']}" if e["source"] == "advice" else ""
            lines.append(f"{jid}  {when(e['time_s'])}  {e['source']:<6}  "
                         f"{e['batch_size']:>7d}{extra}")
    return "\n".join(lines)
