"""Readers that turn the InfluxDB measurements into ``model.Readings`` for the policies.

``gpu,cluster=..,node=..,gpu=..`` -> latest ``GpuReading`` per (node, gpu);
``job_progress,job_id=..`` -> latest ``Progress`` per job; carbon from a ``CarbonProvider``.
"""

from __future__ import annotations

from types import MappingProxyType

from ..errors import WattError
from ..model import CARBON_WARNING, GpuReading, Progress, Readings
from .bounds import Rejected, checked
from .influx import InfluxClient, quote_str
from .lineproto import time_ns

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Mapping

    from ..formats.carbon_series import CarbonProvider
    Verify = Callable[[str, float, Mapping[str, Any]], bool]   # (job id, time, fields) -> signed?

GPU = "gpu"
PROGRESS = "job_progress"


def _gpu_reading(tags: dict[str, str], row: dict[str, Any], index: int) -> GpuReading:
    node = tags.get("node", "")
    where = f"{GPU},node={node},gpu={index}"
    return GpuReading(node=node, index=index,
                      power_w=checked(row.get("power_w"), "power_w", where, 0.0),
                      energy_j=checked(row.get("energy_j"), "energy_j", where, 0.0),
                      util_pct=checked(row.get("util_pct"), "util_pct", where, 0.0),
                      mem_used_mib=checked(row.get("mem_used_mib"), "mem_used_mib", where, 0.0),
                      power_limit_w=checked(row.get("power_limit_w"), "power_limit_w", where,
                                            0.0),
                      taken_s=checked(row.get("time"), "time", where))


def latest_gpu_readings(client: InfluxClient, now_s: float, *, max_age_s: float = 300.0,
                        cluster: str = "", warnings: list[str] | None = None
                        ) -> dict[tuple[str, int], GpuReading]:
    """The newest ``gpu`` point of each (node, gpu) seen in the last ``max_age_s``.

    A field missing from that point reads 0.0. A point with a value out of its bounds
    (``bounds``) is left out, with a warning in ``warnings``."""
    where = f"time > {time_ns(now_s - max_age_s)} AND time <= {time_ns(now_s)}"
    if cluster:
        where += f' AND "cluster" = {quote_str(cluster)}'
    out: dict[tuple[str, int], GpuReading] = {}
    for s in client.query(f'SELECT * FROM "{GPU}" WHERE {where} GROUP BY "node", "gpu" '
                          "ORDER BY time DESC LIMIT 1"):
        try:
            index = int(s.tags.get("gpu", ""))
        except ValueError:
            continue        # not a GPU index: someone else's point
        for row in s.rows():
            try:
                reading = _gpu_reading(s.tags, row, index)
            except Rejected as exc:
                _warn(warnings, exc)
                continue
            out[(reading.node, index)] = reading
    return out


def _warn(warnings: list[str] | None, exc: Exception) -> None:
    if warnings is not None:
        warnings.append(f"{exc}; point not used")


def _progress(job_id: str, row: dict[str, Any]) -> Progress:
    where = f"{PROGRESS},job_id={job_id}"
    taken_s = checked(row.get("time"), "time", where)

    def num(key: str) -> float:
        return checked(row.get(key), key, where, 0.0)
    return Progress(job_id=job_id, step=int(num("step")), samples_per_s=num("samples_per_s"),
                    epoch=int(num("epoch")), steps_per_epoch=int(num("steps_per_epoch")),
                    total_steps=int(num("total_steps")), taken_s=taken_s,
                    started_s=checked(row.get("started_s"), "started_s", where, taken_s),
                    batch_size=int(num("batch_size")) or None)


def latest_progress(client: InfluxClient, now_s: float, *, max_age_s: float | None = None,
                    job_ids: Iterable[str] = (), warnings: list[str] | None = None,
                    verify: Verify | None = None) -> dict[str, Progress]:
    """The newest ``job_progress`` point of each job (only ``job_ids`` when given); a point
    with a value out of its bounds, or (with ``verify``) one its job's owner did not sign
    (``progress_key``), is left out with a warning in ``warnings``."""
    clauses = [f"time <= {time_ns(now_s)}"]
    if max_age_s is not None:
        clauses.append(f"time > {time_ns(now_s - max_age_s)}")
    ids = sorted(set(job_ids))
    if ids:
        clauses.append("(" + " OR ".join(f'"job_id" = {quote_str(j)}' for j in ids) + ")")
    out: dict[str, Progress] = {}
    for s in client.query(f'SELECT * FROM "{PROGRESS}" WHERE {" AND ".join(clauses)} '
                          'GROUP BY "job_id" ORDER BY time DESC LIMIT 1'):
        job_id = s.tags.get("job_id", "")
        for row in s.rows():
            try:
                progress = _progress(job_id, row)
            except Rejected as exc:
                _warn(warnings, exc)
                continue
            if verify is not None and not verify(
                    job_id, progress.taken_s, {k: v for k, v in row.items() if k != "time"}):
                _warn(warnings, f"telemetry: {PROGRESS},job_id={job_id}: not signed with the "
                                "job's key (written by someone other than its owner)")
                continue
            out[job_id] = progress
    return out


# A job steps within this long of its Slurm start, or its GPU readings before its first step
# say nothing about it (below).
START_GRACE_S = 600.0


def plausible_progress(progress: Mapping[str, Progress],
                       job_gpus: Mapping[str, Iterable[tuple[str, int]]],
                       gpus: Mapping[tuple[str, int], GpuReading],
                       warnings: list[str] | None = None,
                       idle_pct: float = 1.0,
                       job_start_s: Mapping[str, float] | None = None) -> dict[str, Progress]:
    """Progress that the job's GPUs can have made: a job reporting samples/s while every one
    of its GPUs with a reading is idle (utilisation below ``idle_pct``) is left out.

    Only readings taken since the job's first step (``Progress.started_s``) count: one taken
    while it was still starting is idle and proves nothing. That time is the job's own word,
    so with ``job_start_s`` (its Slurm start) a job claiming a later first step than
    ``START_GRACE_S`` after it is held to that bound."""
    out = {}
    for job_id, p in progress.items():
        since = p.started_s
        if job_start_s is not None and job_id in job_start_s:
            since = min(since, job_start_s[job_id] + START_GRACE_S)
        seen = [r for g in job_gpus.get(job_id, ()) if (r := gpus.get(g)) is not None
                and r.taken_s >= since]
        if p.samples_per_s > 0 and seen and max(r.util_pct for r in seen) < idle_pct:
            _warn(warnings, f"telemetry: {PROGRESS},job_id={job_id}: samples_per_s = "
                            f"{p.samples_per_s:g} while its GPUs are idle "
                            f"({', '.join(f'{r.node}:{r.index}' for r in seen)})")
            continue
        out[job_id] = p
    return out


def read_carbon(carbon: CarbonProvider, now_s: float, horizon_s: float, max_age_s: float,
                warnings: list[str]) -> tuple[float | None, tuple[tuple[float, float], ...]]:
    """(the intensity now, the forecast points to ``now_s + horizon_s``), each value checked;
    nothing, with one warning, where the newest stored point is older than ``max_age_s``
    (0: no limit)."""
    from ..formats.carbon_series import is_stale
    where = f"{CARBON_WARNING}{carbon.zone}"
    now_g = carbon.intensity_at(now_s)
    if now_g is not None and is_stale(carbon, now_s, max_age_s):
        warnings.append(f"telemetry: {where}: no point in the last {max_age_s / 3600:g} h "
                        "(carbon.max_age_s): the data is stale, so carbon is not planned "
                        "with; import the zone's recent intensities (wattctl carbon import)")
        return None, ()
    if now_g is not None:
        try:
            now_g = checked(now_g, "gco2_per_kwh", f"{where} at {now_s:.0f}")
        except Rejected as exc:
            _warn(warnings, exc)
            now_g = None
    forecast = []
    for t, g in carbon.forecast(now_s, now_s + horizon_s) or ():
        try:
            forecast.append((checked(t, "time", where), checked(g, "gco2_per_kwh",
                                                                f"{where} at {t}")))
        except Rejected as exc:
            _warn(warnings, exc)
    warnings.extend(getattr(carbon, "warnings", ()))
    return now_g, tuple(forecast)


def read_readings(client: InfluxClient, now_s: float, *, carbon: CarbonProvider | None = None,
                  cluster: str = "", job_ids: Iterable[str] = (),
                  gpu_max_age_s: float = 300.0, progress_max_age_s: float = 7 * 86400.0,
                  forecast_horizon_s: float = 48 * 3600.0, carbon_max_age_s: float = 0.0,
                  verify: Verify | None = None,
                  job_gpus: Mapping[str, Iterable[tuple[str, int]]] | None = None,
                  job_start_s: Mapping[str, float] | None = None) -> Readings:
    """Everything a policy may use at ``now_s``, in one frozen ``Readings``.

    Progress is read for ``job_ids`` when given, else for every job seen in
    ``progress_max_age_s``; the carbon forecast covers ``forecast_horizon_s``, and carbon
    whose newest point is older than ``carbon_max_age_s`` (0: no limit) is left out as stale. ``verify``
    checks who wrote each progress point; with ``job_gpus`` (job -> its (node, GPU)) progress
    of a job whose GPUs are idle is left out (``plausible_progress``, with ``job_start_s``).
    Each source (GPUs, progress, carbon) that fails is left empty and every value out of its
    bounds left out, each with a warning in ``Readings.warnings`` (sources that failed for
    the same reason, such as InfluxDB timing out or being skipped, in one line); only when
    every source fails does this raise."""
    def attempt(what: str, read: Callable[[list[str]], Any], empty: Any) -> Callable[[], Any]:
        def run() -> tuple[Any, list[str], WattError | None, str]:
            said: list[str] = []
            try:
                return read(said), said, None, what
            except WattError as exc:
                return empty, said, exc, what
        return run
    calls = [attempt("GPU readings", lambda w: latest_gpu_readings(
                 client, now_s, max_age_s=gpu_max_age_s, cluster=cluster, warnings=w), {}),
             attempt("job progress", lambda w: latest_progress(    # job_ids may be lazy
                 client, now_s, max_age_s=progress_max_age_s, job_ids=job_ids, warnings=w,
                 verify=verify), {})]
    if carbon is not None:
        calls.append(attempt("carbon intensity", lambda w: read_carbon(
            carbon, now_s, forecast_horizon_s, carbon_max_age_s, w), (None, ())))
    results = _in_parallel(calls)
    warnings = [line for _, said, _, _ in results for line in said]
    errors = [exc for _, _, exc, _ in results if exc is not None]
    failed: dict[str, list[str]] = {}          # reason -> what failed for it
    for _, _, exc, what in results:
        if exc is not None:
            failed.setdefault(str(exc), []).append(what)
    warnings += [f"{', '.join(whats)} not read: {reason}" for reason, whats in failed.items()]
    gpus, progress = results[0][0], results[1][0]
    now_g, forecast = results[2][0] if carbon is not None else (None, ())
    if job_gpus is not None:
        progress = plausible_progress(progress, job_gpus, gpus, warnings,
                                      job_start_s=job_start_s)
    if len(errors) == len(calls):
        raise errors[0]
    return Readings(gpus=MappingProxyType(gpus), progress=MappingProxyType(progress),
                    carbon_g_per_kwh=now_g, carbon_forecast=forecast, taken_s=now_s,
                    warnings=tuple(warnings))


def _in_parallel(calls: list[Callable[[], Any]]) -> list[Any]:
    """Each call's result, in order; the calls run in threads at the same time, and the first
    exception one raised is raised here once all are done."""
    import threading
    results: list[Any] = [None] * len(calls)
    raised: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results[i] = calls[i]()
        except BaseException as exc:     # noqa: BLE001 - re-raised in the caller's thread
            raised.append(exc)
    threads = [threading.Thread(target=run, args=(i,), daemon=True)
               for i in range(1, len(calls))]
    for t in threads:
        t.start()
    run(0)
    for t in threads:
        t.join()
    if raised:
        raise raised[0]
    return results
