#!/usr/bin/env python3
"""An emulated training job: sleeps per step instead of using a GPU, reports progress.

    python3 -m slurm_plugin.emulated_train --steps 200 --step-s 0.1 --steps-per-epoch 50 \\
        --checkpoint ckpt.json [--samples-per-step 64] [--slowdown-file FILE]

- Each step sleeps ``--step-s`` times the current slowdown factor, then reports progress
  (``slurm_plugin.progress.report_progress``, job id from ``$SLURM_JOB_ID``). A failure to
  report never stops training: it is warned about once on stderr.
- At every epoch boundary the step is checkpointed (atomically) to ``--checkpoint``; a run
  that finds the file resumes from it (after a requeue, say).
- SIGTERM (``scancel``, ``scontrol requeue``) checkpoints the current step and exits 143;
  with ``--ignore-sigterm`` the program goes on until Slurm kills it (a program that never
  checkpoints on request: its next run resumes from the last epoch's checkpoint).
  ``--checkpoint-s`` makes each checkpoint take that long (a kill in the middle leaves the
  previous checkpoint as it was: the new one is written aside and renamed).
- ``--gpu-scaling EXP``: a step takes ``--step-s / n**EXP`` on the job's n GPUs
  (``SLURM_GPUS_ON_NODE`` or ``CUDA_VISIBLE_DEVICES`` per node, times ``SLURM_JOB_NUM_NODES``),
  so an elastic job runs faster when it is given more GPUs (0, the default: it does not).
- ``--batch-size B``: the job runs at global batch B (a step of ``--step-s`` and
  ``--samples-per-step`` describe batch B) and follows the scheduler's advice: each progress
  report carries its batch and returns the advice (``report_progress(..., batch_size=)``);
  a new batch takes effect at the next step, without a restart (``emulated_train: batch
  B0 -> B1 (lr x S) at step N``). At batch b a step takes ``step_s * (b / B) ** 0.5`` and
  processes b samples (a bigger batch, more throughput, fewer steps' worth of work is not
  modelled: the step count stays). A run started with ``$WATTBATCH_BATCH_SIZE`` (the advice
  handed to a restarted job) starts at that batch. Without ``--batch-size`` no advice is asked.
- Slowdown hook (for co-location interference): before each step the factor (>= 1.0) is read
  from ``--slowdown-file`` if given and present, else from ``$WATTBATCH_SLOWDOWN``, else 1.0.
  The file holds one number; whoever models the interference rewrites it while the job runs.
- GPU speed (PAL's variability): under Slurm with the site's ``node.emulated_variability``,
  a job started with ``--app`` takes, every step, the factor of its slowest GPU
  (``SLURM_JOB_GPUS`` on ``SLURMD_NODENAME``) for that workload's PAL class; the factor is
  printed at the start. Without ``--app`` the job names no class and runs at 1.0.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

try:
    from slurm_plugin.progress import report_progress
except ImportError:                     # the package is not installed: train without reporting
    report_progress = None


def read_checkpoint(path: Path) -> int:
    try:
        return int(json.loads(path.read_text())["step"])
    except FileNotFoundError:
        return 0
    except (ValueError, KeyError, TypeError) as exc:
        sys.exit(f"emulated_train: checkpoint {path}: unreadable ({exc}); delete it to restart")


def write_checkpoint(path: Path, step: int, duration_s: float = 0.0) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"step": step, "time_s": time.time()}))
    if duration_s > 0:
        time.sleep(duration_s)
    os.replace(tmp, path)


def job_gpus(environ: dict[str, str]) -> int:
    """How many GPUs the job holds under Slurm (1 outside Slurm or when it cannot tell)."""
    per_node = environ.get("SLURM_GPUS_ON_NODE", "")
    if not per_node.isdigit():
        visible = environ.get("CUDA_VISIBLE_DEVICES", "")
        per_node = str(len([d for d in visible.split(",") if d.strip()]))
    nodes = environ.get("SLURM_JOB_NUM_NODES", environ.get("SLURM_NNODES", "1"))
    count = int(per_node) * (int(nodes) if nodes.isdigit() else 1)
    return max(1, count)


def slowdown(path: Path | None) -> float:
    """The interference slowdown factor in force now (>= 1.0)."""
    text = None
    if path is not None:
        try:
            text = path.read_text().strip()
        except OSError:
            text = None
    text = text or os.environ.get("WATTBATCH_SLOWDOWN", "")
    try:
        return max(1.0, float(text)) if text else 1.0
    except ValueError:
        return 1.0


class Reporter:
    """Calls report_progress; warns once on the first failure and carries on. After a
    failure it skips reports for ``RETRY_S`` so an unreachable store cannot slow training."""

    RETRY_S = 30.0

    def __init__(self) -> None:
        self.retry_at = 0.0
        self.warned = report_progress is None
        if report_progress is None:
            print("emulated_train: warning: slurm_plugin not importable; no progress reports",
                  file=sys.stderr)

    def __call__(self, **kw: object) -> object:
        """The advice ``report_progress`` returned (None: none, or not reported)."""
        if report_progress is None or time.monotonic() < self.retry_at:
            return None
        try:
            return report_progress(**kw)
        except Exception as exc:  # noqa: BLE001 - reporting must never kill training
            self.retry_at = time.monotonic() + self.RETRY_S
            if not self.warned:
                self.warned = True
                print(f"emulated_train: warning: progress not reported ({exc}); training goes "
                      "on, further failures are not shown", file=sys.stderr, flush=True)
            return None


def start_batch(asked: int | None, handed: str) -> int | None:
    """The batch a run starts at: the advice handed to it (``$WATTBATCH_BATCH_SIZE``) when it
    follows advice at all (``--batch-size``), else ``--batch-size``."""
    if asked is None:
        return None
    return int(handed) if handed.strip().isdigit() and int(handed) >= 1 else asked


def batch_factor(batch: int | None, ref: int | None) -> float:
    """A step's time at ``batch`` over its time at ``ref`` (square root: a bigger batch
    processes more samples per second)."""
    if batch is None or not ref:
        return 1.0
    return (batch / ref) ** 0.5


def default_slowdown_file() -> Path | None:
    """Under Slurm, ``<node.state_dir>/emulated/slowdown-$SLURM_JOB_ID`` (see node/emulated.py)."""
    job_id = os.environ.get("SLURM_JOB_ID")
    if not job_id:
        return None
    try:
        from slurm_plugin.config import load
        from slurm_plugin.node.emulated import slowdown_path

        return slowdown_path(load()["node.state_dir"], job_id)
    except Exception as exc:          # training never stops for want of the emulation
        print(f"emulated_train: warning: no slowdown file ({exc}); running unslowed",
              file=sys.stderr, flush=True)
        return None


def gpu_speed_factor(app: str, environ: dict[str, str]) -> float:
    """The time multiplier of this job's GPUs under the emulation (1.0 outside Slurm, without
    ``node.emulated_variability``, or when the GPUs are not known)."""
    if not environ.get("SLURM_JOB_ID"):
        return 1.0
    try:
        from slurm_plugin.config import load
        from slurm_plugin.node.emulated import (is_emulated, job_gpu_indexes, job_node,
                                                variability_factor)
        from slurm_plugin.physics import job_class

        cfg = load()
        path = cfg["node.emulated_variability"]
        if not is_emulated(cfg["node.gpu_source"]) or not path:
            return 1.0
        return variability_factor(path, job_node(environ), job_gpu_indexes(environ),
                                  job_class(app).variability_class)
    except Exception as exc:          # training never stops for want of the emulation
        print(f"emulated_train: warning: no GPU speed factor ({exc}); running at 1.0",
              file=sys.stderr, flush=True)
        return 1.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, required=True, help="total steps")
    ap.add_argument("--step-s", type=float, default=0.1, help="seconds per step alone")
    ap.add_argument("--steps-per-epoch", type=int, default=10)
    ap.add_argument("--checkpoint", type=Path, required=True, help="checkpoint file (JSON)")
    ap.add_argument("--samples-per-step", type=int, default=32)
    ap.add_argument("--gpu-scaling", type=float, default=0.0,
                    help="a step takes STEP_S / n**EXP on the job's n GPUs (default 0)")
    ap.add_argument("--ignore-sigterm", action="store_true",
                    help="do not checkpoint or stop on SIGTERM (Slurm kills it later)")
    ap.add_argument("--checkpoint-s", type=float, default=0.0,
                    help="seconds each checkpoint takes to write (default 0)")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="global batch the step time describes; follow the scheduler's advice")
    ap.add_argument("--slowdown-file", type=Path, default=None,
                    help="file holding the current slowdown factor (>= 1.0); default under "
                    "Slurm: the one the emulated GPU collector writes for this job")
    ap.add_argument("--app", default="",
                    help="workload class (resnet18, bert, ...): its PAL class picks the GPU "
                    "speed factor of node.emulated_variability (default: none, 1.0)")
    args = ap.parse_args(argv)
    if args.slowdown_file is None:
        args.slowdown_file = default_slowdown_file()
    if args.steps < 1 or args.steps_per_epoch < 1 or args.step_s < 0:
        ap.error("--steps and --steps-per-epoch must be >= 1 and --step-s >= 0")
    if not 0 <= args.gpu_scaling <= 2 or args.checkpoint_s < 0:
        ap.error("--gpu-scaling must be within 0..2 and --checkpoint-s >= 0")
    if args.batch_size is not None and args.batch_size < 1:
        ap.error("--batch-size must be >= 1")
    gpus = job_gpus(dict(os.environ))
    speed = gpu_speed_factor(args.app, dict(os.environ)) if args.app else 1.0
    step_s = args.step_s / gpus ** args.gpu_scaling * speed
    batch = start_batch(args.batch_size, os.environ.get("WATTBATCH_BATCH_SIZE", ""))

    step = read_checkpoint(args.checkpoint)
    print(f"emulated_train: starting at step {step} of {args.steps} on {gpus} GPUs "
          f"(GPU speed factor {speed:.4f})"
          + (f" at batch {batch}" if batch is not None else ""), flush=True)
    state = {"step": step}

    def on_term(signum: int, frame: object) -> None:
        if args.ignore_sigterm:
            print(f"emulated_train: SIGTERM ignored at step {state['step']}", flush=True)
            return
        write_checkpoint(args.checkpoint, state["step"], args.checkpoint_s)
        print(f"emulated_train: SIGTERM: checkpointed step {state['step']}, exiting", flush=True)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    report = Reporter()
    while state["step"] < args.steps:
        t0 = time.monotonic()
        time.sleep(step_s * batch_factor(batch, args.batch_size) * slowdown(args.slowdown_file))
        state["step"] += 1
        step = state["step"]
        elapsed = max(time.monotonic() - t0, 1e-9)
        samples = args.samples_per_step if batch is None else batch
        kw = {} if batch is None else {"batch_size": batch}
        advice = report(step=step, samples_per_s=samples / elapsed,
                        epoch=step // args.steps_per_epoch, steps_per_epoch=args.steps_per_epoch,
                        total_steps=args.steps, **kw)
        new = getattr(advice, "batch_size", None)
        if batch is not None and isinstance(new, int) and new >= 1 and new != batch:
            print(f"emulated_train: batch {batch} -> {new} (lr x "
                  f"{getattr(advice, 'lr_scale', 1.0):.4g}) at step {step}", flush=True)
            batch = new
        if step % args.steps_per_epoch == 0 or step == args.steps:
            write_checkpoint(args.checkpoint, step, args.checkpoint_s)
    print(f"emulated_train: done, {state['step']} steps", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
