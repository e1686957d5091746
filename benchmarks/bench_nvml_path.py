"""Per-job GPU energy through the collector's NVML path, and its pass time; no GPU needed.

    .venv/bin/python benchmarks/bench_nvml_path.py [--data-dir tests/data/nvml] [--passes 200]
        [--json]

Split: every replay file of ``--data-dir`` (``tests/data/nvml/``: 2, 3 and 4 jobs on one H100,
time-sliced and under MPS, and one in MIG mode, synthesised from the emulated physics by
``scripts/synth_nvml_traces.py``) runs through the real NVML wrapper, the collector's NVML
source and the ledger (replay -> Nvml -> NvmlSource -> Ledger/split). Each job's charged
energy is compared with its true energy: the worst and mean per-job error, and the error of
their sum. Again with Slurm not answering (no class, no shares: the ``no class`` column).
Pass time: 8 H100s with 12 jobs (whole GPUs, time-sliced and MPS), synthesised the same way,
read through the same path with the ledger files and the line protocol; median and p95 per
pass, and of the NVML read alone. Goal: median <= 50 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))      # the checkout's package, not an installed copy
from slurm_plugin.node.collector import gpu_point  # noqa: E402
from slurm_plugin.node.ledger import Ledger, job_file  # noqa: E402
from slurm_plugin.node.nvml_replay import NvmlReplay, replay_source  # noqa: E402
from slurm_plugin.node.nvml_synth import node_of_8, synthesise  # noqa: E402

from benchmarks._common import goal, input_dir, input_errors, num, positive_int  # noqa: E402

GOAL_PASS_S = 0.050


def charged(replay: NvmlReplay) -> dict[str, dict]:
    """Each job's ledger entry on the replay's node after every pass went through the path."""
    source = replay_source(replay, warn=lambda line: None)
    with tempfile.TemporaryDirectory() as d:
        book = Ledger(d, None, "V100", intensity=lambda t_s: 250.0)
        for _ in replay.passes():
            book.update(source.read())
        return {j: json.loads(job_file(d, j).read_text())["nodes"][replay.node]
                for j in replay.truth_j if job_file(d, j).exists()}


def errors(replay: NvmlReplay) -> dict:
    """Per-job relative error of the charged energy against the truth, and of their sum."""
    got = charged(replay)
    per_job = {j: got.get(j, {}).get("energy_j", 0.0) / t - 1 for j, t in replay.truth_j.items()}
    total = sum(e.get("energy_j", 0.0) for e in got.values())
    return {"max_abs": max(abs(e) for e in per_job.values()),
            "mean_abs": statistics.mean(abs(e) for e in per_job.values()),
            "sum": total / sum(replay.truth_j.values()) - 1, "per_job": per_job,
            "splits": sorted({m for e in got.values() for m in e.get("method_j", {})})}


def split_figures(docs: list[tuple[Path, dict]]) -> dict[str, dict]:
    out = {}
    for path, doc in docs:
        res = errors(NvmlReplay(doc, str(path)))
        res["no_class"] = errors(NvmlReplay({**doc, "jobs": {}}, str(path)))["max_abs"]
        res["what"] = doc.get("provenance", "").split(": ", 1)[-1].split("; ", 1)[0]
        out[path.stem] = res
    return out


def replay_docs(ap: argparse.ArgumentParser, folder: Path) -> list[tuple[Path, dict]]:
    """The replay files of ``folder`` that hold true per-job energy; a file that is not JSON
    is an error."""
    docs = []
    for path in sorted(folder.glob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            ap.error(f"--data-dir: {path}: not a replay file ({exc})")
        if isinstance(doc, dict) and doc.get("truth_j"):
            docs.append((path, doc))
    if not docs:
        ap.error(f"--data-dir {folder}: no replay file with true energy (truth_j) in it; give "
                 "tests/data/nvml or write one with scripts/synth_nvml_traces.py")
    return docs


def pass_times(passes: int) -> tuple[list[float], list[float]]:
    """Seconds per collector pass over 8 GPUs and 12 jobs on the NVML path, and of each its
    NVML part (readings and residents)."""
    replay = NvmlReplay(synthesise(node_of_8(2.0 * passes), duration_s=2.0 * passes,
                                   provenance="bench_nvml_path: 8 GPUs"))
    source = replay_source(replay, warn=lambda line: None)
    times, reads = [], []
    with tempfile.TemporaryDirectory() as d:
        book = Ledger(d, None, "V100", intensity=lambda t_s: 250.0)
        for _ in replay.passes():
            t0 = time.perf_counter()
            readings = source.read()
            t1 = time.perf_counter()
            book.update(readings)
            "".join(gpu_point(r, "c").to_line() for r in readings)
            times.append(time.perf_counter() - t0)
            reads.append(t1 - t0)
    return times[1:], reads[1:]     # the first pass reads each board's model, charges nothing


def _p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20)[-1] if len(xs) >= 2 else xs[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=str(ROOT / "tests" / "data" / "nvml"),
                    help="folder of NVML replay files (*.json) with true per-job energy")
    ap.add_argument("--passes", type=positive_int, default=200, help="passes timed")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    docs = replay_docs(ap, input_dir(ap, "--data-dir", args.data_dir,
                                     "a folder of NVML replay files"))
    with input_errors(ap, "--data-dir: "):
        split = split_figures(docs)
    times, reads = pass_times(args.passes)
    median_s, p95_s = statistics.median(times), _p95(times)
    if args.json:
        print(json.dumps({"split": split, "pass_median_s": median_s, "pass_p95_s": p95_s,
                          "nvml_read_median_s": statistics.median(reads),
                          "nvml_read_p95_s": _p95(reads)}, indent=2))
        return 0
    print("per-job energy through replay -> Nvml -> NvmlSource -> Ledger, against the truth "
          "(emulated physics, H100, 60 s, a pass every 2 s):")
    print(f"  {'file':14} {'max':>6} {'mean':>6} {'sum':>7} {'no class':>9}  split; what")
    for name, r in split.items():
        print(f"  {name:14} {r['max_abs']:6.1%} {r['mean_abs']:6.1%} {r['sum']:+7.2%} "
              f"{r['no_class']:9.1%}  {','.join(r['splits'])}; {r['what']}")
    print(f"collector pass on the NVML path, 8 GPUs, 12 jobs ({len(times)} passes): "
          f"median {num(median_s * 1000, '.1f')} ms, p95 {num(p95_s * 1000, '.1f')} ms "
          "(readings + residents + energy split + ledger files + line protocol); of which the "
          f"NVML read: median {num(statistics.median(reads) * 1000, '.1f')} ms, "
          f"p95 {num(_p95(reads) * 1000, '.1f')} ms")
    print(goal(f"NVML pass median <= {GOAL_PASS_S * 1000:.0f} ms", median_s <= GOAL_PASS_S,
               f"{median_s * 1000:.1f} ms"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
