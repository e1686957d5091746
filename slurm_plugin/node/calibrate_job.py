"""The measurement job of ``wattctl calibrate-gpus``: one per GPU model, on one GPU of it.

    python -m slurm_plugin.node.calibrate_job --out DIR --deadline EPOCH_S

It reads its GPU through the node's own ``GpuSource`` (``node.gpu_source``: NVML on real
nodes, ``emulated`` on the local cluster) and measures, before ``--deadline``:

1. idle power: readings of the node's GPUs of its model that hold no job and show no
   utilisation (before its own load starts);
2. stepped load: each level of its load (``calibrate_load.py``: the job classes on emulated
   GPUs, a matmul loop at duty cycles 10-100 % on real ones), uncapped: mean utilisation and
   power over a window;
3. the settable range: the limit uncapped (the top) and the limit the board takes for a cap
   of 1 W (the bottom);
4. the fixed workload (the heaviest level below the limit) timed uncapped and under caps
   spread over that range (``cap=`` of the job's AdminComment, which the node's cap path
   applies: ``node/power_cap.py``);
5. the co-located pair, uncapped (``calibrate_pair.py``): one level's fixed workload alone,
   then as two copies sharing the GPU, time-sliced and through MPS, as long as the deadline
   leaves time.

Every change (class, cap) goes through the job's own AdminComment, so the job must run as a
Slurm administrator (root): on emulated GPUs that is what the GPU draws, on real ones what the
node's collector applies. It waits for each change to show in the readings, and refuses
readings of its GPU that show another job on it. The AdminComment is restored at the end.

Result: ``DIR/calibration-<job id>.json`` (written aside and renamed): ``node``,
``gpu_index``, ``job_id``, ``model``, ``mode``, the samples (``idle_w``, ``loads``,
``max_limit_w``, ``min_limit_w``, ``workload``, ``workload_time_s``, ``workload_power_w``,
``caps``, ``pair``), ``notes``, ``elapsed_s`` and ``error`` ("" when measured). Progress goes to
``DIR/phase-<job id>.txt``, one line, for the driver to show.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import CommandError, WattError
from ..model import GpuReading
from ..physics.calibrate_fit import CalibrationError, power_tolerance_w
from .calibrate_load import JobTag, Load
from .calibrate_pair import PAIR_ALLOWANCE, PAIR_RUNS, PAIR_SETTLES, measure_pair
from .emulated import is_emulated, job_gpu_indexes, job_node

CAP_LEVELS = 8           # caps tried from the lowest settable limit up (the top is uncapped)
PROBE_CAP_W = 1.0        # a cap below every board's range: the limit it gets is the bottom
SLOWDOWN_ALLOWANCE = 3.0  # a capped fixed run is planned as taking up to this many times T0


def result_path(out: Path, job_id: str) -> Path:
    return out / f"calibration-{job_id}.json"


def phase_path(out: Path, job_id: str) -> Path:
    return out / f"phase-{job_id}.txt"


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


@dataclass(frozen=True)
class Plan:
    window_s: float        # reading window per load level
    fixed_s: float         # the fixed workload's time uncapped
    settle_s: float        # two readings this far apart must agree after a change
    interval_s: float      # between readings
    settle_timeout_s: float


def make_plan(left_s: float, levels: int, emulated: bool) -> Plan:
    """Windows and workload length that end the job within ``left_s``: 70 % of it shared by
    the load levels, the ``CAP_LEVELS + 1`` fixed runs (planned at ``SLOWDOWN_ALLOWANCE``
    times their uncapped time) and the co-located pair's ``PAIR_RUNS`` (at ``PAIR_ALLOWANCE``
    times), the rest kept for settling and reading."""
    settle_s, interval_s, least_s = (0.0, 0.25, 1.0) if emulated else (2.0, 0.25, 3.0)
    spare_s = 0.7 * left_s - (levels + CAP_LEVELS + 3 + PAIR_SETTLES) * settle_s
    unit_s = spare_s / (levels + SLOWDOWN_ALLOWANCE * (CAP_LEVELS + 1)
                        + PAIR_ALLOWANCE * PAIR_RUNS)
    if unit_s < least_s:
        raise CalibrationError(f"{left_s:.0f} s left before the deadline: too little to "
                               f"calibrate ({levels} load levels, {CAP_LEVELS + 1} timed runs "
                               f"and the co-located pair's {PAIR_RUNS}); give more --minutes")
    return Plan(window_s=min(unit_s, 10.0), fixed_s=min(unit_s, 20.0), settle_s=settle_s,
                interval_s=interval_s, settle_timeout_s=max(10.0, 5 * settle_s))


class GpuReader:
    """The job's GPU through the node's ``GpuSource``: its reading (another job on it is an
    error), the idle GPUs of its model, readings once a change shows."""

    def __init__(self, source: Any, node: str, index: int, job_id: str, plan: Plan,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._source, self.key, self._job_id, self._plan = source, (node, index), job_id, plan
        self._clock, self._sleep = clock, sleep
        self.window: list[GpuReading] = []

    def read_all(self) -> tuple[GpuReading, list[GpuReading]]:
        readings = self._source.read()
        mine = next((r for r in readings if (r.node, r.index) == self.key), None)
        if mine is None and len(readings) == 1 and readings[0].node == self.key[0]:
            # a job's device cgroup shows NVML its own GPU only, numbered from 0
            mine = readings[0]
            self.key = (mine.node, mine.index)
        if mine is None:
            raise CalibrationError(f"GPU {self.key[0]}:{self.key[1]} is not among the GPUs "
                                   f"the node's source reads "
                                   f"({', '.join(f'{r.node}:{r.index}' for r in readings)})")
        others = [r.job_id for r in mine.residents if r.job_id != self._job_id]
        if others:
            raise CalibrationError(f"job {', '.join(others)} came onto GPU {self.key[0]}:"
                                   f"{self.key[1]} during the calibration: its readings are "
                                   "not the calibration's alone")
        return mine, readings

    def read(self) -> GpuReading:
        return self.read_all()[0]

    def tick(self) -> None:
        self.window.append(self.read())

    def idle_power_w(self, model: str, reads: int) -> list[float]:
        """Power of the node's GPUs of ``model`` with no job and no utilisation, ``reads``
        readings apart."""
        out = []
        for k in range(reads):
            _, readings = self.read_all()
            out += [r.power_w for r in readings
                    if r.model == model and not r.residents and r.util_pct == 0]
            if k < reads - 1:
                self._sleep(self._plan.interval_s)
        return out

    def settle(self, shows: Callable[[GpuReading], bool], what: str) -> GpuReading:
        """The first reading that ``shows`` the change and whose limit an earlier reading,
        ``settle_s`` before and showing it too, already had."""
        start = self._clock()
        held: tuple[GpuReading, float] | None = None
        while True:
            r, now = self.read(), self._clock()
            if not shows(r):
                held = None
            elif held is None or abs(held[0].power_limit_w - r.power_limit_w) >= 0.5:
                held = (r, now)
            elif now - held[1] >= self._plan.settle_s:
                return r
            if now - start > self._plan.settle_timeout_s:
                raise CalibrationError(f"GPU {self.key[0]}:{self.key[1]} did not show {what} "
                                       f"within {self._plan.settle_timeout_s:g} s (last "
                                       f"reading: {r.power_w:.1f} W, limit "
                                       f"{r.power_limit_w:g} W)")
            self._sleep(self._plan.interval_s)

    def take(self) -> list[GpuReading]:
        got, self.window = self.window, []
        return got


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def calibrate(reader: GpuReader, tag: JobTag, make_load: Callable[[], Load], plan: Plan,
              end_s: float, say: Callable[[str], None],
              clock: Callable[[], float] = time.monotonic) -> dict:
    """The samples of one calibration run (the result's fields but ``error``)."""
    started = clock()
    model = reader.read().model
    if not model:
        raise CalibrationError(f"GPU {reader.key[0]}:{reader.key[1]}: the node's source does "
                               "not name its model")
    say("idle readings")
    idle_w = reader.idle_power_w(model, reads=3)
    load = make_load()
    loads = []
    levels = load.levels()
    for k, level in enumerate(levels, 1):
        say(f"load {k}/{len(levels)}: {level}")
        load.apply(level)
        reader.settle(lambda r: load.is_on(r, level), f"load {level}")
        reader.take()
        load.hold(plan.window_s, reader.tick)
        got = reader.take()
        loads.append({"label": level, "util_pct": _mean([r.util_pct for r in got]),
                      "power_w": _mean([r.power_w for r in got]),
                      "power_limit_w": _mean([r.power_limit_w for r in got]),
                      "load_scale": load.load_scale(level)})
    max_limit_w = min(p["power_limit_w"] for p in loads)
    tol = power_tolerance_w(max_limit_w)
    below = [p for p in loads if p["power_w"] < p["power_limit_w"] - tol and p["util_pct"] > 0]
    if not below:
        raise CalibrationError(f"every load level drew its power limit {max_limit_w:g} W: no "
                               "workload below the limit to time under caps")
    workload = max(below, key=lambda p: p["power_w"])["label"]
    say(f"fixed workload {workload}, uncapped")
    load.apply(workload)
    reader.settle(lambda r: load.is_on(r, workload), f"load {workload}")
    time0_s, power0_w = _timed(load, reader)
    say("lowest power limit")
    tag.set_cap(PROBE_CAP_W)
    min_limit_w = reader.settle(lambda r: r.power_limit_w < max_limit_w - 0.5,
                                f"a power limit below the top {max_limit_w:g} W (a board "
                                "whose limit cannot be set)").power_limit_w
    caps, notes = [], []
    steps = sorted({round(min_limit_w + (max_limit_w - min_limit_w) * k / CAP_LEVELS)
                    for k in range(CAP_LEVELS)}, reverse=True)
    for k, cap_w in enumerate(steps, 1):
        if clock() + plan.settle_s + SLOWDOWN_ALLOWANCE * plan.fixed_s > end_s:
            notes.append(f"cap sweep cut short at {k - 1} of {len(steps)} limits by the "
                         "deadline")
            break
        say(f"cap {k}/{len(steps)}: {cap_w} W")
        tag.set_cap(cap_w)
        limit_w = reader.settle(lambda r: abs(r.power_limit_w - max(cap_w, min_limit_w))
                                < 1.0, f"the cap of {cap_w} W").power_limit_w
        time_s, power_w = _timed(load, reader)
        caps.append({"power_limit_w": limit_w, "time_s": time_s, "power_w": power_w})
    pair, pair_notes = measure_pair(reader, tag, load, loads, model, max_limit_w, plan, end_s,
                                    say, clock)
    return {"model": model, "mode": load.mode, "idle_w": idle_w, "loads": loads,
            "max_limit_w": max_limit_w, "min_limit_w": min_limit_w, "workload": workload,
            "workload_time_s": time0_s, "workload_power_w": power0_w, "caps": caps,
            "pair": pair, "notes": [*notes, *pair_notes],
            "elapsed_s": round(clock() - started, 1)}


def _timed(load: Load, reader: GpuReader) -> tuple[float, float]:
    """(time, mean power) of one fixed run, the GPU read while it runs."""
    reader.take()
    time_s = load.run_fixed(reader.tick)
    got = reader.take()
    return time_s, _mean([r.power_w for r in got])


def with_declared_app(admin_comment: str, app: str) -> str:
    """``admin_comment`` with its ``wb:`` word's ``declared_app=`` set to ``app``, that word
    first (where ``slurm/parse.py`` reads the job's class); every other word and key kept."""
    words = (admin_comment or "").split()
    at = next((k for k, w in enumerate(words) if w.startswith("wb:")), None)
    tag = words.pop(at) if at is not None else "wb:"
    items = [k for k in tag[3:].split(";") if k and not k.startswith("declared_app=")]
    return " ".join(["wb:" + ";".join([*items, f"declared_app={app}"]), *words])


class SlurmTag:
    """The job's AdminComment: its class (``declared_app=``) and power cap (``cap=``)."""

    def __init__(self, job_id: str, cfg: Any) -> None:
        from ..slurm import actions
        self._job_id, self._cfg, self._actions = job_id, cfg, actions
        original = actions.admin_comment_now(job_id, cfg)
        if original is None:
            raise CalibrationError(f"job {job_id} is not in squeue: it cannot change its "
                                   "own record")
        self.original = original

    def _update(self, change: Callable[[], None]) -> None:
        try:
            change()
        except CommandError as exc:
            raise CalibrationError(f"job {self._job_id} cannot change its own AdminComment "
                                   f"({exc.stderr.strip() or exc}): run wattctl calibrate-gpus "
                                   "as root or a Slurm administrator") from None

    def _set(self, text: str) -> None:
        from ..slurm.cli import slurm
        self._update(lambda: slurm("scontrol", ["update", f"jobid={self._job_id}",
                                                f"AdminComment={text}"], self._cfg))

    def set_app(self, app: str) -> None:
        now = self._actions.admin_comment_now(self._job_id, self._cfg) or ""
        self._set(with_declared_app(now, app))

    def set_cap(self, power_cap_w: float | None) -> None:
        self._update(lambda: self._actions.set_power_cap(self._job_id, power_cap_w, self._cfg))

    def restore(self) -> None:
        self._set(self.original)


def make_load_factory(cfg: Any, tag: JobTag, job_id: str, gpus: int, plan: Plan
                      ) -> Callable[[], Load]:
    """The load of this node's GPUs: emulated classes, else a matmul loop (torch)."""
    from .calibrate_load import EmulatedLoad, TorchLoad
    if is_emulated(cfg["node.gpu_source"]):
        from .emulated import slowdown_path
        return lambda: EmulatedLoad(tag, job_id, gpus, slowdown_path(cfg["node.state_dir"],
                                                                     job_id),
                                    plan.fixed_s, plan.interval_s)

    def real() -> Load:
        from .gpu_bench import _torch
        torch, why = _torch()
        if torch is None:
            raise CalibrationError(f"{why}: the load on a real GPU is a PyTorch matmul loop")
        return TorchLoad(torch, plan.fixed_s, plan.interval_s)
    return real


def run_job(out: Path, deadline_s: float, environ: Mapping[str, str]) -> dict:
    """Measure this job's GPU; the result dict (``error`` says why when it could not)."""
    from .. import config
    from .source import make_source
    started_s = time.time()
    node, indexes = job_node(environ), job_gpu_indexes(environ)
    job_id = environ.get("SLURM_JOB_ID", "")
    result: dict = {"node": node, "gpu_index": indexes[0] if indexes else None,
                    "job_id": job_id, "error": ""}

    def say(line: str) -> None:
        write_atomic(phase_path(out, job_id), line + "\n")

    try:
        if not job_id:
            raise CalibrationError("SLURM_JOB_ID is not set: run under Slurm (wattctl "
                                   "calibrate-gpus submits it)")
        if not indexes:
            raise CalibrationError("the job holds no GPU (SLURM_JOB_GPUS, SLURM_STEP_GPUS "
                                   "and GPU_DEVICE_ORDINAL are empty): no GPU to calibrate")
        # the caps the job sets reach an NVML board within a second, not the collector's
        # refresh (the emulated source reads Slurm at every reading anyway)
        cfg = config.load().with_overrides({"node.cap_refresh_s": 1.0}, "calibrate_job")
        emulated = is_emulated(cfg["node.gpu_source"])
        left_s = deadline_s - started_s
        from ..physics import class_names
        from .calibrate_load import TorchLoad
        levels = len(class_names()) if emulated else len(TorchLoad.DUTIES_PCT)
        plan = make_plan(left_s, levels, emulated)
        source = make_source(cfg["node.gpu_source"], node, cfg)
        reader = GpuReader(source, node, indexes[0], job_id, plan)
        tag = SlurmTag(job_id, cfg)
        try:
            result.update(calibrate(reader, tag, make_load_factory(cfg, tag, job_id,
                                                                   len(indexes), plan),
                                    plan, time.monotonic() + left_s, say))
        finally:
            tag.restore()
    except WattError as exc:
        result["error"] = str(exc)
    except Exception as exc:      # the driver gets the reason, whatever it was
        result["error"] = f"{type(exc).__name__}: {exc}"
    say("done" if not result["error"] else f"failed: {result['error']}")
    write_atomic(result_path(out, job_id or "unknown"), json.dumps(result, sort_keys=True))
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="calibrate_job", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--deadline", required=True, type=float,
                    help="epoch seconds by which the job must have written its result")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    result = run_job(args.out, args.deadline, os.environ)
    print(f"calibrate_job: {result['node']}:{result['gpu_index']} "
          f"{result.get('model', '')} {result['error'] or 'measured'}")
    return 0 if not result["error"] else 1


if __name__ == "__main__":
    sys.exit(main())
