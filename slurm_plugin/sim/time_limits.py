"""Time limits for trace jobs that carry none (Philly has no requested time).

Slurm backfills on a job's requested time limit, in whole minutes, not on its run time, and users
ask for much more than they use: their estimates are *modal*, a few round values chosen by most
users (Tsafrir, Etsion and Feitelson, "Modeling User Runtime Estimates", JSSPP 2005, LNCS 3834:
in the production logs they study, a handful of popular values cover most jobs, and
run time over estimate is spread widely below 1). Rule ``modal`` follows that model:

1. draw ``f`` log-uniformly in ``[1, factor_max]`` (seeded by job id: the same job gets the same
   limit in every run and every policy);
2. the limit is the smallest popular value (``POPULAR_S``: 5, 10, 15, 20, 30 minutes; 1, 2, 4, 8,
   12, 24, 48, 72 hours; 7 days) at least ``f`` x the run time, or the run time x ``f`` rounded up
   to whole hours beyond 7 days.

So no job is killed at its limit when it runs alone, and every job over-asks by ``f`` plus the
rounding up to a popular value. On the Philly Sep-Oct trace (``factor_max`` 4, seed 0) the
limit is 3.2x the run time at the median (10th percentile 1.5x, 90th 5.8x); run time over limit
averages 0.36 (see docs/simulator.md). Rule ``exact`` gives every job its run time rounded
up to whole minutes (a perfect user: the engine's old behaviour). A trace's own ``time_limit_s``
column always wins.
"""

from __future__ import annotations

import bisect
import math

from ..physics.seeded import seeded

RULES = ("modal", "exact")
POPULAR_S = (300, 600, 900, 1200, 1800, 3600, 7200, 14400, 28800, 43200, 86400, 172800,
             259200, 604800)


def whole_minutes_s(limit_s: float) -> float:
    """Slurm keeps time limits in minutes: a limit is rounded up to the next whole minute."""
    return 60.0 * max(1, math.ceil(limit_s / 60.0 - 1e-9))


def draw_limit_s(job_id: str, duration_s: float, seed: int, rule: str = "modal",
                 factor_max: float = 4.0) -> float:
    """The requested time limit of a job that ran ``duration_s`` seconds (see module doc)."""
    if rule == "exact":
        return whole_minutes_s(duration_s)
    f = math.exp(seeded(f"limit:{seed}:{job_id}").random() * math.log(max(1.0, factor_max)))
    want = duration_s * f
    i = bisect.bisect_left(POPULAR_S, want)
    if i < len(POPULAR_S):
        return float(POPULAR_S[i])
    return 3600.0 * math.ceil(want / 3600.0)
