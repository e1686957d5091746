"""``wattctl calibrate-gpus``: calibrate each GPU model of a partition through Slurm.

One job per GPU model (``plan_jobs``: a free GPU of the model, on the node with the most free
GPUs of it, pinned by its typed GRES), each running ``slurm_plugin.node.calibrate_job``, all
bounded by ``--minutes`` (each job's time limit, and the wait). The results are checked and
fitted (``physics/calibrate_fit.py``); only when every model's measurements are sane is the
site's GPU model file (``physics.site_gpu_models``, ``physics/site_models.py``) written, at
once and atomically; otherwise it is left as it was and the error says why, per model.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ..errors import InputError, WattError
from ..model import Cluster
from ..physics.calibrate_fit import (CalibrationError, CapPoint, Calibration, LoadPoint,
                                     Measurement, fit)
from ..physics.calibrate_pairs import Colocation, PairPoint
from ..physics.site_models import SITE_KEY
from .profile_run import ENDED



@dataclass(frozen=True)
class CalibrationJob:
    model: str
    node: str
    index: int
    sbatch_args: tuple[str, ...]


def plan_jobs(cluster: Cluster, nodes: list[str]) -> list[CalibrationJob]:
    """One job per GPU model of ``nodes``: on a free GPU of the model where there is one, on
    the node with the most free GPUs of it (their readings are the idle power), pinned by the
    GPU's GRES type (an untyped GPU: any GPU of that node)."""
    wanted = set(nodes)
    choices: dict[str, list[tuple[tuple, CalibrationJob]]] = {}
    for node in cluster.nodes:
        if node.name not in wanted or not node.available:
            continue
        for g in node.gpus:
            free_alike = sum(1 for o in node.gpus if o.model == g.model and o.is_free)
            gres = f"gpu:{g.gres_type}:1" if g.gres_type else "gpu:1"
            job = CalibrationJob(g.model, node.name, g.index,
                                 (f"--nodelist={node.name}", f"--gres={gres}"))
            choices.setdefault(g.model, []).append(((not g.is_free, -free_alike, node.name,
                                                     g.index), job))
    return [min(options, key=lambda o: o[0])[1] for _, options in sorted(choices.items())]


def job_script(python: str, work_dir: Path, deadline_s: float) -> str:
    cmd = [python, "-m", "slurm_plugin.node.calibrate_job", "--out", str(work_dir),
           "--deadline", f"{deadline_s:.0f}"]
    return "#!/bin/sh\nexec " + " ".join(shlex.quote(c) for c in cmd) + "\n"


@dataclass
class Waited:
    results: dict[str, dict]       # job id -> result
    failed: dict[str, str]         # job id -> why it has none
    missing: set[str]              # job ids still without a result at the deadline
    elapsed_s: float


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _phase(work_dir: Path, job_id: str) -> str:
    try:
        return (work_dir / f"phase-{job_id}.txt").read_text().strip()
    except OSError:
        return ""


def wait_results(work_dir: Path, jobs: dict[str, CalibrationJob], deadline_s: float,
                 queue: Callable[[], dict[str, str]], progress: Callable[[str], None],
                 poll_s: float = 1.0, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, grace_s: float = 5.0) -> Waited:
    """Wait until each job has written its result, ended without one (``grace_s`` after it
    left the queue or reached an end state: a shared filesystem may show the file late), or
    ``deadline_s`` (epoch) passed. A line of progress each time a job's state or phase
    changes."""
    start = clock()
    results: dict[str, dict] = {}
    failed: dict[str, str] = {}
    ended_at: dict[str, float] = {}
    shown: dict[str, str] = {}
    while True:
        states = queue()
        now = clock()
        for jid, job in jobs.items():
            if jid in results or jid in failed:
                continue
            got = _read_json(work_dir / f"calibration-{jid}.json")
            if got is not None:
                results[jid] = got
                continue
            state = states.get(jid)
            if state is None or state in ENDED:
                ended_at.setdefault(jid, now)
                if now - ended_at[jid] >= grace_s:
                    how = f"ended {state}" if state else "left the queue"
                    failed[jid] = (f"job {jid} {how} without a result (killed, or it could "
                                   f"not start the measurement: see {work_dir}/job-{jid}.out)")
        for jid, job in jobs.items():
            line = ("measured" if jid in results else "failed" if jid in failed else
                    _phase(work_dir, jid) or (states.get(jid) or "submitted").lower())
            if shown.get(jid) != line:
                shown[jid] = line
                progress(f"calibrate-gpus: {job.model} (job {jid} on {job.node}:{job.index}): "
                         f"{line} ({now - start:.0f} s)")
        waiting = set(jobs) - set(results) - set(failed)
        if not waiting or now >= deadline_s:
            return Waited(results, failed, waiting, now - start)
        sleep(min(poll_s, max(0.0, deadline_s - now)))


def measurement(result: dict) -> Measurement:
    """A job's result as the fit takes it; InputError for a result that is not one."""
    try:
        return Measurement(
            idle_w=tuple(float(w) for w in result["idle_w"]),
            loads=tuple(LoadPoint(str(p["label"]), float(p["util_pct"]), float(p["power_w"]),
                                  float(p["power_limit_w"]), float(p["load_scale"]))
                        for p in result["loads"]),
            max_limit_w=float(result["max_limit_w"]), min_limit_w=float(result["min_limit_w"]),
            workload=str(result["workload"]),
            workload_time_s=float(result["workload_time_s"]),
            workload_power_w=float(result["workload_power_w"]),
            caps=tuple(CapPoint(float(c["power_limit_w"]), float(c["time_s"]),
                                float(c["power_w"])) for c in result["caps"]),
            pairs=tuple(PairPoint(str(p["mode"]), str(p["level"]), float(p["util_pct"]),
                                  float(p["solo_time_s"]), float(p["pair_time_s"]))
                        for p in result.get("pair", ())))
    except (KeyError, TypeError, ValueError) as exc:
        raise CalibrationError(f"the job's result is not a calibration ({type(exc).__name__}: "
                               f"{exc})") from None


def colocation(model: str) -> Colocation:
    """What the pair fit keeps of catalogue entry ``model``: its threshold, as the physics
    computes with it, and its shipped table of measured pairs."""
    from ..physics.constants import colocation_constants
    from ..physics.gpu_models import shipped
    return Colocation(colocation_constants(model)["interference_util_threshold"],
                      shipped()["models"][model]["colocation_pairs"]["value"])


def _rounded(value: float | dict) -> float | dict:
    if isinstance(value, dict):
        return {k: [round(x, 4) for x in v] for k, v in value.items()}
    return round(value, 4)


def entry(cal: Calibration, where: str) -> dict:
    """The calibrated constants as a site entry (the catalogue's record format)."""
    out = {}
    for name, c in cal.constants.items():
        rec = {"value": _rounded(c.value), "source": "measured", "how": f"{where}: {c.how}",
               "rows": c.points}
        if c.error is not None:
            rec["fit_error"] = round(c.error, 6)
        out[name] = rec
    return out


def partition_nodes(cfg, partition: str) -> list[str]:
    from ..slurm.cli import slurm
    from ..slurm.parse import expand_hostlist
    text = slurm("sinfo", ["-h", "-p", partition, "-o", "%N"], cfg).stdout.strip()
    names = [n for part in text.split() for n in expand_hostlist(part)]
    if not names:
        raise InputError(f"calibrate-gpus: partition {partition!r} has no node (sinfo -p)")
    return names


def run_calibration(cfg, partition: str, minutes: float, site_file: str, site_origin: str,
                    work_dir: Path | None, python: str, progress: Callable[[str], None]
                    ) -> dict:
    """Calibrate every GPU model of ``partition``; the summary (``--json``). The site file
    (``site_origin``: where it was named) is written only when every model's run is sane;
    else a CalibrationError says why, per model, and the file is left as it was."""
    from ..physics.gpu_models import shipped
    from ..physics.site_models import catalogue_name, site_document, write_site_document
    from ..slurm.cli import slurm
    from ..slurm.snapshot import snapshot

    doc = site_document(site_file, site_origin, shipped())   # named before any job runs
    nodes = partition_nodes(cfg, partition)
    plan = plan_jobs(snapshot(cfg), nodes)
    if not plan:
        raise InputError(f"calibrate-gpus: partition {partition} has no available node with "
                         "GPUs: no GPU to calibrate")
    start_s = time.time()
    deadline_s = start_s + minutes * 60
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    work_dir = (work_dir or Path(site_file).parent / f".calibrate-gpus-{stamp}").resolve()
    work_dir.mkdir(parents=True, exist_ok=True)
    script = job_script(python, work_dir, deadline_s)
    jobs: dict[str, CalibrationJob] = {}
    try:
        for j in plan:
            args = ["--parsable", "--job-name=wattbatch-calibrate-gpus",
                    f"--output={work_dir}/job-%j.out", f"--time={max(1, int(minutes + 0.999))}",
                    f"--partition={partition}", *j.sbatch_args]
            jid = slurm("sbatch", args, cfg, input_text=script).stdout.strip().split(";")[0]
            jobs[jid] = j
        progress(f"calibrate-gpus: {len(jobs)} jobs submitted for "
                 f"{', '.join(j.model for j in plan)}; at most {minutes:g} min; results in "
                 f"{work_dir}")

        def queue() -> dict[str, str]:
            return {jid: job.state for jid, job in snapshot(cfg).jobs.items() if jid in jobs}

        waited = wait_results(work_dir, jobs, deadline_s, queue, progress)
    finally:
        if jobs:
            slurm("scancel", list(jobs), cfg, check=False)
    problems: list[str] = []
    fitted: dict[str, tuple[CalibrationJob, str, dict, Calibration]] = {}
    for jid, job in jobs.items():
        label = f"{job.model} (job {jid} on {job.node}:{job.index})"
        if jid in waited.missing:
            problems.append(f"{label}: no result within {minutes:g} min (the job was "
                            "cancelled)")
            continue
        if jid in waited.failed:
            problems.append(f"{label}: {waited.failed[jid]}")
            continue
        result = waited.results[jid]
        if result.get("error"):
            problems.append(f"{label}: {result['error']}")
            continue
        model = catalogue_name(str(result.get("model", "")), shipped())
        if model is None:
            problems.append(f"{label}: the node names its GPU {result.get('model')!r}, not a "
                            "catalogued model: a calibration adjusts a catalogue entry")
            continue
        try:
            fitted[model] = (job, jid, result, fit(measurement(result), colocation(model)))
        except WattError as exc:          # measurements that are not physical
            problems.append(f"{label}: {exc}")
    if problems:
        raise CalibrationError(f"calibrate-gpus: {site_file} is left as it was: "
                               + "; ".join(problems))
    at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    summary: dict = {"site_file": site_file, "work_dir": str(work_dir), "at": at,
                     "elapsed_s": round(waited.elapsed_s, 1), "models": {}}
    for model, (job, jid, result, cal) in sorted(fitted.items()):
        where = (f"wattctl calibrate-gpus {at} on {result['node']}:{result['gpu_index']} "
                 f"(job {jid}, {result['mode']} GPU)")
        doc["models"][model] = {**doc["models"].get(model, {}), **entry(cal, where)}
        doc["calibrations"][model] = {"at": at, "node": result["node"],
                                      "gpu_index": result["gpu_index"], "job_id": jid,
                                      "mode": result["mode"],
                                      "notes": [*cal.notes, *result.get("notes", [])],
                                      "samples": {**{k: result[k] for k in (
                                          "idle_w", "loads", "max_limit_w", "min_limit_w",
                                          "workload", "workload_time_s", "workload_power_w",
                                          "caps")}, "pair": result.get("pair", [])}}
        shipped_entry = shipped()["models"][model]
        summary["models"][model] = {
            "job_id": jid, "node": result["node"], "gpu_index": result["gpu_index"],
            "mode": result["mode"], "curve_rmse_w": round(cal.curve_rmse_w, 3),
            "cap_rmse": None if cal.cap_rmse is None else round(cal.cap_rmse, 4),
            "notes": [*cal.notes, *result.get("notes", [])],
            "constants": {name: {**_compared(shipped_entry[name]["value"], c.value),
                                 "fit_error": None if c.error is None else round(c.error, 6),
                                 "points": c.points, "how": c.how}
                          for name, c in cal.constants.items()}}
    write_site_document(site_file, doc, shipped())
    return summary


def _compared(shipped_value: float | dict, value: float | dict) -> dict:
    """``shipped`` and ``calibrated`` of a constant; of a table of pairs, the pairs that the
    calibration measured (a pair the shipped table lacks: ``shipped`` None)."""
    got = _rounded(value)
    if not isinstance(got, dict):
        return {"shipped": shipped_value, "calibrated": got}
    keys = [k for k in got if shipped_value.get(k) != got[k]]
    return {"shipped": {k: shipped_value.get(k) for k in keys},
            "calibrated": {k: got[k] for k in keys}}


def _rows(name: str, c: dict) -> list[tuple[str, str, str]]:
    """(constant, shipped, calibrated) to print: one row, or one per measured pair."""
    if not isinstance(c["calibrated"], dict):
        return [(name, f"{c['shipped']:g}", f"{c['calibrated']:g}")]

    def speeds(v: list[float] | None) -> str:
        return "-" if v is None else "/".join(f"{x:g}" for x in dict.fromkeys(v))
    return [(f"pair {k}", speeds(c["shipped"][k]), speeds(v))
            for k, v in c["calibrated"].items()]


def print_summary(summary: dict, echo: Callable[[str], None] = print) -> None:
    echo(f"calibrate-gpus: {len(summary['models'])} GPU models calibrated in "
         f"{summary['elapsed_s']:g} s -> {summary['site_file']} ({SITE_KEY})")
    for model, m in summary["models"].items():
        echo(f"{model} ({m['node']}:{m['gpu_index']}, job {m['job_id']}, {m['mode']} GPU; "
             f"curve RMSE {m['curve_rmse_w']:g} W"
             + (f", cap RMSE {m['cap_rmse']:g}" if m["cap_rmse"] is not None else "") + ")")
        echo(f"  {'constant':<18} {'shipped':>10} {'calibrated':>11} {'fit error':>10} "
             f"{'points':>6}")
        for name, c in m["constants"].items():
            err = "-" if c["fit_error"] is None else f"{c['fit_error']:.3g}"
            for label, shipped_text, calibrated_text in _rows(name, c):
                echo(f"  {label:<18} {shipped_text:>10} {calibrated_text:>11} {err:>10} "
                     f"{c['points']:>6}")
        for note in m["notes"]:
            echo(f"  note: {note}")
