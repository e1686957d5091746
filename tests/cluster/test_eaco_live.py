"""EaCO live on the local cluster: wattbatch co-locates, the emulated GPUs report the energy to
InfluxDB, and wattctl reconcile observes the first epoch together and undoes a bad pair.

The emulated GPUs draw what the calibrated physics says (docs/physics.md): alexnet + resnet18
share one GPU with slowdowns of ~1.01, while two vgg16 jobs slow each other ~2.8x (Gavel's
measured pair). Test 2 seeds the history with a stale optimistic figure for the vgg16 pair, as
an earlier measurement on other hardware would be, so that wattbatch co-locates the pair and the
observation has to catch it.
"""

from __future__ import annotations

import getpass
import json
import sys
import time
from pathlib import Path

import pytest
from cluster_waits import wait_job

from slurm_plugin.history import FILE_NAME, History
from slurm_plugin.model import Job
from slurm_plugin.proc import run
from slurm_plugin.slurm.actions import GPU_FOR_SHARDS
from slurm_plugin.slurm.cli import slurm_release
from slurm_plugin.slurm.formats import release_tuple
from slurm_plugin.slurm.snapshot import snapshot
from slurm_plugin.telemetry.influx import InfluxClient, quote_str
from slurm_plugin.telemetry.readers import latest_progress

pytestmark = pytest.mark.cluster
TRAIN = f"{sys.executable} -m slurm_plugin.emulated_train"
STEP_S = 0.2
SAMPLES_PER_STEP = 32


@pytest.fixture()
def env(localcluster, tmp_path) -> dict[str, str]:
    """The cluster's environment with a reconcile state dir (journal, history) of this test."""
    state = tmp_path / "reconcile"
    state.mkdir()
    return {**localcluster.env, "WATTBATCH_RECONCILE_STATE_DIR": str(state)}


def submit(env: dict, tmp_path: Path, name: str, app: str, share: bool, steps: int,
           steps_per_epoch: int = 10) -> tuple[str, str]:
    """Submit an emulated training job through wattbatch with EaCO; (job id, explanation)."""
    script = tmp_path / f"{name}.sh"
    script.write_text(
        f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --output={tmp_path}/{name}-%j.out\n"
        f"{TRAIN} --steps {steps} --step-s {STEP_S} --steps-per-epoch {steps_per_epoch} "
        f"--samples-per-step {SAMPLES_PER_STEP} --checkpoint {tmp_path}/{name}.ckpt\n")
    argv = [sys.executable, "-m", "wrapper.cli", "--parsable", "--wb-policy=eaco", "--wb-explain",
            f"--wb-app={app}", "--wb-share" if share else "--wb-no-share", "--gres=gpu:1",
            "-t", "10", str(script)]
    done = run(argv, env=env, timeout_s=60)
    return done.stdout.strip().split(";")[0], done.stderr




def wait_gone(cfg, ids: list[str], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while any(j in snapshot(cfg).jobs for j in ids):
        if time.monotonic() > deadline:
            pytest.fail(f"jobs {ids} still in the queue after {timeout_s:g} s")
        time.sleep(0.5)


def gpus_of(job: Job) -> set[tuple[str, int]]:
    return {(u.node, u.index) for u in job.uses}


def counter_at(rows: list[dict], t_s: float) -> float:
    """The energy counter at ``t_s``, linear between the readings around it (the emulated
    counter integrates power linearly between reads, so this is exact up to the snapshot)."""
    before = [r for r in rows if r["time"] <= t_s]
    after = [r for r in rows if r["time"] >= t_s]
    assert before and after, f"no readings around {t_s}: {rows}"
    a, b = before[-1], after[0]
    if b["time"] == a["time"]:
        return a["energy_j"]
    return a["energy_j"] + (b["energy_j"] - a["energy_j"]) * (t_s - a["time"]) / (b["time"]
                                                                                  - a["time"])


def gpu_energy_j(client: InfluxClient, cluster: str, gpus: set[tuple[str, int]],
                 start_s: float, end_s: float) -> tuple[float, str]:
    """Energy the GPUs drew in exactly [start_s, end_s], from each one's energy counter read
    around both ends (so that when a reading falls makes no difference); and the readings
    (seconds from start_s, W) for the record."""
    total, trace = 0.0, []
    for node, index in sorted(gpus):
        where = (f'"cluster" = {quote_str(cluster)} AND "node" = {quote_str(node)} AND '
                 f'"gpu" = {quote_str(str(index))}')
        series = client.query(
            f'SELECT "power_w", "energy_j" FROM "gpu" WHERE {where} AND '
            f'time >= {int((start_s - 30) * 1e9)} AND time <= {int((end_s + 30) * 1e9)}')
        rows = [r for s in series for r in s.rows() if r["energy_j"] is not None]
        total += counter_at(rows, end_s) - counter_at(rows, start_s)
        trace.append(f"{node}:{index} " + " ".join(
            f"{r['time'] - start_s:.1f}s/{r['power_w']:.0f}W" for r in rows
            if start_s - 3 <= r["time"] <= end_s + 3))
    return total, "; ".join(trace)


def run_pair(localcluster, env, tmp_path, share: bool) -> tuple[float, float, set, str]:
    """alexnet + resnet18, 100 steps each; (GPU energy J from the first start until both were
    seen gone, that window's seconds, GPUs used, readings)."""
    cfg = localcluster.config()
    tag = "shared" if share else "apart"
    a, _ = submit(env, tmp_path, f"alexnet-{tag}", "alexnet", share, steps=100)
    job_a = wait_job(cfg, a, lambda j: j.running)
    b, why = submit(env, tmp_path, f"resnet18-{tag}", "resnet18", share, steps=100)
    job_b = wait_job(cfg, b, lambda j: j.running)
    start_s = min(job_a.start_s, job_b.start_s)
    used = gpus_of(job_a) | gpus_of(job_b)
    if share:
        assert gpus_of(job_a) == gpus_of(job_b), why
        assert all(u.shards > 0 for u in job_a.uses + job_b.uses)
    wait_gone(cfg, [a, b])
    end_s = time.time()
    time.sleep(5)                        # two collector intervals: readings after the end
    client = InfluxClient.from_config(cfg)
    energy_j, trace = gpu_energy_j(client, cfg["cluster.name"], used, start_s, end_s)
    return energy_j, end_s - start_s, used, trace


def test_compatible_pair_shares_one_gpu_and_uses_less_energy(localcluster, env, tmp_path):
    shared_j, shared_s, shared_gpus, shared_trace = run_pair(localcluster, env, tmp_path, True)
    apart_j, apart_s, apart_gpus, apart_trace = run_pair(localcluster, env, tmp_path, False)
    assert len(shared_gpus) == 1 and len(apart_gpus) == 2
    print(f"alexnet+resnet18: shared {shared_j:.0f} J in {shared_s:.1f} s on {shared_gpus}; "
          f"apart {apart_j:.0f} J in {apart_s:.1f} s on {apart_gpus}\n"
          f"shared: {shared_trace}\napart: {apart_trace}")
    # physics: ~127 W on one GPU against ~169 W on two while both run, idle 41 W each
    assert shared_j < 0.85 * apart_j


def reconcile(env: dict) -> dict:
    out = run([sys.executable, "-m", "slurm_plugin.cli", "reconcile", "--policy", "eaco",
               "--json"], env=env, timeout_s=60).stdout
    return json.loads(out)


def test_bad_pair_is_undone_after_one_epoch_and_not_colocated_again(localcluster, env, tmp_path):
    cfg = localcluster.config()
    state = Path(env["WATTBATCH_RECONCILE_STATE_DIR"])
    user = getpass.getuser()
    seed = History(state / FILE_NAME)
    seed.add("pair:vgg16+vgg16", 1.03)                       # stale, optimistic
    seed.add(f"job:{user}:vgg16:solo_rate", SAMPLES_PER_STEP / STEP_S)   # samples/s alone
    seed.save()

    a, _ = submit(env, tmp_path, "vgg16-a", "vgg16", True, steps=300)
    wait_job(cfg, a, lambda j: j.running)
    b, why = submit(env, tmp_path, "vgg16-b", "vgg16", True, steps=300)
    job_b = wait_job(cfg, b, lambda j: j.running)
    job_a = snapshot(cfg).jobs[a]
    assert gpus_of(job_a) == gpus_of(job_b), f"not co-located: {why}"

    client = InfluxClient.from_config(cfg)

    def steps() -> dict[str, int]:
        got = latest_progress(client, time.time(), job_ids=(a, b))
        return {j: got[j].step if j in got else 0 for j in (a, b)}

    deadline = time.monotonic() + 30
    while min(steps().values()) < 1:                 # both stepping
        assert time.monotonic() < deadline, "the jobs report no progress"
        time.sleep(0.5)
    first = reconcile(env)
    assert [x["kind"] for x in first["actions"]] == ["observe"], json.dumps(first)
    marks = {j: History(state / FILE_NAME).view()[f"mark:{min(a, b, key=int)}+"
                                                  f"{max(a, b, key=int)}:{j}:step"] for j in (a, b)}
    deadline = time.monotonic() + 60                 # one epoch (10 steps) together, slowed ~2.8x
    while any(s < marks[j] + 10 for j, s in steps().items()):
        assert time.monotonic() < deadline, f"no epoch together: {steps()} from {marks}"
        time.sleep(0.5)
    second = reconcile(env)
    moves = [x for x in second["actions"] if x["kind"] == "move_exclusive"]
    assert len(moves) == 1 and moves[0]["status"] == "done", json.dumps(second)
    move = moves[0]
    assert move["predicted"]["predicted_slowdown"] == pytest.approx(1.03)
    assert move["predicted"]["observed_slowdown"] > 2.0
    moved, stayed = move["job_id"], ({a, b} - {move["job_id"]}).pop()
    recorded = client.query('SELECT "job_id" FROM "reconcile_action" WHERE '
                            '"kind" = \'move_exclusive\' AND "status" = \'done\'')
    assert moved in [v[1] for s in recorded for v in s.values]    # for the dashboard
    before = steps()[moved]

    after = wait_job(cfg, moved, lambda j: j.running and j.restart_count == 1, timeout_s=60)
    # exclusive: a whole GPU on 24.11+; on 22.05, which cannot turn shards into gres:gpu,
    # every shard of one GPU
    whole = release_tuple(slurm_release(cfg)) >= GPU_FOR_SHARDS
    assert [u.shards for u in after.uses] == [0 if whole else cfg["slurm.shards_per_gpu"]]
    now = snapshot(cfg)
    node, index = next(iter(gpus_of(after)))
    assert list(now.node(node).gpus[index].job_ids) == [moved]
    assert gpus_of(after).isdisjoint(gpus_of(now.jobs[stayed]))
    deadline, resumed, log = time.monotonic() + 30, [], ""
    while not resumed:                        # the restart's output (the file starts afresh)
        assert time.monotonic() < deadline, f"the restarted job printed no start: {log!r}"
        time.sleep(0.5)
        log = next(tmp_path.glob(f"*-{moved}.out")).read_text()
        resumed = [int(line.split()[4]) for line in log.splitlines()
                   if line.startswith("emulated_train: starting at step")]
    assert resumed and resumed[-1] >= max(1, before - 1), log    # progress kept
    history = History(state / FILE_NAME).view()
    assert history["pair:vgg16+vgg16"] > 1.1 + 0.3

    # (3) the same pair submitted again is not co-located: the history now says it slows
    c, _ = submit(env, tmp_path, "vgg16-c", "vgg16", True, steps=100)
    d, why_d = submit(env, tmp_path, "vgg16-d", "vgg16", True, steps=100)
    jobs = [wait_job(cfg, j, lambda j: j.running) for j in (c, d)]
    assert gpus_of(jobs[0]).isdisjoint(gpus_of(jobs[1])), why_d
    assert "vgg16" in why_d
    print(why_d)


def test_a_job_left_waiting_on_its_pinned_gpu_is_unpinned_and_starts_elsewhere(
        localcluster, env, tmp_path):
    """A job pinned to shares of GPU g3 of gpu4 (as EaCO pins one) while a job holds that GPU
    whole: it waits for it, however many GPUs are free. Once it has waited ``pin_wait_s``,
    reconcile has it ask for whole GPUs anywhere, and it starts on another node."""
    cfg = localcluster.config()
    out = ["-o", "/dev/null", "-t", "5", "--parsable"]
    holder = run(["sbatch", *out, "-w", "gpu4", "--gres=gpu:g3:1", "--wrap", "sleep 120"],
                 env=env, timeout_s=30).stdout.strip()
    wait_job(cfg, holder, lambda j: j.running)
    share = cfg["slurm.share_gres"]
    pinned = run(["sbatch", *out, "-w", "gpu4", f"--gres={share}:g3:2", "--wrap", "sleep 60"],
                 env=env, timeout_s=30).stdout.strip()
    job = wait_job(cfg, pinned, lambda j: j.pending and j.pinned)
    assert job.pinned == (("gpu4", "g3", 2),)
    env = {**env, "WATTBATCH_EACO_PIN_WAIT_S": "1"}
    time.sleep(max(0.0, job.submit_s + 1.5 - time.time()))
    first = reconcile(env)
    unpins = [x for x in first["actions"] if x["kind"] == "unpin"]
    assert [(x["job_id"], x["status"]) for x in unpins] == [(pinned, "done")], json.dumps(first)
    assert "pinned to 2 shares of GPU g3 on gpu4" in unpins[0]["why"]
    started = wait_job(cfg, pinned, lambda j: j.running, timeout_s=60)
    assert all(u.node != "gpu4" for u in started.uses), started.uses
    assert not [x for x in reconcile(env)["actions"] if x["kind"] == "unpin"]
    assert snapshot(cfg).jobs[holder].running                 # the holder was not touched
