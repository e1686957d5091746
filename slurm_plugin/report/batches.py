"""The batch-size history of jobs (``ones``): each advice reconcile wrote (``job_advice``) and
each change of the batch a job reported with its progress (``job_progress.batch_size``).
Both are stored under the job's raw id (``job_names.raw_job_ids`` turns a ``--job`` value into
those)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

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


BUCKET_S = 3600            # reports are summarised per hour; raw ones read where one may change
STATEMENTS_PER_QUERY = 40   # raw reads sent together (a GET's URL stays short)


def _reports(client: InfluxClient, since_s: float, until_s: float,
             where: str) -> dict[str, list[dict[str, Any]]]:
    """Job id -> the progress reports ``batch_events`` needs: a job reports its batch at every
    step, so reading every report of a period moves millions of points. Per hour and job the
    first, last, smallest and largest batch tell where nothing changed (every report equal to
    the one before); the raw reports are read only in the other hours: the job's first, one
    whose batches differ, one starting on another batch than the last one ended. Skipped hours
    hold only repeats, so the events are those of reading every report."""
    summary = client.query(
        f'SELECT first("batch_size"), last("batch_size"), min("batch_size"), '
        f'max("batch_size") FROM "{PROGRESS}" WHERE {where} '
        f'GROUP BY time({BUCKET_S:.0f}s), "job_id" fill(none)')
    hours: list[tuple[str, float]] = []
    for series in summary:
        jid = series.tags.get("job_id", "")
        before = None
        for i, row in enumerate(series.rows()):
            if i == 0 or row["min"] != row["max"] or row["first"] != before:
                hours.append((jid, float(row["time"])))
            before = row["last"]
    out: dict[str, list[dict[str, Any]]] = {}
    for k in range(0, len(hours), STATEMENTS_PER_QUERY):
        statements = []
        for jid, start_s in hours[k:k + STATEMENTS_PER_QUERY]:
            lo, hi = max(since_s, start_s), min(until_s, start_s + BUCKET_S)
            inside = "<=" if hi == until_s else "<"
            statements.append(
                f'SELECT "batch_size" FROM "{PROGRESS}" WHERE time >= {time_ns(lo)} AND '
                f'time {inside} {time_ns(hi)} AND "job_id" = {quote_str(jid)} GROUP BY "job_id"')
        for series in client.query("; ".join(statements)):
            out.setdefault(series.tags.get("job_id", ""), []).extend(series.rows())
    return out


def read_batch_history(client: InfluxClient, since_s: float, until_s: float,
                       job_ids: str | Sequence[str] | None = None
                       ) -> dict[str, list[dict[str, Any]]]:
    """Raw job id -> its batch events in [since_s, until_s] (``batch_events``); only those of
    ``job_ids`` (raw ids) when given."""
    where = f"time >= {time_ns(since_s)} AND time <= {time_ns(until_s)}"
    ids = [j for j in ([job_ids] if isinstance(job_ids, str) else job_ids or ()) if j]
    if ids:
        where += " AND (" + " OR ".join(f'"job_id" = {quote_str(j)}' for j in ids) + ")"
    rows: dict[str, tuple[list, list]] = {}
    for s in client.query(f'SELECT "batch_size", "lr_scale", "why" FROM "{ADVICE}" '
                          f'WHERE {where} GROUP BY "job_id"'):
        rows.setdefault(s.tags.get("job_id", ""), ([], []))[0].extend(s.rows())
    for jid, reported in _reports(client, since_s, until_s, where).items():
        rows.setdefault(jid, ([], []))[1].extend(reported)
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
