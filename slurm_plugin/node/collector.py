"""The node collector: sample every GPU of a ``GpuSource`` and write ``gpu`` points.

``gpu,cluster=..,node=..,gpu=.. power_w=..,energy_j=..,util_pct=..,mem_used_mib=..,
power_limit_w=..`` (all fields floats, always, so InfluxDB never sees a type change).
"""

from __future__ import annotations

import sys
import time
from typing import Callable

from ..errors import WattError
from ..model import GpuReading
from ..telemetry.influx import InfluxClient
from ..telemetry.lineproto import Point
from . import spool
from .ledger import Ledger
from .source import GpuSource

MEASUREMENT = "gpu"


def gpu_point(r: GpuReading, cluster: str) -> Point:
    return Point(MEASUREMENT, {"cluster": cluster, "node": r.node, "gpu": str(r.index)},
                 {"power_w": float(r.power_w), "energy_j": float(r.energy_j),
                  "util_pct": float(r.util_pct), "mem_used_mib": float(r.mem_used_mib),
                  "power_limit_w": float(r.power_limit_w)}, r.taken_s)


def collect_once(source: GpuSource, client: InfluxClient, cluster: str,
                 ledger: Ledger | None = None) -> list[GpuReading]:
    """Read every GPU once, charge the energy to the jobs on them (``ledger``) and write the
    points; returns the readings. The ledger is kept even when InfluxDB is down."""
    readings = source.read()
    if ledger is not None:
        ledger.update(readings)
    client.write(gpu_point(r, cluster) for r in readings)
    if ledger is not None:
        spool.flush(ledger.state_dir, client)     # job records an epilog could not send
    return readings


def run_loop(source: GpuSource, client: InfluxClient, cluster: str, interval_s: float, *,
             iterations: int | None = None, sleep: Callable[[float], None] = time.sleep,
             clock: Callable[[], float] = time.monotonic, ledger: Ledger | None = None) -> int:
    """Collect every ``interval_s`` on a fixed grid (``iterations`` times, or forever).

    A failed sample (InfluxDB down, an NVML error, Slurm unreachable or printing what it
    should not, any other exception of one sample) is reported on stderr and the loop goes on:
    no single failure stops the readings of every GPU. Returns the number of failed samples."""
    failures, k, start = 0, 0, clock()
    while iterations is None or k < iterations:
        try:
            collect_once(source, client, cluster, ledger)
        except WattError as exc:
            failures += 1
            print(f"wattbatch collector: warning: sample {k + 1} failed: {exc}",
                  file=sys.stderr, flush=True)
        except Exception as exc:  # noqa: BLE001 - one bad sample must not stop the collector
            failures += 1
            print(f"wattbatch collector: warning: sample {k + 1} failed: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        k += 1
        if iterations is not None and k >= iterations:
            break
        sleep(max(0.0, start + k * interval_s - clock()))
    return failures
