"""tiresias's preemption live: a journaled resize that names a queue tier (``Action.nice``, as
tiresias emits for a running job that falls out of its cut) requeues the job, sets its Slurm
``Nice`` to ``NICE_STEP`` x tier before releasing it, and the job runs again from Slurm's
queue in that tier."""

from __future__ import annotations

from pathlib import Path

import pytest
from cluster_waits import wait_job

from slurm_plugin import live
from slurm_plugin.journal import Journal
from slurm_plugin.model import NICE_STEP, Action, Readings
from slurm_plugin.reconcile import reconcile_pass
from slurm_plugin.slurm import actions

pytestmark = pytest.mark.cluster


def test_a_preempted_job_is_requeued_into_its_queue_tier(localcluster, tmp_path):
    cfg = localcluster.config()
    job_id = actions.submit(["--job-name=tiered", "--gres=gpu:1", "-t", "10", "--requeue",
                             f"--output={tmp_path}/tiered.out", "--wrap", "sleep 600"],
                            None, cfg)
    try:
        wait_job(cfg, job_id, lambda j: j.running, timeout_s=60)
        assert actions.show_job(job_id, cfg).get("Nice") == "0"

        class Preempt:
            name = "test"

            def reconcile(self, ctx):
                return (Action("resize", job_id, "test", gpus=1, nice=2,
                               why="test: preempted into queue 2"),)

        state = tmp_path / "state"
        state.mkdir()
        result = reconcile_pass(policy=Preempt(), snapshot=lambda: live.snapshot(cfg),
                                readings=Readings, actuator=live.SlurmActuator(cfg),
                                state_dir=state)
        assert [o.status for o in result.outcomes] == ["done"], result.as_dict()
        assert result.as_dict()["actions"][0]["nice"] == 2, result.as_dict()
        steps = [e.event for e in Journal(Path(state) / "journal.jsonl").entries()]
        assert "step:set_tier" in steps, steps
        assert steps.index("step:requeue_hold") < steps.index("step:set_tier") \
            < steps.index("step:release"), steps
        shown = actions.show_job(job_id, cfg)
        assert shown["Nice"] == str(2 * NICE_STEP), shown
        wait_job(cfg, job_id, lambda j: j.running, timeout_s=90)   # it runs again
        shown = actions.show_job(job_id, cfg)
        assert shown["Restarts"] == "1" and shown["Nice"] == str(2 * NICE_STEP), shown
    finally:
        actions.cancel(job_id, cfg)
