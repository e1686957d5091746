"""The simulator's scheduler passes walk only ``Simulator.ready``: the pending jobs whose
--begin has passed, in priority order. Under holds that are renewed, released and lapse
(``tiresias``, ``ones``, ``carbon-threshold``), at every pass it must hold exactly those jobs."""

from __future__ import annotations

import pytest

from slurm_plugin.sim import engine as engine_mod
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.trace import TraceJob


def _jobs(n: int) -> list[TraceJob]:
    return [TraceJob(job_id=str(i), submit_s=45.0 * (i // 2), line=i + 2,
                     duration_s=(600.0, 7200.0, 1800.0, 20_000.0)[i % 4] * (1 + i % 3),
                     num_gpus=(1, 2, 4, 8, 1, 3)[i % 6])
            for i in range(n)]


@pytest.mark.parametrize("policy,settings", [
    ("tiresias", {"thresholds_gpu_s": [3600.0, 36000.0], "lookahead": 8, "hold_s": 900.0}),
    ("ones", {}),
    ("carbon-threshold", {}),
])
def test_ready_is_every_pending_job_past_its_begin_in_priority_order(monkeypatch, policy,
                                                                     settings):
    checks = []
    wake = Simulator._wake_due

    def checked(self):
        wake(self)
        due = [j for j in self.pending if j.begin_s <= self.now + engine_mod._EPS]
        assert [j.id for j in self.ready] == [j.id for j in due], self.now
        assert all(j.ready == (j in due) for j in self.pending)
        checks.append(len(self.pending) - len(due))
    monkeypatch.setattr(Simulator, "_wake_due", checked)
    from slurm_plugin.policy import get_policy
    spec = ClusterSpec(nodes=3, gpus_per_node=4, reconcile_interval_s=120.0)
    sim = Simulator(_jobs(160), spec, get_policy(policy, "--policy"), settings=settings)
    sim.run()
    assert len(checks) > 200
    if policy == "tiresias":
        assert max(checks) > 0      # some passes ran with held jobs left out of ready
