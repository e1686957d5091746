"""``slurm-powersave``: Slurm's own power saving; placement as ``slurm-default``.

Idle nodes are suspended after ``SuspendTime`` (10 minutes) and resumed on demand, the job
waiting for the boot (``ResumeTimeout``). These are slurm.conf settings, not per-job decisions:
the policy declares them in ``slurm_settings``; the simulator applies them to its nodes and a
live site puts them in slurm.conf.
"""

from __future__ import annotations

from types import MappingProxyType

from ..model import Action, JobRequest, Placement
from ..physics import node_resume_delay_s
from .base import Context, plain_placement


# Slurm's power saving as slurm.conf sets it; every policy whose figures assume idle nodes
# powered down declares this (one value, so the baselines they are compared with match).
POWER_SAVE = MappingProxyType({"SuspendTime": 600, "ResumeTimeout": node_resume_delay_s()})


class SlurmPowersave:
    name = "slurm-powersave"
    slurm_settings = POWER_SAVE

    def advise(self, request: JobRequest, ctx: Context) -> Placement:
        return plain_placement(self.name, request,
                               "baseline: Slurm places the job; idle nodes power down after 10 min")

    def reconcile(self, ctx: Context) -> tuple[Action, ...]:
        return ()
