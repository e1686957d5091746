"""How much of their time limits jobs use (``Cluster.limit_use``), from Slurm's accounting.

A time limit is an upper bound: users ask for several times what their jobs run. A policy that
prices queued work (greenflow's carbon owed) at the limits overstates it by as much. The share
is measured over the jobs that ended in the last ``LIMIT_USE_WINDOW_S`` with GPUs and a limit:
``sum(GPUs x elapsed) / sum(GPUs x limit)`` of each job's last run (``sacct -X``).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..config import SiteConfig
from ..model import LIMIT_USE_WINDOW_S
from .parse import AcctRecord

ENDED = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY",
         "PREEMPTED", "DEADLINE", "BOOT_FAIL")


def _gpus(record: AcctRecord) -> int:
    try:
        return int(record.alloc_tres.get("gres/gpu", "0") or 0)
    except ValueError:
        return 0


def limit_use_of(records: Iterable[AcctRecord], now_s: float,
                 window_s: float = LIMIT_USE_WINDOW_S) -> float | None:
    """The GPU-weighted share of their limits that the GPU jobs ended in ``window_s`` before
    ``now_s`` used; None when none did."""
    used = asked = 0.0
    for r in records:
        gpus = _gpus(r)
        if (gpus <= 0 or r.state not in ENDED or r.end_s is None or r.end_s < now_s - window_s
                or not r.time_limit_s or r.time_limit_s <= 0):
            continue
        used += gpus * min(max(0.0, r.elapsed_s), r.time_limit_s)
        asked += gpus * r.time_limit_s
    return used / asked if asked > 0 else None


def limit_use(cfg: SiteConfig, now_s: float, warnings: list[str]) -> float | None:
    """``limit_use_of`` the cluster's accounting (one ``sacct``); rows sacct writes that cannot
    be read are left out with a warning."""
    from .snapshot import history
    days = int(LIMIT_USE_WINDOW_S // 86400)
    return limit_use_of(history(cfg, since=f"now-{days}days", warnings=warnings), now_s)
