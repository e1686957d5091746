"""A policy whose placements are kept, for the simulator tests (a helper, not a test)."""

from __future__ import annotations

from slurm_plugin.model import Placement


class Recorder:
    """``policy``, each placement it gave kept in ``placements``."""

    def __init__(self, policy) -> None:
        self.policy, self.name = policy, policy.name
        self.slurm_settings = getattr(policy, "slurm_settings", {})
        self.placements: list[Placement] = []

    def advise(self, request, ctx):
        pl = self.policy.advise(request, ctx)
        self.placements.append(pl)
        return pl

    def reconcile(self, ctx):
        return self.policy.reconcile(ctx)
