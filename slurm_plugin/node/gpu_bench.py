"""The benchmark job of ``wattctl profile-gpus run``: times a short workload on each GPU the job
holds and writes one result file per GPU.

    python -m slurm_plugin.node.gpu_bench --out DIR [--app resnet] [--runs 3] [--steps 5]
        [--step-s 0.2] [--emulated]

Which GPUs: ``SLURM_JOB_GPUS`` (else ``SLURM_STEP_GPUS``, ``GPU_DEVICE_ORDINAL``), on the node
``SLURMD_NODENAME``. Per GPU and application, ``--runs`` timed runs of ``--steps`` steps:

- a real GPU (torch with CUDA importable): a half-precision 4096x4096 matmul chain per step,
  synchronised, after one warm-up step; the GPU's uuid from torch, else ``nvidia-smi``;
- an emulated GPU (``--emulated``, or the site's ``node.gpu_source = "emulated"``): each step
  takes ``--step-s`` times the GPU's factor for the application's PAL class in
  ``node.emulated_variability`` (the job sleeps to absolute deadlines, so sleep overshoots do
  not add up); the uuid is the profile's;
- neither (no torch, no CUDA): the result says why and holds no runs.

Result: ``DIR/result-<node>-<index>.json`` (written aside and renamed): ``node``, ``gpu_index``,
``uuid``, ``mode`` (``cuda``, ``emulated``), ``runs`` (app -> run times in seconds), ``error``
("" when measured), ``job_id``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Mapping

from .. import proc
from ..errors import CommandError
from ..physics.gpu_profile import APP_CLASSES
from .emulated import emulated_gpus, is_emulated, job_gpu_indexes, job_node


def result_path(out: Path, node: str, index: int) -> Path:
    return out / f"result-{node}-{index}.json"


def write_result(out: Path, result: dict) -> Path:
    path = result_path(out, result["node"], result["gpu_index"])
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(result, sort_keys=True))
    os.replace(tmp, path)
    return path


def emulated_runs(factor: float, runs: int, steps: int, step_s: float,
                  clock=time.monotonic, sleep=time.sleep) -> list[float]:
    """Run times of ``runs`` runs of ``steps`` steps of ``step_s * factor`` each."""
    out = []
    for _ in range(runs):
        start = clock()
        for k in range(1, steps + 1):
            left = start + k * step_s * factor - clock()
            if left > 0:
                sleep(left)
        out.append(clock() - start)
    return out


def _torch():
    try:
        import torch  # type: ignore[import-not-found]
    except ImportError:
        return None, "torch is not installed: no CUDA benchmark (pip install torch)"
    if not torch.cuda.is_available():
        return None, "torch finds no CUDA device"
    return torch, ""


def cuda_uuid(torch, ordinal: int) -> str:
    try:
        u = torch.cuda.get_device_properties(ordinal).uuid
        text = str(u)
        return text if text.startswith("GPU-") else f"GPU-{text}"
    except Exception:
        pass
    try:
        out = proc.run(["nvidia-smi", f"--id={ordinal}", "--query-gpu=uuid",
                        "--format=csv,noheader"], timeout_s=30).stdout.strip()
        return out.splitlines()[0] if out else ""
    except (OSError, CommandError):
        return ""


def cuda_runs(torch, ordinal: int, runs: int, steps: int, size: int = 4096) -> list[float]:
    """Run times of ``runs`` runs of ``steps`` chained matmuls on CUDA device ``ordinal``."""
    dev = torch.device(f"cuda:{ordinal}")
    a = torch.randn(size, size, device=dev, dtype=torch.float16)
    b = torch.randn(size, size, device=dev, dtype=torch.float16)
    c = a @ b                                   # warm-up
    torch.cuda.synchronize(dev)
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(steps * 10):
            c = (c @ b) * 1e-3
        torch.cuda.synchronize(dev)
        out.append(time.perf_counter() - start)
    return out


def bench(out: Path, apps: list[str], runs: int, steps: int, step_s: float, emulated: bool,
          variability: str, environ: Mapping[str, str]) -> list[dict]:
    node = job_node(environ)
    indexes = job_gpu_indexes(environ)
    job_id = environ.get("SLURM_JOB_ID", "")
    results = []
    if not indexes:
        print("gpu_bench: no GPU in SLURM_JOB_GPUS/SLURM_STEP_GPUS: nothing to measure",
              file=sys.stderr)
        return results
    torch, why = (None, "") if emulated else _torch()
    table = emulated_gpus(variability) if emulated else {}
    for ordinal, index in enumerate(indexes):
        res = {"node": node, "gpu_index": index, "uuid": "", "job_id": job_id,
               "mode": "emulated" if emulated else "cuda", "runs": {}, "error": ""}
        try:
            if emulated:
                uuid, factors = table.get((node, index), ("", (1.0, 1.0, 1.0, 1.0)))
                res["uuid"] = uuid or f"emulated-{node}-{index}"
                for app in apps:
                    ci = "ABCD".index(APP_CLASSES[app][0])
                    res["runs"][app] = emulated_runs(factors[ci], runs, steps, step_s)
            elif torch is None:
                res["error"] = why
            else:
                res["uuid"] = cuda_uuid(torch, ordinal)
                for app in apps:
                    res["runs"][app] = cuda_runs(torch, ordinal, runs, steps)
        except Exception as exc:       # one GPU's failure is reported, the others still run
            res["error"] = f"{type(exc).__name__}: {exc}"
        write_result(out, res)
        results.append(res)
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpu_bench", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--app", action="append", choices=sorted(APP_CLASSES), default=None)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--step-s", type=float, default=0.2)
    ap.add_argument("--emulated", action="store_true")
    args = ap.parse_args(argv)
    variability = ""
    emulated = args.emulated
    try:
        from .. import config
        cfg = config.load()
        emulated = emulated or is_emulated(cfg["node.gpu_source"])
        variability = cfg["node.emulated_variability"] if emulated else ""
    except Exception as exc:   # no site config: a real GPU needs none
        if emulated:
            print(f"gpu_bench: site config: {exc}", file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    results = bench(args.out, args.app or ["resnet"], args.runs, args.steps, args.step_s,
                    emulated, variability, os.environ)
    for r in results:
        print(f"gpu_bench: {r['node']}:{r['gpu_index']} {r['uuid']} "
              f"{r['error'] or json.dumps(r['runs'])}")
    return 0 if results and not any(r["error"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
