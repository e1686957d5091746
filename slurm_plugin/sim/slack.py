"""Which trace jobs may be shifted in time, and by how much (traces without a ``slack_s`` column).

Philly and most public traces say nothing about how urgent a job is. Carbon-aware timing needs
some jobs a user marked deferrable (``wattbatch --wb-slack``), so the simulator draws them:

1. a job is deferrable with probability ``deferrable_share`` (seeded by job id: the same job is
   deferrable in every run and every policy);
2. a deferrable job's slack is ``slack_s`` (default 6 h, the issue's ``--wb-slack=6h``): its start
   may move up to that long after its submission.

A trace's own ``slack_s`` column always wins (empty: not deferrable). ``deferrable_share = 0``
turns the rule off.
"""

from __future__ import annotations

from ..physics.seeded import seeded


DEFAULT_SHARE = 0.5
DEFAULT_SLACK_S = 6 * 3600.0


def draw_slack_s(job_id: str, seed: int, share: float = DEFAULT_SHARE,
                 slack_s: float = DEFAULT_SLACK_S) -> float | None:
    """The slack of a job whose trace row gives none (None: the job is not deferrable)."""
    if share <= 0 or seeded(f"slack:{seed}:{job_id}").random() >= share:
        return None
    return slack_s
