"""What the carbon-aware live tests start from (a helper, not a test): a carbon series of their
own whose low lies some hours ahead, and a greenflow budget already overspent, so that carbon
weighs fully."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from slurm_plugin.history import FILE_NAME, History
from slurm_plugin.policy.greenflow.observe import LAST_S, PERIOD_START_S, SPENT_G, WEIGHT

HOUR_S = 3600.0


def series(path: Path, now_s: float, low_at_h: int) -> float:
    """Hourly intensity, 400 g/kWh but 100 at ``low_at_h`` hours ahead; that hour's time."""
    base = (now_s // HOUR_S) * HOUR_S
    rows = ["Time,Carbon Intensity"]
    for k in range(-3, 13):
        t = base + k * HOUR_S
        value = 100.0 if k == low_at_h else 400.0
        rows.append(f"{datetime.fromtimestamp(t, timezone.utc):%Y-%m-%d %H:%M:%S},{value}")
    path.write_text("\n".join(rows) + "\n")
    return base + low_at_h * HOUR_S


def overspent(state: Path, now_s: float) -> None:
    """The reconcile history of ``state``: this period's budget far overspent, observed two
    hours ago."""
    seed = History(state / FILE_NAME)
    for key, value in ((LAST_S, now_s - 2 * HOUR_S), (SPENT_G, 1e6),
                       (PERIOD_START_S, (now_s // 86400) * 86400), (WEIGHT, 1.0)):
        seed.add(key, value)
    seed.save()
