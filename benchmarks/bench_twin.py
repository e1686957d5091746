#!/usr/bin/env python3
"""Digital-twin fidelity: one workload on the local Slurm cluster and in the simulator.

Usage, with the local cluster up and its environment sourced (``wattctl localcluster env``
prints the file)::

    python benchmarks/bench_twin.py [--trace benchmarks/twin_workload.csv] [--policy eaco] [--json]

Both runs use the same policy (``--policy``, default ``slurm-default``) on 4 nodes x 4 GPUs (V100
physics) and the same time limits: the trace's ``time_limit_s``, else the duration plus 15 s
rounded up to whole minutes (as Slurm keeps them); the simulator gets them in the trace it
reads, and its scheduler settings are its defaults, the local cluster's slurm.conf values.
Workloads: ``twin_workload.csv`` (20 mixed jobs), ``twin_bursty.csv`` (three bursts of seven),
``twin_limits.csv`` (1-GPU jobs filling the cluster, a 4-GPU job behind them, then 1-GPU jobs
with tight and generous limits: only the tight ones may be backfilled).

- Live: starts ``wattctl collect --interval 2 --source emulated --node all`` (emulated GPU power,
  energy and utilisation into InfluxDB) unless one already feeds every GPU (the local cluster
  runs its own: a second one would only interleave with it), submits every job through
  ``wattbatch`` at its ``submit_s`` offset (the job: ``python3 -m slurm_plugin.emulated_train``
  with steps x step-s = ``duration_s``; ``-t`` the time limit above), waits for all of them (``--timeout-s``), stops the collector it started,
  and reads submit/start/end from sacct and GPU energy from InfluxDB (each of the 16 GPUs'
  ``power_w`` integrated over the window). Jobs are named ``twin-<run>-<job_id>``; only those
  are looked at; other users' GPU jobs in the window are reported as a disturbance.
- Simulated: ``wattctl simulate --trace-format canonical --nodes 4 --gpus-per-node 4 --policy
  slurm-default --json`` for the run's metrics; the CLI prints no per-job times, so the same
  engine also runs in-process, recording each job's start and end, and the two must agree.

Compared: per-job start order (``slurm_plugin.sim.twin``: the fraction of jobs in the longest
common subsequence of the two start orders, and the pairwise fraction), avg JCT (end - submit)
and its ratio live/sim, and GPU energy of the 16 GPUs from the first submit to the last end of
each run (the simulator's ``energy_kwh`` also counts node base power, which the emulated cluster
does not model; its ``gpu_energy_kwh`` counts idle GPUs too, as the emulated GPUs do). Energy
above idle (total minus 16 x idle power x window) is shown too: it does not depend on the length
of the window. Mismatch sources measured: submission drift and wattbatch's own time, Slurm's
start latency, the shift of each start, the job's start-up and step overhead.

Goals: avg JCT within 10% and the same start order for >= 90% of jobs; with a policy other than
``slurm-default`` also GPU energy live/sim within 10% (co-location on shards live, shared-GPU
physics in the simulator). Exit status 0 when all are met, 1 otherwise or when the live run did
not complete (jobs cancelled, timeout).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from slurm_plugin import config, proc  # noqa: E402
from slurm_plugin.physics import assign_class, idle_power_w  # noqa: E402
from slurm_plugin.policy import get_policy  # noqa: E402
from slurm_plugin.sim.carbon import load_carbon  # noqa: E402
from slurm_plugin.sim.cluster import ClusterSpec  # noqa: E402
from slurm_plugin.sim.engine import Simulator  # noqa: E402
from slurm_plugin.sim.metrics import Metrics  # noqa: E402
from slurm_plugin.sim.run import Inputs, load_jobs  # noqa: E402
from slurm_plugin.sim.trace import TraceJob  # noqa: E402
from slurm_plugin.sim.twin import (JobTimes, integrate, moved_jobs,  # noqa: E402
                                   order_agreement, pairwise_agreement, start_order, summary)
from slurm_plugin.slurm.actions import slurm_time  # noqa: E402
from slurm_plugin.slurm.cli import slurm  # noqa: E402
from slurm_plugin.slurm.snapshot import history  # noqa: E402
from slurm_plugin.telemetry.influx import InfluxClient, quote_str  # noqa: E402
from slurm_plugin.telemetry.lineproto import time_ns  # noqa: E402
from slurm_plugin.telemetry.readers import latest_gpu_readings  # noqa: E402

NODES, GPUS_PER_NODE, GPU_TYPE = 4, 4, "V100"
PREFIX = "twin-"
STEP_S = 2.0                   # seconds per emulated training step (about)
LIMIT_MARGIN_S = 15.0          # sbatch time limit = duration + this, rounded up to minutes
JCT_GOAL, ORDER_GOAL, ENERGY_GOAL = 0.10, 0.90, 0.10
FINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
         "BOOT_FAIL", "DEADLINE")


def log(msg: str) -> None:
    print(f"[twin] {msg}", file=sys.stderr, flush=True)


def _cli(*args: str, timeout_s: float = 60.0) -> str:
    return proc.run([sys.executable, "-m", "slurm_plugin.cli", *args], timeout_s=timeout_s,
                    cwd=str(ROOT)).stdout


# ---------------------------------------------------------------------------- simulated run
class _Recorder(Metrics):
    """The engine's metrics, plus each finished job's times."""

    def __init__(self, jobs: int) -> None:
        super().__init__(jobs)
        self.times: list[JobTimes] = []
        self.nodes: dict[str, str] = {}

    def job_done(self, j: Any) -> None:
        super().job_done(j)
        self.times.append(JobTimes(j.id, j.t.submit_s, j.first_start_s, j.end_s))
        self.nodes[j.id] = ",".join(sorted({g.node.name for g in j.gpus}))


def with_limits(jobs: list[TraceJob], out: Path) -> Path:
    """The workload as a canonical trace whose every job has its time limit (the trace's, else
    the duration plus ``LIMIT_MARGIN_S`` in whole minutes): the one both runs use."""
    rows = ["job_id,submit_s,duration_s,num_gpus,app,time_limit_s"]
    for j in jobs:
        rows.append(f"{j.job_id},{j.submit_s:g},{j.duration_s:g},{j.num_gpus},"
                    f"{j.app or assign_class(j.job_id, 0)},{limit_s(j):g}")
    out.write_text("\n".join(rows) + "\n")
    return out


def limit_s(job: TraceJob) -> float:
    if job.time_limit_s is not None:
        return 60.0 * math.ceil(job.time_limit_s / 60.0)
    return 60.0 * math.ceil((job.duration_s + LIMIT_MARGIN_S) / 60.0)


def simulated(trace: Path, cfg: config.SiteConfig, policy: str) -> dict[str, Any]:
    """``wattctl simulate --json`` and the same run in-process for the per-job times."""
    cli = json.loads(_cli("simulate", "--trace", str(trace), "--trace-format", "canonical",
                          "--nodes", str(NODES), "--gpus-per-node", str(GPUS_PER_NODE),
                          "--gpu-type", GPU_TYPE, "--policy", policy, "--json"))
    spec = ClusterSpec(nodes=NODES, gpus_per_node=GPUS_PER_NODE, gpu_type=GPU_TYPE)
    inputs = Inputs(trace=trace, trace_format="canonical", spec=spec, zone=cfg["carbon.zone"])
    jobs = load_jobs(inputs)
    sim = Simulator(jobs, spec, get_policy(policy, "--policy"),
                    carbon=load_carbon(None, inputs.zone, jobs[0].submit_s),
                    settings=config.policy_settings(
                        cfg, policy, shards_per_gpu=spec.resolved().shards_per_gpu))
    recorder = _Recorder(len(jobs))
    sim.metrics = recorder
    res = sim.run()
    for key in ("avg_jct_s", "gpu_energy_kwh", "makespan_s"):
        if not math.isclose(res[key], cli[key], rel_tol=1e-9, abs_tol=1e-9):
            raise SystemExit(f"bench_twin: the in-process simulation differs from `wattctl "
                             f"simulate` in {key}: {res[key]} vs {cli[key]}")
    window_s = cli["makespan_s"]
    gpu_j = cli["gpu_energy_kwh"] * 3.6e6
    return {"cli": cli, "times": recorder.times, "nodes": recorder.nodes, "window_s": window_s,
            "gpu_energy_j": gpu_j,
            "gpu_energy_above_idle_j": gpu_j - NODES * GPUS_PER_NODE * idle_power_w(GPU_TYPE)
            * window_s}


# ---------------------------------------------------------------------------- live run
def _script(job: TraceJob, tag: str, workdir: Path) -> Path:
    steps = max(1, round(job.duration_s / STEP_S))
    step_s = job.duration_s / steps
    path = workdir / f"{job.job_id}.sh"
    path.write_text(
        "#!/bin/bash\n"
        f"#SBATCH --job-name={PREFIX}{tag}-{job.job_id}\n"
        f"#SBATCH --output={workdir}/{job.job_id}-%j.out\n"
        f"#SBATCH --chdir={ROOT}\n\n"
        f"exec {sys.executable} -m slurm_plugin.emulated_train --steps {steps} "
        f"--step-s {step_s:.6f} --steps-per-epoch {steps} --checkpoint {workdir}/{job.job_id}.ckpt\n")
    return path


def submit(job: TraceJob, tag: str, workdir: Path, policy: str) -> str:
    argv = [sys.executable, "-m", "wrapper.cli", "--parsable", f"--wb-policy={policy}",
            "--wb-share",          # the simulator's jobs may share (the site default there)
            f"--gres=gpu:{job.num_gpus}", "-t", str(int(job.time_limit_s // 60)),
            f"--wb-app={job.app or assign_class(job.job_id, 0)}",   # the simulator's rule
            str(_script(job, tag, workdir))]
    out = proc.run(argv, timeout_s=60, cwd=str(ROOT)).stdout.strip()
    job_id = out.splitlines()[-1].split(";")[0] if out else ""
    if not job_id.isdigit():
        raise SystemExit(f"bench_twin: wattbatch printed {out!r} for {job.job_id}, expected a job id")
    return job_id


def foreign_jobs(cfg: config.SiteConfig, since_s: float, until_s: float | None) -> list[str]:
    """Other GPU jobs (not ``twin-``) that ran in [since_s, until_s] or were submitted in it:
    both change what Slurm does (GPUs taken; reservations, priority)."""
    out = []
    now = time.time()
    until = now if until_s is None else until_s
    for r in history(cfg, since=slurm_time(since_s - 3600)):
        if r.name.startswith(PREFIX) or ("gres/gpu" not in r.req_tres
                                         and "gres/gpu" not in r.alloc_tres):
            continue
        end = r.end_s if r.end_s is not None else now
        if r.start_s is not None and "gres/gpu" in r.alloc_tres and r.start_s <= until \
                and end >= since_s:
            out.append(f"{r.job_id}({r.name},{r.state},ran)")
        elif r.submit_s is not None and since_s <= r.submit_s <= until:
            out.append(f"{r.job_id}({r.name},{r.state},submitted)")
    return out


def wait_idle(cfg: config.SiteConfig, wait_s: float) -> list[str]:
    """Wait up to ``wait_s`` for GPU jobs of others to end; those still there."""
    deadline = time.time() + wait_s
    while True:
        busy = [b for b in foreign_jobs(cfg, time.time(), None) if "RUNNING" in b]
        if not busy or time.time() >= deadline:
            return busy
        log(f"waiting for other jobs to end: {', '.join(busy)}")
        time.sleep(5)


def gpu_energy_j(cfg: config.SiteConfig, t0: float, t1: float, margin_s: float
                 ) -> tuple[dict[str, float], float]:
    """Per GPU, the integral of ``power_w`` over [t0, t1]; and the longest gap between samples.

    Power, not the ``energy_j`` counter: when two collectors write the same series (the local
    cluster runs its own), their counters interleave, while their power readings agree."""
    client = InfluxClient.from_config(cfg)
    q = (f'SELECT "power_w" FROM "gpu" WHERE "cluster" = {quote_str(cfg["cluster.name"])} '
         f"AND time >= {time_ns(t0 - margin_s)} AND time <= {time_ns(t1 + margin_s)} "
         'GROUP BY "node", "gpu"')
    out, gap = {}, 0.0
    for s in client.query(q):
        samples = sorted((float(row["time"]), float(row["power_w"])) for row in s.rows()
                         if row.get("power_w") is not None)
        out[f"{s.tags.get('node')}:{s.tags.get('gpu')}"] = integrate(samples, t0, t1)
        gap = max([gap] + [b[0] - a[0] for a, b in zip(samples, samples[1:])])
    return out, gap


def collector_running(cfg: config.SiteConfig, interval_s: float) -> bool:
    """Whether every GPU of the cluster already has a fresh ``gpu`` point (a collector runs)."""
    fresh = latest_gpu_readings(InfluxClient.from_config(cfg), time.time(),
                                max_age_s=3 * interval_s, cluster=cfg["cluster.name"])
    return len(fresh) >= NODES * GPUS_PER_NODE


def live(jobs: list[TraceJob], cfg: config.SiteConfig, args: argparse.Namespace) -> dict[str, Any]:
    """Run the workload on the cluster; per-job times relative to the trace's time zero."""
    busy = wait_idle(cfg, args.wait_idle_s)
    workdir = Path(tempfile.mkdtemp(prefix="wattbatch-twin-"))
    tag = time.strftime("%H%M%S")
    collector = None
    if collector_running(cfg, args.interval):
        log("an emulated-GPU collector already feeds InfluxDB: using it, not starting another")
    else:
        collector = proc.start([sys.executable, "-m", "slurm_plugin.cli", "collect", "--interval",
                                str(args.interval), "--source", "emulated", "--node", "all"],
                               log_path=str(workdir / "collector.log"), cwd=str(ROOT))
    ids: dict[str, str] = {}
    drift: list[float] = []
    call: list[float] = []
    incomplete: list[str] = []
    try:
        time.sleep(2.5 * args.interval)         # two samples before the window opens
        if collector is not None and collector.poll() is not None:
            raise SystemExit("bench_twin: the collector exited: "
                             + (workdir / "collector.log").read_text()[-2000:])
        t0 = time.time() + 0.5 - jobs[0].submit_s
        log(f"submitting {len(jobs)} jobs ({PREFIX}{tag}-*), output in {workdir}")
        for job in jobs:
            time.sleep(max(0.0, t0 + job.submit_s - time.time()))
            began = time.time()
            ids[job.job_id] = submit(job, tag, workdir, args.policy)
            drift.append(began - (t0 + job.submit_s))
            call.append(time.time() - began)
        deadline = t0 + args.timeout_s
        records: dict[str, Any] = {}
        while True:
            records = {r.job_id: r for r in history(cfg, since=slurm_time(t0 - 60))
                       if r.job_id in ids.values()}
            done = [r for r in records.values() if r.state in FINAL and r.end_s is not None]
            if len(done) == len(ids) or time.time() > deadline:
                break
            time.sleep(3)
        incomplete = [j for j, sid in ids.items()
                      if sid not in records or records[sid].state != "COMPLETED"]
        if incomplete:
            slurm("scancel", [ids[j] for j in incomplete], cfg, check=False)
        log("all jobs ended; waiting for the collector's next samples")
        time.sleep(2 * args.interval + 1)
    finally:
        if collector is not None:
            proc.stop(collector)
        if ids and (incomplete or len(ids) < len(jobs)):
            slurm("scancel", list(ids.values()), cfg, check=False)
    if incomplete:
        states = {j: records[ids[j]].state if ids[j] in records else "?" for j in incomplete}
        return {"complete": False, "incomplete": states, "workdir": str(workdir)}
    times, nodes = [], {}
    for job in jobs:
        r = records[ids[job.job_id]]
        times.append(JobTimes(job.job_id, r.submit_s - t0, r.start_s - t0, r.end_s - t0))
        nodes[job.job_id] = ",".join(r.nodes)
    w0 = min(r.submit_s for r in records.values())
    w1 = max(r.end_s for r in records.values())
    per_gpu, gap = gpu_energy_j(cfg, w0, w1, 3 * args.interval)
    window_s = w1 - w0
    total = sum(per_gpu.values())
    return {"complete": True, "times": times, "nodes": nodes, "slurm_ids": ids,
            "workdir": str(workdir), "window_s": window_s, "gpus_metered": len(per_gpu),
            "max_sample_gap_s": gap, "own_collector": collector is not None,
            "gpu_energy_j": total,
            "gpu_energy_above_idle_j": total - len(per_gpu) * idle_power_w(GPU_TYPE) * window_s,
            "submit_drift_s": drift, "wattbatch_call_s": call,
            "foreign_jobs_before": busy, "foreign_jobs": foreign_jobs(cfg, w0, w1)}


# ---------------------------------------------------------------------------- report
def _stats(values: list[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(values), "median": statistics.median(values),
            "max": max(values), "min": min(values)}


def compare(jobs: list[TraceJob], sim: dict[str, Any], real: dict[str, Any]) -> dict[str, Any]:
    s_times = {t.job_id: t for t in sim["times"]}
    l_times = {t.job_id: t for t in real["times"]}
    s_order, l_order = start_order(sim["times"]), start_order(real["times"])
    s_sum, l_sum = summary(sim["times"]), summary(real["times"])
    by_id = {j.job_id: j for j in jobs}
    immediate = [l_times[j].queue_s for j in s_times if s_times[j].queue_s < 1e-9]
    rows = [{"job_id": j.job_id, "gpus": j.num_gpus, "duration_s": j.duration_s,
             "submit_s": j.submit_s, "sim_start_s": s_times[j.job_id].start_s,
             "live_start_s": l_times[j.job_id].start_s,
             "sim_rank": s_order.index(j.job_id) + 1, "live_rank": l_order.index(j.job_id) + 1,
             "sim_node": sim["nodes"][j.job_id], "live_node": real["nodes"][j.job_id],
             "sim_jct_s": s_times[j.job_id].jct_s, "live_jct_s": l_times[j.job_id].jct_s}
            for j in jobs]
    agreement = order_agreement(s_order, l_order)
    ratio = l_sum["avg_jct_s"] / s_sum["avg_jct_s"]
    energy = real["gpu_energy_j"] / sim["gpu_energy_j"]
    return {
        "jobs": rows,
        "sim": {**s_sum, "start_order": s_order, "gpu_energy_kj": sim["gpu_energy_j"] / 1e3,
                "gpu_energy_above_idle_kj": sim["gpu_energy_above_idle_j"] / 1e3,
                "energy_window_s": sim["window_s"],
                "energy_kwh_with_nodes": sim["cli"]["energy_kwh"]},
        "live": {**l_sum, "start_order": l_order, "gpu_energy_kj": real["gpu_energy_j"] / 1e3,
                 "gpu_energy_above_idle_kj": real["gpu_energy_above_idle_j"] / 1e3,
                 "energy_window_s": real["window_s"], "gpus_metered": real["gpus_metered"],
                 "max_power_sample_gap_s": real["max_sample_gap_s"],
                 "own_collector": real["own_collector"],
                 "slurm_job_ids": real["slurm_ids"], "workdir": real["workdir"],
                 "foreign_gpu_jobs": real["foreign_jobs"]},
        "start_order_agreement": agreement,
        "start_order_pairwise": pairwise_agreement(s_order, l_order),
        "moved_jobs": moved_jobs(s_order, l_order),
        "avg_jct_ratio": ratio,
        "gpu_energy_ratio": energy,
        "gpu_energy_above_idle_ratio": real["gpu_energy_above_idle_j"]
        / sim["gpu_energy_above_idle_j"],
        "mismatch_sources": {
            "submit_drift_s": _stats(real["submit_drift_s"]),
            "wattbatch_call_s": _stats(real["wattbatch_call_s"]),
            "start_latency_s": _stats(immediate) if immediate else None,
            "start_shift_s": _stats([l_times[j].start_s - s_times[j].start_s for j in s_times]),
            "run_overhead_s": _stats([l_times[j].run_s - by_id[j].duration_s for j in s_times]),
        },
        "goals": {"avg_jct_within": JCT_GOAL, "start_order_at_least": ORDER_GOAL,
                  "gpu_energy_within": ENERGY_GOAL,
                  "avg_jct_met": abs(ratio - 1) <= JCT_GOAL, "start_order_met": agreement >= ORDER_GOAL,
                  "gpu_energy_met": abs(energy - 1) <= ENERGY_GOAL},
    }


def render(c: dict[str, Any]) -> str:
    out = [f"{'job':>5} {'gpus':>4} {'dur_s':>6} {'submit':>6} {'sim_start':>9} {'live_start':>10} "
           f"{'sim#':>4} {'live#':>5} {'sim_jct':>7} {'live_jct':>8} {'sim_node':>8} {'live_node':>9}"]
    for r in c["jobs"]:
        out.append(f"{r['job_id']:>5} {r['gpus']:>4} {r['duration_s']:>6.0f} {r['submit_s']:>6.0f} "
                   f"{r['sim_start_s']:>9.1f} {r['live_start_s']:>10.1f} {r['sim_rank']:>4} "
                   f"{r['live_rank']:>5} {r['sim_jct_s']:>7.1f} {r['live_jct_s']:>8.1f} "
                   f"{r['sim_node']:>8} {r['live_node']:>9}")
    s, lv = c["sim"], c["live"]
    out += ["", f"{'':28}{'simulated':>12}{'live':>12}"]
    for label, key, fmt in (("avg JCT (s)", "avg_jct_s", ".1f"), ("avg queue (s)", "avg_queue_s", ".1f"),
                            ("avg run (s)", "avg_run_s", ".1f"), ("makespan (s)", "makespan_s", ".1f"),
                            ("GPU energy, 16 GPUs (kJ)", "gpu_energy_kj", ".1f"),
                            ("  above idle (kJ)", "gpu_energy_above_idle_kj", ".1f"),
                            ("  window (s)", "energy_window_s", ".1f")):
        out.append(f"{label:28}{s[key]:>12{fmt}}{lv[key]:>12{fmt}}")
    out += ["", "start order, simulated: " + " ".join(s["start_order"]),
            "start order, live:      " + " ".join(lv["start_order"]),
            f"same start order: {c['start_order_agreement']:.0%} of jobs (longest common "
            f"subsequence; moved: {', '.join(c['moved_jobs']) or 'none'}), "
            f"{c['start_order_pairwise']:.1%} of pairs",
            f"avg JCT live/sim: {c['avg_jct_ratio']:.3f}; GPU energy live/sim: "
            f"{c['gpu_energy_ratio']:.3f} (above idle: {c['gpu_energy_above_idle_ratio']:.3f}); "
            f"simulator energy with node base power: {s['energy_kwh_with_nodes'] * 3600:.1f} kJ "
            "(not modelled live)"]
    for name, st in c["mismatch_sources"].items():
        if st:
            out.append(f"{name}: mean {st['mean']:.2f}, median {st['median']:.2f}, "
                       f"min {st['min']:.2f}, max {st['max']:.2f}")
    out.append(f"GPU power from {'this run' if lv['own_collector'] else 'the running'} collector, "
               f"{lv['gpus_metered']} GPUs, longest gap between samples "
               f"{lv['max_power_sample_gap_s']:.1f} s")
    if lv["foreign_gpu_jobs"]:
        out.append("WARNING: other GPU jobs ran or were submitted during the live run "
                   "(results disturbed): "
                   + ", ".join(lv["foreign_gpu_jobs"]))
    g = c["goals"]
    out.append(f"goals: avg JCT within {g['avg_jct_within']:.0%}: "
               f"{'met' if g['avg_jct_met'] else 'MISSED'}; same start order for >= "
               f"{g['start_order_at_least']:.0%} of jobs: {'met' if g['start_order_met'] else 'MISSED'}; "
               f"GPU energy within {g['gpu_energy_within']:.0%}: "
               f"{'met' if g['gpu_energy_met'] else 'MISSED'}")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=ROOT / "benchmarks" / "twin_workload.csv",
                    help="canonical trace (job_id,submit_s,duration_s,num_gpus[,app,time_limit_s])")
    ap.add_argument("--policy", default="slurm-default", help="policy of both runs")
    ap.add_argument("--interval", type=float, default=2.0, help="collector interval (s)")
    ap.add_argument("--timeout-s", type=float, default=270.0,
                    help="give up on the live run this long after the first submission")
    ap.add_argument("--wait-idle-s", type=float, default=30.0,
                    help="wait this long for other users' GPU jobs to end before starting")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    cfg = config.load()
    spec = ClusterSpec(nodes=NODES, gpus_per_node=GPUS_PER_NODE, gpu_type=GPU_TYPE)
    raw = load_jobs(Inputs(trace=args.trace, trace_format="canonical", spec=spec,
                           zone=cfg["carbon.zone"]))
    trace = with_limits(raw, Path(tempfile.mkdtemp(prefix="wattbatch-twin-")) / args.trace.name)
    jobs = load_jobs(Inputs(trace=trace, trace_format="canonical", spec=spec,
                            zone=cfg["carbon.zone"]))
    log(f"simulating {args.trace.name} with {args.policy}")
    sim = simulated(trace, cfg, args.policy)
    log("live run on the local cluster")
    real = live(jobs, cfg, args)
    if not real["complete"]:
        msg = {"complete": False, "incomplete_jobs": real["incomplete"], "workdir": real["workdir"]}
        print(json.dumps(msg, indent=1) if args.json else
              f"live run incomplete: {real['incomplete']} (output in {real['workdir']})")
        return 1
    result = compare(jobs, sim, real)
    print(json.dumps(result, indent=1) if args.json else render(result))
    g = result["goals"]
    energy_ok = g["gpu_energy_met"] or args.policy == "slurm-default"
    return 0 if g["avg_jct_met"] and g["start_order_met"] and energy_ok else 1


if __name__ == "__main__":
    sys.exit(main())
