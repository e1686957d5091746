"""``slurm-default``: change nothing, let Slurm place the job (whole exclusive GPUs)."""

from __future__ import annotations

from ..model import Action, JobRequest, Placement
from .base import Context, plain_placement


class SlurmDefault:
    name = "slurm-default"

    def advise(self, request: JobRequest, ctx: Context) -> Placement:
        return plain_placement(self.name, request, "baseline: Slurm places the job on whole GPUs")

    def reconcile(self, ctx: Context) -> tuple[Action, ...]:
        return ()
