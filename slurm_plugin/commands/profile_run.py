"""``wattctl profile-gpus run``: measure every GPU of a partition through Slurm.

One benchmark job per GPU (pinned by its typed GRES, as EaCO pins: ``--nodelist`` +
``--gres=gpu:gN:1``), or per node where the GPUs are untyped (``--gres=gpu:N``, the job measures
them one after another); each runs ``slurm_plugin.node.gpu_bench`` and writes one result file
per GPU into ``--work-dir`` (a directory the nodes share). The runs are then classified as
``profile-gpus import`` classifies PAL's measurements (``physics/gpu_profile.py``), written as a
profile CSV (each row with its ``measured_at``) and a measurements CSV (``exp``, ``node``,
``device``, ``uuid``, ``time``: what ``import`` reads), and stored in InfluxDB as ``gpu_perf``
(tags ``cluster``, ``node``, ``gpu``, ``uuid``, ``app_class``; fields ``time_s``, the median run
time, ``factor``, ``runs``).
"""

from __future__ import annotations

import csv
import json
import shlex
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

from ..errors import CommandError, InputError
from ..model import Cluster
from ..physics.gpu_profile import APP_CLASSES, CLASSES, ProfileRow, build_profile, read_runs, \
    write_profile

GpuKey = tuple[str, int]


@dataclass(frozen=True)
class BenchJob:
    node: str
    gpus: tuple[int, ...]
    sbatch_args: tuple[str, ...]


def plan_jobs(cluster: Cluster, nodes: Iterable[str] | None, per: str = "auto"
              ) -> list[BenchJob]:
    """One job per GPU where the node's GPUs are typed (``per`` "auto" or "gpu"), else one
    per node (``per`` "node"). Nodes that are down or have no GPU are left out."""
    wanted = None if nodes is None else set(nodes)
    out = []
    for node in cluster.nodes:
        if (wanted is not None and node.name not in wanted) or not node.gpus \
                or not node.available:
            continue
        typed = all(g.gres_type for g in node.gpus)
        if per == "gpu" and not typed:
            raise InputError(f"profile-gpus run: --per gpu: node {node.name}'s GPUs have no "
                             "GRES type to pin one by; use --per node")
        if per in ("auto", "gpu") and typed:
            for g in node.gpus:
                out.append(BenchJob(node.name, (g.index,),
                                    (f"--nodelist={node.name}", f"--gres=gpu:{g.gres_type}:1")))
        else:
            out.append(BenchJob(node.name, tuple(g.index for g in node.gpus),
                                (f"--nodelist={node.name}", f"--gres=gpu:{len(node.gpus)}",
                                 "--exclusive")))
    return out


def job_script(python: str, work_dir: Path, apps: list[str], runs: int, steps: int,
               step_s: float) -> str:
    cmd = [python, "-m", "slurm_plugin.node.gpu_bench", "--out", str(work_dir), "--runs",
           str(runs), "--steps", str(steps), "--step-s", f"{step_s:g}"]
    for a in apps:
        cmd += ["--app", a]
    return "#!/bin/sh\nexec " + " ".join(shlex.quote(c) for c in cmd) + "\n"


def read_results(work_dir: Path, expected: set[GpuKey]) -> dict[GpuKey, dict]:
    """The result files of the expected GPUs found so far."""
    got = {}
    for node, index in expected:
        p = work_dir / f"result-{node}-{index}.json"
        try:
            got[(node, index)] = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
    return got


def gpu_names(keys: Iterable[GpuKey]) -> str:
    return ", ".join(f"{n}:{i}" for n, i in sorted(keys))


RUN_FIELDS = ["exp", "node", "device", "uuid", "time", "measured_at"]


def measurement_rows(results: dict[GpuKey, dict], measured_at: str = "") -> list[dict[str, str]]:
    """One row per run, in the columns ``profile-gpus import`` reads (and when)."""
    rows = []
    for (node, index), r in sorted(results.items()):
        for app, times in sorted(r.get("runs", {}).items()):
            for t in times:
                rows.append({"exp": app, "node": node, "device": str(index),
                             "uuid": r.get("uuid") or f"{node}-{index}", "time": f"{t:.6f}",
                             "measured_at": measured_at})
    return rows


def merge_runs(previous: Path, rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The runs of ``previous`` (an earlier ``OUT.runs.csv``) of the GPUs not measured now,
    then ``rows``: a re-run of some nodes replaces their runs and keeps the others'."""
    fresh = {(r["node"], r["device"]) for r in rows}
    try:
        with previous.open(newline="") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in RUN_FIELDS[:5] if c not in (reader.fieldnames or [])]
            if missing:
                raise InputError(f"profile-gpus run --merge: {previous}: line 1: column "
                                 f"{missing[0]}: missing; not the runs file of a profile")
            old = [{k: (rec.get(k) or "") for k in RUN_FIELDS} for rec in reader]
    except OSError as exc:
        raise InputError(f"profile-gpus run --merge: {previous}: cannot read ({exc.strerror}); "
                         "run once without --merge") from None
    return [r for r in old if (r["node"], r["device"]) not in fresh] + rows


def latest_times(rows: list[dict[str, str]]) -> dict[tuple[str, int | None], str]:
    """(node, GPU index) -> the latest ``measured_at`` of its runs."""
    out: dict[tuple[str, int | None], str] = {}
    for r in rows:
        try:
            key = (r["node"], int(r["device"]))
        except ValueError:
            continue
        out[key] = max(out.get(key, ""), r.get("measured_at") or "")
    return out


def runs_path(out: Path) -> Path:
    return out.with_name(out.stem + ".runs.csv")


def write_measurements(rows: list[dict[str, str]], path: Path) -> None:
    try:
        with path.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=RUN_FIELDS)
            w.writeheader()
            w.writerows(rows)
    except OSError as exc:
        raise InputError(f"profile-gpus: {path}: cannot write ({exc.strerror})") from None


def influx_points(rows: list[ProfileRow], results: dict[GpuKey, dict], cluster: str,
                  now_s: float):
    from ..telemetry.lineproto import Point
    out = []
    for r in rows:
        res = results.get((r.node, r.gpu_index if r.gpu_index is not None else -1))
        if res is None:          # a GPU of an earlier run (--merge): stored back then
            continue
        for ci, c in enumerate(CLASSES):
            if r.perf[ci] is None:
                continue
            n = sum(len(v) for app, v in res.get("runs", {}).items()
                    if c in APP_CLASSES.get(app, ()))
            out.append(Point("gpu_perf", {"cluster": cluster, "node": r.node,
                                          "gpu": str(r.gpu_index), "uuid": r.uuid,
                                          "app_class": c},
                             {"time_s": float(r.perf[ci]), "factor": float(r.factors[ci]),
                              "runs": n}, now_s))
    return out


def uuid_changes(previous: Path, rows: list[ProfileRow]) -> list[str]:
    """GPUs of ``rows`` whose uuid differs from the one the previous profile recorded."""
    from ..physics.variability import load_profile
    try:
        old = load_profile(previous).uuid_by_gpu()
    except InputError:
        return []
    return [f"{r.node}:{r.gpu_index} {old[(r.node, r.gpu_index)]} -> {r.uuid}" for r in rows
            if r.gpu_index is not None and (r.node, r.gpu_index) in old
            and old[(r.node, r.gpu_index)] != r.uuid]


@dataclass
class Waited:
    results: dict[GpuKey, dict]
    missing: set[GpuKey]
    failed: dict[GpuKey, str]
    elapsed_s: float


ENDED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
                   "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED"})


def wait_results(work_dir: Path, jobs: dict[str, BenchJob], timeout_s: float,
                 queue: Callable[[], dict[str, str]], progress: Callable[[str], None],
                 poll_s: float = 1.0, clock=time.monotonic, sleep=time.sleep,
                 grace_s: float = 5.0) -> Waited:
    """Wait until every GPU of ``jobs`` (job id -> job) has a result, its job ended without
    one (failed: ``grace_s`` after the job left the queue or reached an end state, for a shared
    filesystem to show the file), or ``timeout_s`` passed (missing). ``queue()``: job id ->
    Slurm state (RUNNING, PENDING, COMPLETED, ...) of the jobs still listed."""
    expected = {(j.node, g) for j in jobs.values() for g in j.gpus}
    start = clock()
    shown = ""
    failed: dict[GpuKey, str] = {}
    ended_at: dict[str, float] = {}
    while True:
        got = read_results(work_dir, expected)
        states = queue()
        now = clock()
        for jid in jobs:
            state = states.get(jid)
            if state is None or state in ENDED:
                ended_at.setdefault(jid, now)
            if jid not in ended_at or now - ended_at[jid] < grace_s:
                continue
            for g in jobs[jid].gpus:
                key = (jobs[jid].node, g)
                if key not in got and key not in failed:
                    how = f"ended {state}" if state else "left the queue"
                    failed[key] = f"job {jid} {how} without a result " \
                                  f"(see {work_dir}/job-{jid}.out)"
        waiting = expected - set(got) - set(failed)
        running = sum(1 for jid, st in states.items() if jid in jobs and st == "RUNNING")
        pending = sum(1 for jid, st in states.items() if jid in jobs and st == "PENDING")
        line = (f"profile-gpus: {len(got)}/{len(expected)} GPUs reported; jobs: {running} "
                f"running, {pending} pending")
        if line != shown:
            progress(f"{line} ({now - start:.0f} s)")
            shown = line
        if not waiting:
            return Waited(got, set(), failed, now - start)
        if now - start >= timeout_s:
            return Waited(got, waiting, failed, now - start)
        sleep(poll_s)


def run_profile(cfg, out: Path, apps: list[str], partition: str | None, nodes: list[str] | None,
                per: str, runs: int, steps: int, step_s: float, timeout_s: float,
                work_dir: Path | None, python: str, influx: bool,
                progress: Callable[[str], None], merge: bool = False) -> dict:
    from ..slurm.cli import slurm
    from ..slurm.parse import expand_hostlist
    from ..slurm.snapshot import snapshot

    cluster = snapshot(cfg)
    if partition:
        text = slurm("sinfo", ["-h", "-p", partition, "-o", "%N"], cfg).stdout.strip()
        names = [n for part in text.split() for n in expand_hostlist(part)]
        if not names:
            raise InputError(f"profile-gpus run: partition {partition!r} has no node "
                             "(sinfo -p)")
        nodes = [n for n in names if nodes is None or n in nodes]
    plan = plan_jobs(cluster, nodes, per)
    if not plan:
        raise InputError("profile-gpus run: no available node with GPUs to measure"
                         + (f" in partition {partition}" if partition else ""))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    work_dir = (work_dir or out.parent / f".profile-gpus-{stamp}").resolve()
    work_dir.mkdir(parents=True, exist_ok=True)
    script = job_script(python, work_dir, apps, runs, steps, step_s)
    limit_min = max(1, int((timeout_s + 59) // 60))
    jobs: dict[str, BenchJob] = {}
    try:
        for j in plan:
            args = ["--parsable", "--job-name=wattbatch-profile-gpus",
                    f"--output={work_dir}/job-%j.out", f"--time={limit_min}", *j.sbatch_args]
            if partition:
                args.append(f"--partition={partition}")
            jid = slurm("sbatch", args, cfg, input_text=script).stdout.strip().split(";")[0]
            jobs[jid] = j
        progress(f"profile-gpus: {len(jobs)} benchmark jobs submitted for "
                 f"{sum(len(j.gpus) for j in plan)} GPUs on {len({j.node for j in plan})} "
                 f"nodes; results in {work_dir}")

        def queue() -> dict[str, str]:
            snap = snapshot(cfg)
            return {jid: job.state for jid, job in snap.jobs.items() if jid in jobs}

        waited = wait_results(work_dir, jobs, timeout_s, queue, progress)
    finally:
        left = [jid for jid in jobs]
        if left:
            slurm("scancel", left, cfg, check=False)
    errors = {k: r["error"] for k, r in waited.results.items() if r.get("error")}
    problems = []
    if waited.missing:
        problems.append(f"no result after {timeout_s:g} s from {len(waited.missing)} GPUs: "
                        f"{gpu_names(waited.missing)} (their jobs were cancelled)")
    for k, why in sorted({**waited.failed, **errors}.items()):
        problems.append(f"{k[0]}:{k[1]}: {why}")
    if problems:
        raise CommandError(["wattctl", "profile-gpus", "run"], 1,
                           "profile-gpus run: " + "; ".join(problems))
    measured_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    rows_in = measurement_rows(waited.results, measured_at)
    runs_file = runs_path(out)
    if merge:
        rows_in = merge_runs(runs_file, rows_in)
    write_measurements(rows_in, runs_file)
    profile = build_profile(read_runs([runs_file]))
    changed = uuid_changes(out, profile) if out.exists() else []
    write_profile(profile, out, measured_at=latest_times(rows_in))
    stored = 0
    if influx:
        from ..telemetry.influx import InfluxClient
        client = InfluxClient.from_config(cfg)
        stored = client.write(influx_points(profile, waited.results, cfg["cluster.name"],
                                            time.time()))
    return {
        "profile": str(out), "measurements": str(runs_file), "work_dir": str(work_dir),
        "measured_at": measured_at, "elapsed_s": round(waited.elapsed_s, 1),
        "jobs": {jid: {"node": j.node, "gpus": list(j.gpus)} for jid, j in jobs.items()},
        "influx_points": stored, "uuid_changed": changed,
        "gpus": [{"gpu": f"{r.node}:{r.gpu_index}", "uuid": r.uuid,
                  "mode": waited.results.get((r.node, r.gpu_index), {}).get("mode", ""),
                  "time_s": {c: p for c, p in zip(CLASSES, r.perf) if p is not None},
                  "factors": dict(zip(CLASSES, r.factors)),
                  "clusters": dict(zip(CLASSES, r.clusters))} for r in profile],
    }


def print_summary(result: dict, echo=print) -> None:
    echo(f"profile-gpus: {len(result['gpus'])} GPUs measured in {result['elapsed_s']:g} s -> "
         f"{result['profile']} (runs: {result['measurements']})")
    for g in result["gpus"]:
        cells = " ".join(f"{c} {g['clusters'][c]} x{g['factors'][c]:.3f}"
                         for c in CLASSES if c in g["time_s"])
        echo(f"  {g['gpu']:<16} {g['uuid']:<42} {cells}")
    for line in result["uuid_changed"]:
        echo(f"profile-gpus: uuid changed since the previous profile: {line}")
    if result["influx_points"]:
        echo(f"profile-gpus: {result['influx_points']} gpu_perf points stored in InfluxDB")
