"""Helpers of the simulator tests (not tests): a recording policy and a random trace."""

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

    @property
    def stage_failures(self) -> int:
        return getattr(self.policy, "stage_failures", 0)


def random_trace(path, jobs: int, seed: int, apps, *, gap_s: float, longest_s: int,
                 counts=(1, 1, 1, 1, 2), t0: int = 1_700_000_000) -> list:
    """A canonical trace of ``jobs`` jobs arriving ``gap_s`` apart on average, each of 600 s
    to ``longest_s``, on one of ``counts`` GPUs, of one of ``apps``; read back."""
    import random

    from slurm_plugin.sim.trace import read_trace
    rng = random.Random(seed)
    rows = ["job_id,submit_s,duration_s,num_gpus,user,app"]
    t = float(t0)
    for i in range(jobs):
        t += rng.expovariate(1 / gap_s)
        rows.append(f"j{i},{t:.0f},{rng.randint(600, longest_s)},{rng.choice(counts)},"
                    f"u{rng.randint(0, 3)},{rng.choice(apps)}")
    path.write_text("\n".join(rows) + "\n")
    return read_trace(path, "canonical")
