"""The co-located pair of a calibration job (``calibrate_job.py``), after its cap sweep.

With the cap lifted, the fixed workload of one load level (``Load.pair_level``) is timed alone,
then as two copies sharing the job's GPU, time-sliced and then through MPS (``measure_pair``):
each mode's time over the time alone is the pair's slowdown, which the driver fits
(``physics/calibrate_pairs.py``: ``interference_k``, the level's measured pair,
``interference_k_mps``). The pair's runs have their share of the job's plan
(``calibrate_job.make_plan``); a run with no time left before the deadline, or a mode the node
cannot run (no MPS), is left out with a note and never fails the rest.

- Emulated GPUs (``calibrate_load.EmulatedLoad``): the job declares the pair as its app
  (``emulated.pair_app``); the emulated source computes it as two co-located jobs of that
  class and writes the job their slowdown, which its fixed workload takes.
- Real GPUs (``calibrate_load.TorchLoad``): each copy is a process of the matmul loop
  (``python -m slurm_plugin.node.calibrate_pair``, ``copy_main``): it warms up, says it is
  ready, waits for the go, times the fixed workload's matmuls and writes its time; a run is
  one copy (alone) or two started together (``run_copies``). Through MPS the job starts its own
  MPS control daemon with private ``CUDA_MPS_PIPE_DIRECTORY`` and ``CUDA_MPS_LOG_DIRECTORY``
  under its temporary directory (``$TMPDIR``) and stops it after. Written carefully but not
  run on hardware: a node whose GPU already has an MPS server (Slurm's ``gres/mps``) or whose
  compute mode refuses a second server gives a note, not a pair.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from ..errors import CommandError
from ..physics.calibrate_pairs import MAX_PAIR_SLOWDOWN
from ..physics.colocation import MODES

PAIR_ALLOWANCE = 3.0     # a run of the pair phase is planned as taking up to this times alone
PAIR_RUNS = 1 + len(MODES)          # alone, then each mode
PAIR_SETTLES = 1 + PAIR_RUNS        # the cap lifted, then each run's load
READY_TIMEOUT_S = 60.0   # real GPUs: the copies' CUDA start (and the MPS server's)
POLL_S = 0.005           # a copy's wait for the go


class PairUnavailable(Exception):
    """A mode of the pair that this node cannot run (said in a note, not an error)."""


def measure_pair(reader: Any, tag: Any, load: Any, loads: list[dict], model: str,
                 max_limit_w: float, plan: Any, end_s: float, say: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic) -> tuple[list[dict], list[str]]:
    """(samples, notes) of the pair phase: per mode measured, ``mode``, ``level``,
    ``util_pct`` (the level's solo utilisation, from ``loads``), ``solo_time_s`` and
    ``pair_time_s``."""
    label = load.pair_level(model, [p["label"] for p in loads])
    if label is None:
        return [], ["co-located pair not measured: no load level to pair on this model"]
    util_pct = next(p["util_pct"] for p in loads if p["label"] == label)
    tag.set_cap(None)
    reader.settle(lambda r: r.power_limit_w >= max_limit_w - 0.5,
                  f"its cap lifted (the top limit {max_limit_w:g} W)")
    samples: list[dict] = []
    notes: list[str] = []
    solo_s: float | None = None
    for mode in (None, *MODES):
        what = "alone" if mode is None else f"as a {mode} pair"
        if clock() + plan.settle_s + PAIR_ALLOWANCE * plan.fixed_s > end_s:
            left = [m for m in MODES if not any(s["mode"] == m for s in samples)]
            notes.append(f"co-located pair cut short by the deadline before {label} {what}: "
                         f"{', '.join(left)} not measured")
            break
        say(f"pair: {label} {what}")
        level = load.pair(label, mode)
        try:
            load.apply(level)
            reader.settle(lambda r: load.is_on(r, level), f"load {level}")
            reader.take()
            time_s = load.run_fixed(reader.tick)
            reader.take()
        except PairUnavailable as exc:
            notes.append(f"the co-located pair of {label} {what} not measured: {exc}")
            if mode is None:
                break
            continue
        if mode is None:
            solo_s = time_s
        else:
            samples.append({"mode": mode, "level": label, "util_pct": util_pct,
                            "solo_time_s": solo_s, "pair_time_s": time_s})
    return samples, notes


# --- real GPUs: copies of the matmul loop in their own processes ----------------------------

def run_copies(copies: int, iterations: int, size: int, mode: str | None, fixed_s: float,
               tick: Callable[[], None], interval_s: float,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> float:
    """The mean of ``copies`` processes' times of ``iterations`` matmuls (about ``fixed_s``
    alone), started together (``mode`` "mps": through an MPS daemon of their own), reading the
    GPU with ``tick`` while they run; ``PairUnavailable`` when they cannot run or finish."""
    from .. import proc
    work = Path(tempfile.mkdtemp(prefix="wattbatch-pair-"))
    children: list = []
    env: dict[str, str] = {}
    try:
        if mode == "mps":
            env = {"CUDA_MPS_PIPE_DIRECTORY": str(work / "mps-pipe"),
                   "CUDA_MPS_LOG_DIRECTORY": str(work / "mps-log")}
            start_mps(env, work)
        for k in range(copies):
            children.append(proc.start(
                [sys.executable, "-m", "slurm_plugin.node.calibrate_pair", "--iterations",
                 str(iterations), "--size", str(size), "--ready", str(work / f"ready-{k}"),
                 "--go", str(work / "go"), "--out", str(work / f"time-{k}")],
                log_path=str(work / f"copy-{k}.log"), env=env))
        _wait(lambda: all((work / f"ready-{k}").exists() for k in range(copies)), children,
              work, READY_TIMEOUT_S, "ready", tick=None, interval_s=POLL_S * 20, clock=clock,
              sleep=sleep)
        (work / "go").write_text("go\n")
        limit_s = (MAX_PAIR_SLOWDOWN + 1) * fixed_s
        _wait(lambda: all(c.poll() is not None for c in children), children, work, limit_s,
              "finished", tick=tick, interval_s=interval_s, clock=clock, sleep=sleep)
        _check_exits(children, work)
        times = [float((work / f"time-{k}").read_text()) for k in range(copies)]
        return sum(times) / len(times)
    finally:
        for c in children:
            proc.stop(c)
        if env:
            stop_mps(env)
        shutil.rmtree(work, ignore_errors=True)


def _wait(done: Callable[[], bool], children: list, work: Path, limit_s: float, what: str,
          tick: Callable[[], None] | None, interval_s: float, clock: Callable[[], float],
          sleep: Callable[[float], None]) -> None:
    """Until ``done()``; ``PairUnavailable`` after ``limit_s``, or when a copy exits with an
    error first."""
    start = clock()
    while not done():
        _check_exits(children, work)
        if clock() - start > limit_s:
            raise PairUnavailable(f"the copies were not {what} within {limit_s:.0f} s")
        if tick is not None:
            tick()
        sleep(interval_s)


def _check_exits(children: list, work: Path) -> None:
    for k, c in enumerate(children):
        if c.poll() not in (None, 0):
            raise PairUnavailable(f"copy {k} exited {c.returncode}: "
                                  + _tail(work / f"copy-{k}.log"))


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no output)"
    return lines[-1][:200] if lines else "(no output)"


def start_mps(env: dict[str, str], work: Path) -> None:
    """Start an MPS control daemon of this job's own, its pipe and log directories those of
    ``env`` (made here); ``PairUnavailable`` when it does not start (``stop_mps`` after it
    either way)."""
    from .. import proc
    for d in env.values():
        Path(d).mkdir()
    try:
        # started with its output to a file: the daemon it forks keeps no pipe of ours open
        launcher = proc.start(["nvidia-cuda-mps-control", "-d"],
                              log_path=str(work / "mps-control.log"), env=env)
    except CommandError as exc:
        raise PairUnavailable(f"MPS is not available here ({exc})") from None
    status = proc.wait(launcher, READY_TIMEOUT_S)
    if status is None:
        proc.stop(launcher)
        raise PairUnavailable("nvidia-cuda-mps-control -d did not return within "
                              f"{READY_TIMEOUT_S:g} s") from None
    if status != 0:
        raise PairUnavailable(f"nvidia-cuda-mps-control -d exited {status}: "
                              + _tail(work / "mps-control.log"))


def stop_mps(env: dict[str, str]) -> None:
    """Ask the daemon of ``env`` (``start_mps``), if it runs, to quit; it stops its server
    with it."""
    from .. import proc
    try:
        proc.run(["nvidia-cuda-mps-control"], input_text="quit\n", env=env, timeout_s=30,
                 check=False)
    except CommandError:        # not installed (no daemon started), or it did not answer
        pass


def copy_main(iterations: int, size: int, ready: Path, go: Path, out: Path) -> None:
    """One copy: the matmul loop of ``calibrate_load.TorchLoad`` on CUDA device 0 (the job's
    GPU), warmed up, then ``iterations`` matmuls timed from the go; the time to ``out``."""
    import torch  # type: ignore[import-not-found]
    dev = torch.device("cuda:0")
    a = torch.randn(size, size, device=dev, dtype=torch.float16)
    b = torch.randn(size, size, device=dev, dtype=torch.float16)
    a = (a @ b) * 1e-3
    torch.cuda.synchronize()
    ready.write_text("ready\n")
    while not go.exists():
        time.sleep(POLL_S)
    start = time.monotonic()
    for _ in range(iterations):
        a = (a @ b) * 1e-3
        torch.cuda.synchronize()
    elapsed_s = time.monotonic() - start
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(f"{elapsed_s}\n")
    tmp.replace(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="calibrate_pair", description="one copy of the "
                                 "calibration's co-located pair (run by calibrate_job)")
    ap.add_argument("--iterations", required=True, type=int)
    ap.add_argument("--size", required=True, type=int)
    ap.add_argument("--ready", required=True, type=Path)
    ap.add_argument("--go", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args(argv)
    copy_main(args.iterations, args.size, args.ready, args.go, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
