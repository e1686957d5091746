"""The elastic policy live on the local cluster: an emulated training job submitted with
``--wb-elastic=1-4`` starts on 1 GPU, is grown to 4 by ``wattctl reconcile --policy elastic``
while the cluster is idle, is shrunk to 2 when a job arrives that cannot start otherwise, and
completes: steps monotonic across restarts, none lost beyond the last checkpoint, Slurm's
restart count equal to the resizes in the reconcile journal, GPU-seconds and energy per run in
``wattctl report --by run``. A non-elastic job is never resized. A job that ignores SIGTERM,
and a job killed while it writes its checkpoint, are requeued after Slurm's KillWait and resume
from their last complete checkpoint; neither is lost or left held.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from cluster_waits import fill_every_gpu, wait_job

from slurm_plugin import live
from slurm_plugin.history import FILE_NAME as HISTORY_FILE
from slurm_plugin.history import History
from slurm_plugin.journal import Journal
from slurm_plugin.model import Action, Readings
from slurm_plugin.proc import run
from slurm_plugin.reconcile import reconcile_pass
from slurm_plugin.slurm import actions
from slurm_plugin.slurm.snapshot import snapshot

pytestmark = pytest.mark.cluster
TRAIN = f"{sys.executable} -m slurm_plugin.emulated_train"
# the policy's clocks shortened to the test's minutes: a job may be resized 4 s after its
# (re)start, and a resize is decided on a cost of 5 s (its measured cost, checkpoint, requeue
# and start-up on this loaded machine, is recorded but not used: the test's 3-minute jobs would
# not repay it)
SETTINGS = {"WATTBATCH_ELASTIC_MIN_INTERVAL_S": "4", "WATTBATCH_ELASTIC_RESTART_COST_S": "5",
            "WATTBATCH_ELASTIC_MEASURE_RESTART_COST": "false", "WATTBATCH_SERVER": "0"}


@pytest.fixture()
def env(localcluster, tmp_path) -> dict[str, str]:
    state = tmp_path / "reconcile"
    state.mkdir()
    return {**localcluster.env, **SETTINGS, "WATTBATCH_RECONCILE_STATE_DIR": str(state)}


def submit(env: dict, tmp_path: Path, name: str, steps: int, step_s: float, epoch: int,
           *train_args: str, gpus: int = 1, elastic: str = "1-4", limit_min: int = 20,
           sbatch_args: tuple[str, ...] = ()) -> str:
    """An emulated training job through wattbatch, elastic, checkpointing where the elastic
    template says (``WATTBATCH_CHECKPOINT_DIR``); every run appends to one output file."""
    script = tmp_path / f"{name}.sh"
    script.write_text(
        f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --output={tmp_path}/{name}.out\n"
        "#SBATCH --open-mode=append\n"
        'echo "run $WATTBATCH_RESTART_COUNT on $SLURM_GPUS_ON_NODE GPUs"\n'
        f"{TRAIN} --steps {steps} --step-s {step_s} --steps-per-epoch {epoch} --gpu-scaling 0.8 "
        f'--checkpoint "$WATTBATCH_CHECKPOINT_DIR/ckpt.json" {" ".join(train_args)}\n')
    done = run([sys.executable, "-m", "wrapper.cli", "--parsable", "--wb-policy=elastic",
                f"--wb-elastic={elastic}", f"--gres=gpu:{gpus}", "-t", str(limit_min), *sbatch_args,
                str(script)],
               env=env, cwd=str(tmp_path), timeout_s=60)
    return done.stdout.strip().split(";")[0]


def reconcile(env: dict) -> list[dict]:
    out = run([sys.executable, "-m", "slurm_plugin.cli", "reconcile", "--policy", "elastic",
               "--json"], env=env, timeout_s=120)
    return json.loads(out.stdout)["actions"]


def drive(env: dict, cfg, job_id: str, ok, timeout_s: float) -> list[dict]:
    """Reconcile passes every 2 s until ``ok(job)``; the resizes done on the way."""
    deadline, done = time.monotonic() + timeout_s, []
    while True:
        done += [a for a in reconcile(env) if a["kind"] == "resize" and a["status"] == "done"]
        job = snapshot(cfg).jobs.get(job_id)
        if job is not None and ok(job):
            return done
        if time.monotonic() > deadline:
            pytest.fail(f"job {job_id} not as expected after {timeout_s:g} s of reconcile "
                        f"passes: {job}; resizes {done}")
        time.sleep(2)


def wait_ended(cfg, job_id: str, timeout_s: float) -> dict:
    """``scontrol show job`` of the job once it ended (the snapshot holds only active jobs;
    slurmctld keeps an ended one for MinJobAge)."""
    deadline = time.monotonic() + timeout_s
    while True:
        shown = actions.show_job(job_id, cfg)
        if shown.get("JobState") not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING",
                                          "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"):
            return shown
        if time.monotonic() > deadline:
            pytest.fail(f"job {job_id} has not ended after {timeout_s:g} s: {shown}")
        time.sleep(0.5)


def gpus(job) -> int:
    return len(job.uses)


def started_at(log: str) -> list[int]:
    return [int(line.split()[4]) for line in log.splitlines()
            if line.startswith("emulated_train: starting at step")]


def resizes_in_journal(state: Path) -> tuple[dict[str, int], dict[str, int]]:
    """Job id -> resizes the journal shows done, and -> those that requeued it (a pending job
    is resized in place)."""
    done: dict[str, int] = {}
    requeued: dict[str, int] = {}
    for e in Journal(state / "journal.jsonl").entries():
        job = e.action["job_id"]
        if e.action["kind"] == "resize" and e.event == "done":
            done[job] = done.get(job, 0) + 1
        if e.action["kind"] == "resize" and e.event == "step:requeue_hold":
            requeued[job] = requeued.get(job, 0) + 1
    return done, requeued


def test_an_elastic_job_grows_when_idle_shrinks_for_a_newcomer_and_completes(
        localcluster, env, tmp_path):
    cfg = localcluster.config()
    job_id = submit(env, tmp_path, "elastic", steps=600, step_s=0.3, epoch=20)
    job = wait_job(cfg, job_id, lambda j: j.running)
    assert gpus(job) == 1 and (job.min_gpus, job.max_gpus) == (1, 4)     # from AdminComment

    # (1) the cluster is idle: the job grows to a whole node (through 2 GPUs, or at once)
    grown = drive(env, cfg, job_id, lambda j: j.running and gpus(j) == 4, timeout_s=150)
    assert grown and all(a["job_id"] == job_id for a in grown), grown
    node = snapshot(cfg).jobs[job_id].nodes[0]

    # (2) the other nodes fill up, then two 1-GPU jobs arrive: the elastic job gives up a GPU
    # for each (one resize a pass, each when its loss is below the newcomer's wait)
    fill = []
    for other in sorted({n.name for n in snapshot(cfg).nodes} - {node}):
        out = run(["sbatch", "--parsable", "-w", other, "--gres=gpu:4", "--output=/dev/null",
                   "--wrap=sleep 600"], env=env, timeout_s=30)
        fill.append(out.stdout.strip().split(";")[0])
    for f in fill:
        wait_job(cfg, f, lambda j: j.running)
    newcomers = [run(["sbatch", "--parsable", "--gres=gpu:1", "-t", "5", "--output=/dev/null",
                      "--wrap=sleep 600"], env=env, timeout_s=30).stdout.strip().split(";")[0]
                 for _ in range(2)]
    wait_job(cfg, newcomers[-1], lambda j: j.pending)
    shrunk = drive(env, cfg, job_id, lambda j: j.running and gpus(j) == 2, timeout_s=150)
    # 4 -> 3 for the first; 3 -> 2 for the second, requeued again or, when the pass comes while
    # the job is still pending from the first, in place
    assert [(a["job_id"], a["gpus"]) for a in shrunk] == [(job_id, 3), (job_id, 2)], shrunk
    for newcomer in newcomers:
        wait_job(cfg, newcomer, lambda j: j.running, timeout_s=30)
    # the restarts it made are measured: its own restart cost, from its stop to its progress back
    hist = History(Path(env["WATTBATCH_RECONCILE_STATE_DIR"]) / HISTORY_FILE).view()
    rc = hist.get(f"elastic:rc:{job_id}")
    assert rc is not None and 0.0 < rc < 600.0, {k: v for k, v in hist.items() if job_id in k}

    # (3) it completes on 2 GPUs (no more passes: nothing changes its count now)
    done = wait_ended(cfg, job_id, timeout_s=300)
    for other in (*newcomers, *fill):
        actions.cancel(other, cfg)
    log = (tmp_path / "elastic.out").read_text()
    starts = started_at(log)
    stopped = [int(line.split()[4].rstrip(",")) for line in log.splitlines()
               if line.startswith("emulated_train: SIGTERM: checkpointed step")]
    assert starts[0] == 0 and starts == sorted(starts), log
    assert starts[1:] == stopped, log          # each run resumes where the last one stopped
    assert log.count("emulated_train: done, 600 steps") == 1, log
    resized, requeued = resizes_in_journal(Path(env["WATTBATCH_RECONCILE_STATE_DIR"]))
    assert resized == {job_id: len(grown) + len(shrunk)}, resized   # none of the others
    assert done["JobState"] == "COMPLETED", done
    assert int(done["Restarts"]) == requeued[job_id] == len(starts) - 1, (done, requeued)
    assert [line.split()[1] for line in log.splitlines() if line.startswith("run ")] == \
        [str(k) for k in range(len(starts))]

    # (4) per run: GPU-seconds on the count it ran on, and energy
    deadline, rows = time.monotonic() + 60, []
    while len(rows) < len(starts) and time.monotonic() < deadline:
        out = run([sys.executable, "-m", "slurm_plugin.cli", "report", "--by", "run",
                   "--since", "now-1h", "--json"], env=env, timeout_s=60)
        rows = [r for r in json.loads(out.stdout)["rows"] if r["key"].startswith(f"{job_id}@")]
        time.sleep(2)
    assert len(rows) == len(starts), rows
    assert all(r["energy_kwh"] > 0 and r["gpu_hours"] > 0 for r in rows), rows


def test_a_job_past_its_due_time_is_admitted_by_a_shrink_that_waiting_would_have_beaten(
        localcluster, env, tmp_path):
    """``fairness_factor`` live: a shrink costs more than the newcomer's predicted wait (a
    restart cost of 3,000 s), so passes keep it waiting; its due time is set from the wait
    predicted when it first waits (the fillers' 1-minute limits); the fillers' limits are then
    raised, so the prediction slips; once the due time passes, a pass shrinks the elastic job
    for it whatever that costs, and says so."""
    cfg = localcluster.config()
    env = {**env, "WATTBATCH_ELASTIC_RESTART_COST_S": "3000",
           "WATTBATCH_ELASTIC_FAIRNESS_FACTOR": "1"}
    # on a whole node from the start (at its maximum: it never grows), long enough a limit
    # for a shrink to be allowed with a 3,000 s restart
    job_id = submit(env, tmp_path, "due", steps=2000, step_s=0.3, epoch=20, gpus=4,
                    limit_min=120)
    job = wait_job(cfg, job_id, lambda j: j.running and gpus(j) == 4)
    fill = []
    for other in sorted({n.name for n in snapshot(cfg).nodes} - {job.nodes[0]}):
        out = run(["sbatch", "--parsable", "-w", other, "--gres=gpu:4", "-t", "1",
                   "--output=/dev/null", "--wrap=sleep 600"], env=env, timeout_s=30)
        fill.append(out.stdout.strip().split(";")[0])
    for f in fill:
        wait_job(cfg, f, lambda j: j.running)
    newcomer = run(["sbatch", "--parsable", "--gres=gpu:1", "-t", "5", "--output=/dev/null",
                    "--wrap=sleep 600"], env=env, timeout_s=30).stdout.strip().split(";")[0]
    wait_job(cfg, newcomer, lambda j: j.pending)
    time.sleep(5)       # past the elastic job's hysteresis (4 s from its start)
    hist_file = Path(env["WATTBATCH_RECONCILE_STATE_DIR"]) / HISTORY_FILE
    try:
        first = reconcile(env)
        due = History(hist_file).view().get(f"elastic:due:{newcomer}")
        submitted = snapshot(cfg).jobs[newcomer].submit_s
        # due: its submission plus its wait so far and the fillers' remaining minute at most
        assert due is not None and submitted < due <= time.time() + 61, (due, submitted)
        assert not [a for a in first if a["kind"] == "resize"], first
        for f in fill:      # the prediction slips: the GPUs now free 30 minutes on
            run(["scontrol", "update", f"JobId={f}", "TimeLimit=30"], env=env, timeout_s=30)
        shrunk, before = [], []
        deadline = due + 90
        while not shrunk:
            acts = [a for a in reconcile(env) if a["kind"] == "resize" and a["status"] == "done"]
            (shrunk if acts else before).append((time.time(), acts))
            assert time.time() < deadline, f"no shrink by {deadline - due:.0f} s past the due time"
            time.sleep(2)
        when, acts = shrunk[0]
        assert when >= due - 1, (when, due)     # not before its due time (clocks: 1 s)
        assert [(a["job_id"], a["gpus"]) for a in acts] == [(job_id, 3)], acts
        assert "past its due time" in acts[0]["why"] and newcomer in acts[0]["why"], acts
        wait_job(cfg, newcomer, lambda j: j.running, timeout_s=60)
    finally:
        for other in (job_id, newcomer, *fill):
            actions.cancel(other, cfg)


def test_with_order_queue_a_waiting_job_ages_into_earlier_queue_tiers(localcluster, env,
                                                                     tmp_path):
    """``elastic.order_queue`` live: the tier of the GPU-time a job asks (4 GPUs for 120
    minutes: 8 h, tier 4) reaches Slurm's Nice at submission (100 a tier, added to the job's
    own ``--nice=7``), and while the job waits, a reconcile pass moves it one tier earlier per
    ``tier_age_s`` waited (15 s here): its Nice drops and keeps the job's own 7, nothing else
    about it changes (still pending, not held, not requeued, its GPUs as asked), and a second
    pass at once does nothing more."""
    cfg = localcluster.config()
    env = {**env, "WATTBATCH_ELASTIC_ORDER_QUEUE": "true", "WATTBATCH_ELASTIC_TIER_AGE_S": "15"}
    job_id, fill = "", []
    try:
        fill = fill_every_gpu(cfg, env)
        job_id = submit(env, tmp_path, "aging", steps=100, step_s=0.2, epoch=10, gpus=4,
                        limit_min=120, sbatch_args=("--nice=7",))
        shown = actions.show_job(job_id, cfg)
        assert shown["Nice"] == "407" and shown["JobState"] == "PENDING", shown
        submitted = snapshot(cfg).jobs[job_id].submit_s
        time.sleep(max(0.0, submitted + 32 - time.time()))
        before = time.time()
        acts = [a for a in reconcile(env) if a["job_id"] == job_id]
        after = time.time()
        # the tier the pass saw: 4 less one per 15 s waited, at some time within the pass
        tiers = set(range(4 - int((after - submitted) // 15), 4 - int((before - submitted) // 15)
                          + 1))
        assert [(a["kind"], a["status"], a["gpus"]) for a in acts] == [("resize", "done", 4)], \
            acts
        assert acts[0]["nice"] in tiers and acts[0]["nice"] < 4, (acts, tiers)
        assert "into queue tier" in acts[0]["why"], acts
        shown = actions.show_job(job_id, cfg)
        assert shown["Nice"] == str(7 + 100 * acts[0]["nice"]), shown
        assert shown["JobState"] == "PENDING" and shown["Restarts"] == "0", shown
        assert "Held" not in shown.get("Reason", "") and shown["TresPerNode"] == "gres:gpu:4", \
            shown
        again = [a for a in reconcile(env) if a["job_id"] == job_id and a["kind"] == "resize"]
        assert not again or time.time() - submitted >= 15 * (5 - acts[0]["nice"]) - 1, again
    finally:
        for other in (*fill, job_id):
            if other:
                actions.cancel(other, cfg)


@pytest.mark.parametrize("how", ["ignores-sigterm", "killed-in-checkpoint"])
def test_a_resized_job_that_cannot_checkpoint_resumes_from_its_last_checkpoint(
        localcluster, env, tmp_path, how):
    cfg = localcluster.config()
    # each checkpoint takes 20 s: Slurm's KillWait (5 s) ends the program inside one
    args = ("--ignore-sigterm",) if how == "ignores-sigterm" else ("--checkpoint-s", "20")
    steps = 60 if how == "ignores-sigterm" else 15
    job_id = submit(env, tmp_path, how, steps, 0.25, 5, *args)
    wait_job(cfg, job_id, lambda j: j.running)
    log = tmp_path / f"{how}.out"
    checkpoint = tmp_path / ".wattbatch" / "checkpoints" / job_id / "ckpt.json"
    deadline = time.monotonic() + 60
    while not checkpoint.exists():            # the first epoch's, where the default dir is
        assert time.monotonic() < deadline, f"no checkpoint at {checkpoint}"
        time.sleep(0.5)
    state = Path(env["WATTBATCH_RECONCILE_STATE_DIR"])

    class Resize:
        name = "test"

        def reconcile(self, ctx):
            return (Action("resize", job_id, "test", gpus=2, why="test: resize"),)

    result = reconcile_pass(policy=Resize(), snapshot=lambda: live.snapshot(cfg),
                            readings=Readings, actuator=live.SlurmActuator(cfg), state_dir=state)
    assert [o.status for o in result.outcomes] == ["done"], result.as_dict()
    # Slurm kills the program after KillWait; the job is requeued, never left held
    job = wait_job(cfg, job_id, lambda j: j.running and gpus(j) == 2, timeout_s=90)
    assert not actions.job_now(job_id, cfg)[1]
    done = wait_ended(cfg, job_id, timeout_s=120)
    text = log.read_text()
    starts = started_at(text)
    assert done["JobState"] == "COMPLETED" and done["Restarts"] == "1", done
    assert len(starts) == 2 and job.restart_count == 1, text
    assert starts[1] % 5 == 0 and starts[1] > 0, text   # an epoch's checkpoint, not lost
    if how == "ignores-sigterm":
        assert "SIGTERM ignored" in text, text
    # once: the first run's program did not outlive its kill and train on beside the second
    assert text.count(f"emulated_train: done, {steps} steps") == 1, text
