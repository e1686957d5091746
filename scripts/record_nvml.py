"""Record this GPU node's NVML passes into a replay file (docs/nvml.md): what every pynvml call
of the collector returned per GPU (name, power, energy counter, utilisation, memory, limit and
its range, compute and MPS processes, per-process utilisation samples, MIG devices), each
process's Slurm job, and the node's jobs as Slurm lists them (class and shares). Power limits
are not touched. The file replays through the collector's NVML path on any machine
(``slurm_plugin/node/nvml_replay.py``).

    sudo .venv/bin/python scripts/record_nvml.py --out node.json [--passes 30] [--interval 2]
        [--node NAME] [--no-slurm]

Run it as root: a process's Slurm job is read from ``/proc/PID/environ`` (else its cgroup).
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))      # the checkout's package, not an installed copy
from slurm_plugin.node.nvml_record import record  # noqa: E402
from slurm_plugin.node.nvml_replay import dumps  # noqa: E402
from slurm_plugin.node.source import node_name  # noqa: E402
from slurm_plugin.telemetry.nvml import import_pynvml  # noqa: E402


def _positive(cast):
    def check(text: str):
        try:
            value = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{text!r}: give a number > 0")
        return value
    return check


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the replay file to write")
    ap.add_argument("--passes", type=_positive(int), default=30)
    ap.add_argument("--interval", type=_positive(float), default=2.0, help="seconds between passes")
    ap.add_argument("--node", default=None, help="Slurm's name of this node (default: "
                    "$SLURMD_NODENAME or the short host name)")
    ap.add_argument("--no-slurm", action="store_true", help="do not ask Slurm for the jobs")
    args = ap.parse_args()
    node = args.node or node_name()
    jobs = None
    if not args.no_slurm:
        from slurm_plugin import config
        from slurm_plugin.node.job_lookup import CachedJobs
        from slurm_plugin.node.power_cap import node_jobs
        cfg = config.load()
        jobs = CachedJobs(lambda: node_jobs(cfg, node), max(10.0, args.interval))
    try:
        nv = import_pynvml()
        nv.nvmlInit()
        driver = nv.nvmlSystemGetDriverVersion()
    except Exception as exc:     # noqa: BLE001 - pynvml's errors, or no pynvml (WattError)
        ap.error(f"NVML cannot be used here: {exc}")
    when = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    doc = record(nv, args.passes, args.interval, node, jobs=jobs,
                 warn=lambda line: print(f"record_nvml: warning: {line}", file=sys.stderr),
                 provenance=f"recorded on {socket.gethostname()} (Slurm node {node}) at {when} "
                            f"by scripts/record_nvml.py: {args.passes} passes {args.interval:g} s "
                            f"apart, NVIDIA driver {driver}; no true per-job energy")
    Path(args.out).write_text(dumps(doc))
    print(f"{args.out}: {args.passes} passes of {len(doc['passes'][-1]['gpus'])} GPUs, "
          f"{len(doc['jobs'])} Slurm jobs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
