"""The simulator's scheduler passes walk only ``Simulator.ready``: the pending jobs whose
--begin has passed, in priority order. Under holds that are set, renewed, released and left to
lapse (a test policy), and under requeues into later --nice tiers (``tiresias``), at every
pass it must hold exactly those jobs."""

from __future__ import annotations

import pytest

from slurm_plugin.model import Action
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.base import plain_placement
from slurm_plugin.record import replace
from slurm_plugin.sim import engine as engine_mod
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.trace import TraceJob


def _jobs(n: int) -> list[TraceJob]:
    return [TraceJob(job_id=str(i), submit_s=45.0 * (i // 2), line=i + 2,
                     duration_s=(600.0, 7200.0, 1800.0, 20_000.0)[i % 4] * (1 + i % 3),
                     num_gpus=(1, 2, 4, 8, 1, 3)[i % 6])
            for i in range(n)]


class Holder:
    """Holds every third queued job for 10 minutes, renews some holds, releases others, and
    lets the rest lapse."""

    name = "holder"

    def advise(self, request, ctx):
        return plain_placement(self.name, request, "as requested")

    def reconcile(self, ctx):
        out = []
        now = ctx.now_s
        for job in ctx.cluster.jobs.values():
            if not job.pending:
                continue
            n = int(job.job_id)
            if job.begin_s is None or job.begin_s <= now:
                if n % 3 == 0 and now < job.submit_s + 3600:
                    out.append(Action("defer", job.job_id, self.name, begin_s=now + 600))
            elif n % 2:
                out.append(Action("defer", job.job_id, self.name, begin_s=now))    # release
            elif n % 5 == 0 and now < job.submit_s + 3600:
                out.append(Action("defer", job.job_id, self.name, begin_s=job.begin_s + 300))
        return tuple(out)


@pytest.mark.parametrize("policy", ["holder", "tiresias"])
def test_ready_is_every_pending_job_past_its_begin_in_priority_order(monkeypatch, policy):
    checks = []
    wake = Simulator._wake_due

    def checked(self):
        wake(self)
        due = [j for j in self.pending if j.begin_s <= self.now + engine_mod._EPS]
        assert [j.id for j in self.ready] == [j.id for j in due], self.now
        assert all(j.ready == (j in due) for j in self.pending)
        assert self.pending_tiered == sum(j.nice > 0 for j in self.pending)
        checks.append((len(self.pending) - len(due), self.pending_tiered))
    monkeypatch.setattr(Simulator, "_wake_due", checked)
    spec = ClusterSpec(nodes=3, gpus_per_node=4, reconcile_interval_s=120.0)
    pol = Holder() if policy == "holder" else get_policy(policy, "--policy")
    settings = {"thresholds_gpu_s": [3600.0, 36000.0], "lookahead": 8} \
        if policy == "tiresias" else {}
    result = Simulator(_jobs(160), spec, pol, settings=settings).run()
    assert len(checks) > 200 and result["policy_fallbacks"] == 0
    if policy == "holder":
        assert max(held for held, _ in checks) > 0      # passes ran with jobs left out of ready
    else:
        assert max(tiered for _, tiered in checks) > 0  # and with jobs in a later tier


class Resizer:
    """Puts even jobs in queue tier 2 at submission, then requeues each running job once on
    one GPU by a resize that leaves its tier unsaid (``nice`` None)."""

    name = "resizer"

    def __init__(self) -> None:
        self.done: set[str] = set()

    def advise(self, request, ctx):
        pl = plain_placement(self.name, request, "as requested")
        return replace(pl, nice=2) if int(request.name[3:]) % 2 == 0 else pl

    def reconcile(self, ctx):
        out = []
        for job in ctx.cluster.jobs.values():
            if job.running and job.job_id not in self.done:
                self.done.add(job.job_id)
                out.append(Action("resize", job.job_id, self.name, gpus=1, why="test"))
        return tuple(out)


def test_a_resize_that_leaves_the_tier_unsaid_keeps_it(monkeypatch):
    """As ``scontrol requeue`` keeps a job's Nice: a requeued job waits in the tier it had."""
    tiers: dict[str, list[int]] = {}
    enqueue = Simulator._enqueue

    def recorded(self, j):
        tiers.setdefault(j.t.job_id, []).append(j.nice)
        enqueue(self, j)
    monkeypatch.setattr(Simulator, "_enqueue", recorded)
    jobs = _jobs(40)
    spec = ClusterSpec(nodes=3, gpus_per_node=4, reconcile_interval_s=120.0)
    Simulator(jobs, spec, Resizer()).run()
    requeued = {k: v for k, v in tiers.items() if len(v) > 1}
    assert len(requeued) > 10
    assert all(set(v) == {2 if int(k) % 2 == 0 else 0} for k, v in requeued.items())
