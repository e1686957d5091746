"""Added latency of ``wattbatch`` over plain ``sbatch`` on the local cluster.

Submits the same small held job N times each way (interleaved, so both see the same load),
cancels every job, and prints the medians and the median added latency (goal: <= 50 ms).

    . /var/tmp/wattbatch-localcluster/env.sh
    python benchmarks/bench_wattbatch.py [-n 30] [--policy NAME] [--wattbatch CMD]

``--wattbatch`` defaults to the installed ``wattbatch`` command, else ``python -m wrapper.cli``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SCRIPT = "#!/bin/bash\n#SBATCH --job-name=bench\n#SBATCH --output=/dev/null\n#SBATCH --gres=gpu:1\ntrue\n"


def submit(cmd: list[str], script: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run([*cmd, "--hold", "--parsable", script], capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
    return elapsed, done.stdout.strip().split(";")[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=30, help="submissions each way (default 30)")
    ap.add_argument("--policy", default="", help="wattbatch --wb-policy NAME (default: site's)")
    ap.add_argument("--wattbatch", default="", help="command that runs wattbatch")
    args = ap.parse_args()
    wb = shlex.split(args.wattbatch) if args.wattbatch else (
        [shutil.which("wattbatch")] if shutil.which("wattbatch") else
        [sys.executable, "-m", "wrapper.cli"])
    if args.policy:
        wb += ["--wb-policy", args.policy]
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as fh:
        fh.write(SCRIPT)
    plain_s, ours_s, ids = [], [], []
    try:
        for cmd in (["sbatch"], wb):                                # warm caches, not counted
            ids.append(submit(cmd, fh.name)[1])
        for _ in range(args.n):
            t, job = submit(["sbatch"], fh.name)
            plain_s.append(t), ids.append(job)
            t, job = submit(wb, fh.name)
            ours_s.append(t), ids.append(job)
    finally:
        os.unlink(fh.name)
        subprocess.run(["scancel", *ids, "--name=bench"], capture_output=True)
    plain, ours = statistics.median(plain_s), statistics.median(ours_s)
    added = statistics.median(o - p for o, p in zip(ours_s, plain_s))
    print(f"submissions each way: {args.n}   wattbatch: {' '.join(wb)}")
    print(f"sbatch     median {plain * 1e3:7.1f} ms")
    print(f"wattbatch  median {ours * 1e3:7.1f} ms")
    print(f"added      median {added * 1e3:7.1f} ms (goal <= 50 ms)")


if __name__ == "__main__":
    main()
