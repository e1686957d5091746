"""wattctl reconcile against the real local cluster: lock, journaled resize, crash recovery."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cluster_waits import wait_job

from slurm_plugin import live
from slurm_plugin.journal import Journal, PassLock
from slurm_plugin.model import Action, Readings
from slurm_plugin.policy.baseline import SlurmDefault
from slurm_plugin.proc import run
from slurm_plugin.reconcile import reconcile_pass
from slurm_plugin.slurm import actions

pytestmark = pytest.mark.cluster
SLEEP = "#!/bin/bash\nsleep 600\n"


def wattctl(env: dict, *args: str, check: bool = True):
    return run([sys.executable, "-m", "slurm_plugin.cli", *args], env=env, timeout_s=60,
               check=check)




def test_baseline_pass_changes_nothing(localcluster, tmp_path):
    env = {**localcluster.env, "WATTBATCH_RECONCILE_STATE_DIR": str(tmp_path)}
    out = json.loads(wattctl(env, "reconcile", "--json").stdout)
    assert out["ran"] is True and out["actions"] == [] and out["nodes_seen"] == 4


def test_second_pass_while_one_holds_the_lock_exits_0(localcluster, tmp_path):
    env = {**localcluster.env, "WATTBATCH_RECONCILE_STATE_DIR": str(tmp_path)}
    with PassLock(tmp_path / "reconcile.lock") as lock:
        assert lock.acquired
        done = wattctl(env, "reconcile")
        assert done.returncode == 0 and "another pass is running" in done.stdout
    # two real passes started together: both exit 0, at most one ran at a time
    argv = [sys.executable, "-m", "slurm_plugin.cli", "reconcile", "--json"]
    procs = [subprocess.Popen(argv, env={**os.environ, **env},
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert any(o["ran"] for o in outs)


class CrashOnRelease(live.SlurmActuator):
    def release(self, job_id: str) -> None:
        raise KeyboardInterrupt("crash between hold and release")


class ResizeTo:
    name = "resize-test"

    def __init__(self, job_id: str, gpus: int) -> None:
        self.job_id, self.gpus = job_id, gpus

    def advise(self, request, ctx):  # pragma: no cover - not used
        raise AssertionError

    def reconcile(self, ctx):
        job = ctx.cluster.jobs.get(self.job_id)
        if job is None or job.gpus == self.gpus:
            return ()
        return (Action("resize", self.job_id, self.name, gpus=self.gpus, why="test"),)


def test_crashed_resize_is_finished_by_the_next_pass(localcluster, tmp_path):
    cfg = localcluster.config()
    opts = ["--output=/dev/null", f"--chdir={tmp_path}", "-J", "reconcile-resize", "--gres=gpu:1"]
    job_id = actions.submit(opts, SLEEP, cfg)
    wait_job(cfg, job_id, lambda j: j.running)
    state = Path(tmp_path) / "state"

    def one_pass(policy, actuator):
        return reconcile_pass(policy=policy, snapshot=lambda: live.snapshot(cfg),
                              readings=Readings, actuator=actuator, state_dir=state)

    with pytest.raises(KeyboardInterrupt):
        one_pass(ResizeTo(job_id, 2), CrashOnRelease(cfg))
    held = wait_job(cfg, job_id, lambda j: j.pending, timeout_s=20)
    assert held.reason.startswith("JobHeld")          # left held by the crash
    assert len(Journal(state / "journal.jsonl").unfinished()) == 1

    res = one_pass(SlurmDefault(), live.SlurmActuator(cfg))
    assert [(o.status, o.recovered) for o in res.outcomes] == [("done", True)]
    after = wait_job(cfg, job_id, lambda j: j.running, timeout_s=60)
    assert after.gpus == 2 and after.restart_count == 1
    assert Journal(state / "journal.jsonl").unfinished() == []
    # idempotent: the same policy sees the job at 2 GPUs and proposes nothing
    assert one_pass(ResizeTo(job_id, 2), live.SlurmActuator(cfg)).outcomes == []


# A job whose processes take a while to stop after the requeue's SIGTERM: COMPLETING for ~4 s
SLOW_STOP = "#!/bin/bash\ntrap 'sleep 4; exit 0' TERM\nsleep 600 &\nwait\nsleep 600\n"


def test_resize_sets_the_start_once_the_job_has_left_completing(localcluster, tmp_path):
    """The released job is still COMPLETING: the pass waits for it (journaled), then sets its
    start time, where it used to skip that step."""
    cfg = localcluster.config()
    opts = ["--output=/dev/null", f"--chdir={tmp_path}", "-J", "slow-stop", "--gres=gpu:1"]
    job_id = actions.submit(opts, SLOW_STOP, cfg)
    wait_job(cfg, job_id, lambda j: j.running)
    state = Path(tmp_path) / "state"
    res = reconcile_pass(policy=ResizeTo(job_id, 2), snapshot=lambda: live.snapshot(cfg),
                         readings=Readings, actuator=live.SlurmActuator(cfg), state_dir=state,
                         completing_wait_s=30)
    assert [o.status for o in res.outcomes] == ["done"], res.as_dict()
    events = [e.event for e in Journal(state / "journal.jsonl").entries()]
    assert "wait:completing" in events, events
    assert events.index("wait:completing") < events.index("step:start_now")
    after = wait_job(cfg, job_id, lambda j: j.running, timeout_s=60)
    assert after.gpus == 2


def test_job_held_after_a_done_resize_is_released_by_the_next_pass(localcluster, tmp_path):
    """What Slurm does to a job whose relaunch failed (requeued held, priority 0) is undone by
    the next pass, with one line; once it runs, the job is no longer checked."""
    cfg = localcluster.config()
    opts = ["--output=/dev/null", f"--chdir={tmp_path}", "-J", "held-after", "--gres=gpu:1"]
    job_id = actions.submit(opts, SLEEP, cfg)
    wait_job(cfg, job_id, lambda j: j.running)
    state = Path(tmp_path) / "state"

    def one_pass(policy):
        return reconcile_pass(policy=policy, snapshot=lambda: live.snapshot(cfg),
                              readings=Readings, actuator=live.SlurmActuator(cfg),
                              state_dir=state)

    assert [o.status for o in one_pass(ResizeTo(job_id, 2)).outcomes] == ["done"]
    wait_job(cfg, job_id, lambda j: j.running and j.gpus == 2, timeout_s=60)
    actions.requeue_hold(job_id, cfg)                 # held again, as after a failed launch
    assert actions.job_now(job_id, cfg).held
    res = one_pass(SlurmDefault())
    assert [(o.status, o.action.job_id) for o in res.outcomes] == [("released", job_id)]
    assert "held (Reason=" in res.outcomes[0].detail
    after = wait_job(cfg, job_id, lambda j: j.running, timeout_s=60)
    assert after.gpus == 2 and not actions.job_now(job_id, cfg).held
    assert one_pass(SlurmDefault()).outcomes == []    # running again: settled
    assert Journal(state / "journal.jsonl").touched(("resize",)) == []


def test_job_the_requeue_ended_and_slurmctld_forgot_is_submitted_again(localcluster, tmp_path):
    """A resize whose requeue slurmctld lost, and whose SIGTERM ended the job: once slurmctld
    has forgotten the job (MinJobAge), only the accounting tells. The next pass submits it
    again from what the accounting kept: its script, its environment, its output path (from
    its command line) and the action's count; a later pass leaves it alone."""
    cfg = localcluster.config()
    opts = [f"--output={tmp_path}/out-%j.txt", f"--chdir={tmp_path}", "-J", "lost",
            "--gres=gpu:1", "--export=ALL,WB_TEST_VALUE=kept"]
    # the first run's processes end by SIGTERM a few seconds after the action began, as by a
    # lost requeue; the run submitted again says what it was given
    script = ("#!/bin/bash\nif [ ! -e first-run ]; then touch first-run; sleep 5; "
              "kill -TERM $$; fi\necho \"value=$WB_TEST_VALUE gpus=$SLURM_GPUS_ON_NODE\"\n"
              "sleep 600\n")
    job_id = actions.submit(opts, script, cfg)
    wait_job(cfg, job_id, lambda j: j.running)
    state = Path(tmp_path) / "state"
    journal = Journal(state / "journal.jsonl")
    action = Action("resize", job_id, "resize-test", gpus=2, why="test")
    journal.write("a1", "begin", action)
    for step in ("requeue_hold", "set_gpus", "release", "start_now"):
        journal.write("a1", f"step:{step}", action)
    journal.write("a1", "done", action)
    deadline = time.monotonic() + 90                  # MinJobAge=10 on the local cluster
    while actions.job_now(job_id, cfg) is not None:
        assert time.monotonic() < deadline, actions.job_now(job_id, cfg)
        time.sleep(1)
    assert actions.job_ended(job_id, cfg)[:2] == ("FAILED", "0:15")

    def one_pass():
        return reconcile_pass(policy=SlurmDefault(), snapshot=lambda: live.snapshot(cfg),
                              readings=Readings, actuator=live.SlurmActuator(cfg),
                              state_dir=state)

    res = one_pass()
    assert [o.status for o in res.outcomes] == ["resubmitted"], res.as_dict()
    assert f"job {job_id} lost" in res.outcomes[0].detail
    new_id = res.outcomes[0].detail.rpartition("as job ")[2]
    after = wait_job(cfg, new_id, lambda j: j.running, timeout_s=60)
    assert after.gpus == 2
    assert actions.show_job(new_id, cfg)["Comment"].startswith(
        f"wattbatch: resubmission of job {job_id}")
    out = Path(tmp_path) / f"out-{new_id}.txt"
    deadline = time.monotonic() + 20
    while "value=" not in (out.read_text() if out.exists() else ""):
        assert time.monotonic() < deadline, f"{out} not written"
        time.sleep(0.5)
    assert "value=kept gpus=2" in out.read_text()
    assert one_pass().outcomes == []                  # settled: never submitted twice
    actions.cancel(new_id, cfg)
