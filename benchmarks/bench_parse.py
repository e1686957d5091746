"""Parse time of one snapshot on a synthetic cluster (default 1,000 nodes x 8 GPUs, 10,000
jobs in the JSON of one Slurm release): JSON decoding, parsing, attaching jobs to GPUs.

    python benchmarks/bench_parse.py [--release 24.11] [--nodes 1000] [--gpus 8] [--jobs 10000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))      # the checkout's package, not an installed copy
from slurm_plugin.slurm.snapshot import build_cluster  # noqa: E402
from slurm_plugin.slurm.synthetic import RELEASES, documents  # noqa: E402

from benchmarks._common import positive_int  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=positive_int, default=1000)
    ap.add_argument("--gpus", type=positive_int, default=8)
    ap.add_argument("--jobs", type=positive_int, default=10000)
    ap.add_argument("--repeat", type=positive_int, default=3)
    ap.add_argument("--release", default="22.05", choices=sorted(RELEASES))
    args = ap.parse_args()
    nodes_doc, squeue = documents(args.release, args.nodes, args.gpus, args.jobs)
    sinfo_text, squeue_text = json.dumps(nodes_doc), json.dumps(squeue)
    decode, parse = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        sinfo, squeue = json.loads(sinfo_text), json.loads(squeue_text)
        t1 = time.perf_counter()
        cluster = build_cluster(sinfo, squeue, "synthetic", 0.0)
        t2 = time.perf_counter()
        decode.append(t1 - t0)
        parse.append(t2 - t1)
    busy = sum(1 for n in cluster.nodes for g in n.gpus if not g.is_free)
    print(f"synthetic snapshot (Slurm {args.release} JSON): {args.nodes} nodes x {args.gpus} GPUs, {args.jobs} jobs "
          f"({len(squeue_text) / 1e6:.1f} MB squeue JSON); {len(cluster.jobs)} active jobs, "
          f"{busy} GPUs busy")
    print(f"json decode: median {statistics.median(decode) * 1000:.0f} ms")
    print(f"parse+attach: median {statistics.median(parse) * 1000:.0f} ms")
    print(f"total: median {statistics.median(d + p for d, p in zip(decode, parse)) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
