"""The ``ones`` batch-size advice live on the local cluster: two emulated training jobs
submitted with ``--wb-policy=ones --wb-batch-size=128-1024 --wb-app=cifar10`` on one GPU each;
one reports its batch through the progress API (``--batch-size 128``), the other never does.
A ``wattctl reconcile --policy ones`` pass advises the first a bigger batch (Pollux's cifar10
profile: more goodput on one GPU), journaled as a ``batch`` action and written to InfluxDB; the
running job reads the advice with its next progress report and changes its batch without a
restart (Slurm's ``Restarts`` stays 0, its steps go on); a later pass advises nothing more.
The job that never asks is neither advised nor resized. ``wattctl report --batches`` shows the
first job's history: it started at 128, was advised the new batch, and ran at it.
Across GPU counts: a journaled resize that sets a batch requeues an elastic job, and its next
run starts at that batch, handed to it in ``$WATTBATCH_BATCH_SIZE``/``$WATTBATCH_LR_SCALE``.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest
from cluster_waits import wait_job

from slurm_plugin import live
from slurm_plugin.journal import Journal
from slurm_plugin.model import Action, Readings
from slurm_plugin.proc import run
from slurm_plugin.reconcile import reconcile_pass
from slurm_plugin.slurm import actions

pytestmark = pytest.mark.cluster
TRAIN = f"{sys.executable} -m slurm_plugin.emulated_train"
# a (re)started job may be re-batched at once here (the site default waits 300 s)
SETTINGS = {"WATTBATCH_ONES_MIN_INTERVAL_S": "0", "WATTBATCH_SERVER": "0"}


@pytest.fixture()
def env(localcluster, tmp_path) -> dict[str, str]:
    state = tmp_path / "reconcile"
    state.mkdir()
    return {**localcluster.env, **SETTINGS, "WATTBATCH_RECONCILE_STATE_DIR": str(state)}


def submit(env: dict, tmp_path: Path, name: str, *train_args: str, wb: tuple = ()) -> str:
    """An emulated cifar10 job through wattbatch with a batch range, 2 h limit (the
    policy only advises a batch whose predicted run fits within the limit)."""
    script = tmp_path / f"{name}.sh"
    script.write_text(
        f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --output={tmp_path}/{name}.out\n"
        "#SBATCH --open-mode=append\n"
        'echo "batch env ${WATTBATCH_BATCH_SIZE:-none} lr ${WATTBATCH_LR_SCALE:-none} '
        'range $WATTBATCH_BATCH_RANGE"\n'
        f"{TRAIN} --steps 3000 --step-s 0.2 --steps-per-epoch 20 "
        f'--checkpoint "{tmp_path}/{name}.ckpt" {" ".join(train_args)}\n')
    done = run([sys.executable, "-m", "wrapper.cli", "--parsable", "--wb-policy=ones",
                "--wb-batch-size=128-1024", "--wb-lr-scaling=sqrt", "--wb-app=cifar10",
                "--gres=gpu:1", "-t", "120", *wb, str(script)],
               env=env, cwd=str(tmp_path), timeout_s=60)
    (tmp_path / f"{name}.submit.err").write_text(done.stderr)
    return done.stdout.strip().split(";")[0]


def reconcile(env: dict) -> list[dict]:
    out = run([sys.executable, "-m", "slurm_plugin.cli", "reconcile", "--policy", "ones",
               "--json"], env=env, timeout_s=120)
    return json.loads(out.stdout)["actions"]


def progress_fields(env: dict, job_id: str, timeout_s: float, ok) -> dict:
    """The job's newest progress point, once ``ok(fields)``."""
    from slurm_plugin.telemetry.influx import InfluxClient, quote_str
    from slurm_plugin import config

    client = InfluxClient.from_config(config.load(environ=env))
    deadline, last = time.monotonic() + timeout_s, {}
    while True:
        for s in client.query(f'SELECT * FROM "job_progress" WHERE "job_id" = '
                              f'{quote_str(job_id)} ORDER BY time DESC LIMIT 1'):
            last = s.rows()[0] if s.rows() else {}
        if last and ok(last):
            return last
        if time.monotonic() > deadline:
            pytest.fail(f"job {job_id}: progress not as expected after {timeout_s:g} s: {last}")
        time.sleep(0.5)


def test_a_running_job_follows_the_batch_advice_without_a_restart(localcluster, env, tmp_path):
    cfg = localcluster.config()
    asks = submit(env, tmp_path, "asks", "--batch-size", "128", wb=("--wb-explain",))
    explained = (tmp_path / "asks.submit.err").read_text()
    assert "wattbatch: explain: batch size 128-1024 (sqrt learning-rate rule)" in explained
    assert "wattctl report --batches --job JOBID" in explained, explained
    never = submit(env, tmp_path, "never")
    for jid in (asks, never):
        job = wait_job(cfg, jid, lambda j: j.running, timeout_s=60)
        assert (job.app, job.min_batch_size, job.max_batch_size, job.lr_scaling) == \
            ("cifar10", 128, 1024, "sqrt"), job
    progress_fields(env, asks, 60, lambda f: f.get("batch_size") == 128)
    progress_fields(env, never, 60, lambda f: f.get("step", 0) > 0)

    # (1) a pass advises the job that reports its batch a bigger one, on its one GPU
    deadline, advised = time.monotonic() + 60, []
    while not advised:
        acts = reconcile(env)
        assert not [a for a in acts if a["kind"] == "resize"], acts
        assert not [a for a in acts if a["job_id"] == never and a["kind"] != "observe"], acts
        advised = [a for a in acts if a["kind"] == "batch" and a["status"] == "done"]
        if not advised:
            assert time.monotonic() < deadline, f"no batch advice after 60 s: {acts}"
            time.sleep(2)
    assert [a["job_id"] for a in advised] == [asks], advised
    new = advised[0]["batch_size"]
    assert 128 < new <= 1024 and advised[0]["lr_scale"] == pytest.approx((new / 128) ** 0.5)

    # the advice point, signed with the job's key on a site with progress keys (the local
    # cluster's): the job takes only signed advice
    from slurm_plugin import config
    from slurm_plugin.telemetry.influx import InfluxClient, quote_str
    site = config.load(environ=env)
    rows = [r for s in InfluxClient.from_config(site).query(
        f'SELECT * FROM "job_advice" WHERE "job_id" = {quote_str(asks)} GROUP BY "job_id"')
        for r in s.rows()]
    assert [r["batch_size"] for r in rows] == [new], rows
    assert bool(rows[0].get("sig")) == bool(site["progress.site_key_file"]), rows

    # (2) the running job picks it up with its next report: same run, no restart
    fields = progress_fields(env, asks, 30, lambda f: f.get("batch_size") == new)
    assert fields["restart_count"] == 0, fields
    shown = actions.show_job(asks, cfg)
    assert shown["JobState"] == "RUNNING" and shown["Restarts"] == "0", shown
    log = (tmp_path / "asks.out").read_text()
    assert f"emulated_train: batch 128 -> {new} (lr x " in log, log
    assert log.count("emulated_train: starting at step") == 1, log
    assert re.search(r"starting at step 0 of 3000 on 1 GPUs .*at batch 128\n", log), log

    # (3) the job runs at the advised batch now: a later pass advises nothing more
    again = reconcile(env)
    assert not [a for a in again if a["kind"] in ("batch", "resize")], again
    # the job that never asked kept its batch (it reports none) and its run
    assert progress_fields(env, never, 10, lambda f: True).get("batch_size") is None
    assert actions.show_job(never, cfg)["Restarts"] == "0"
    assert "emulated_train: batch" not in (tmp_path / "never.out").read_text()

    # (4) the journal has the advice; the batch history shows in wattctl report
    entries = [e for e in Journal(Path(env["WATTBATCH_RECONCILE_STATE_DIR"]) / "journal.jsonl")
               .entries() if e.action["kind"] == "batch"]
    assert [(e.event, e.action["job_id"], e.action["batch_size"]) for e in entries] == \
        [("begin", asks, new), ("step:advise", asks, new), ("done", asks, new)], entries
    out = run([sys.executable, "-m", "slurm_plugin.cli", "report", "--batches", "--since",
               "now-1h", "--json"], env=env, timeout_s=60)
    jobs = json.loads(out.stdout)["jobs"]
    assert never not in jobs, jobs
    assert [(e["source"], e["batch_size"]) for e in jobs[asks]] == \
        [("job", 128), ("advice", new), ("job", new)], jobs[asks]
    text = run([sys.executable, "-m", "slurm_plugin.cli", "report", "--batches", "--job", asks,
                "--since", "now-1h"], env=env, timeout_s=60).stdout
    assert f"{asks}  " in text and "advice" in text and f"ones: batch 128->{new}" in text, text
    for jid in (asks, never):
        actions.cancel(jid, cfg)


def test_a_resize_that_sets_a_batch_hands_it_to_the_restarted_job(localcluster, env, tmp_path):
    cfg = localcluster.config()
    job_id = submit(env, tmp_path, "moved", "--batch-size", "128", wb=("--wb-elastic=1-2",))
    wait_job(cfg, job_id, lambda j: j.running, timeout_s=60)
    progress_fields(env, job_id, 60, lambda f: f.get("step", 0) >= 3)

    class Resize:
        name = "test"

        def reconcile(self, ctx):
            return (Action("resize", job_id, "test", gpus=2, batch_size=256, lr_scale=2 ** 0.5,
                           why="test: 1->2 GPUs, batch 128->256",
                           predicted={"from_batch_size": 128}),)

    state = Path(env["WATTBATCH_RECONCILE_STATE_DIR"])
    result = reconcile_pass(policy=Resize(), snapshot=lambda: live.snapshot(cfg),
                            readings=Readings, actuator=live.SlurmActuator(cfg), state_dir=state)
    assert [o.status for o in result.outcomes] == ["done"], result.as_dict()
    steps = [e.event for e in Journal(state / "journal.jsonl").entries()
             if e.event != "wait:completing"]      # the job may still be stopping at release
    assert steps == ["begin", "step:requeue_hold", "step:set_gpus", "step:advise",
                     "step:release", "step:start_now", "done"], steps
    wait_job(cfg, job_id, lambda j: j.running and len(j.uses) == 2, timeout_s=90)
    fields = progress_fields(env, job_id, 60,
                             lambda f: f.get("restart_count") == 1 and f.get("batch_size"))
    assert fields["batch_size"] == 256, fields
    log = (tmp_path / "moved.out").read_text()
    assert "batch env none lr none range 128-1024" in log, log        # the first run
    assert "batch env 256 lr 1.41421 range 128-1024" in log, log      # the restarted one
    assert re.search(r" on 2 GPUs .*at batch 256\n", log), log
    assert actions.show_job(job_id, cfg)["Restarts"] == "1"
    actions.cancel(job_id, cfg)
