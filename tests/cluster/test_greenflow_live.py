"""GreenFlow live on the local cluster, with a carbon series of its own (a CSV file through
``carbon.file``) whose low lies a few hours ahead, and a budget already overspent (seeded in the
reconcile history, so carbon weighs fully):

- a deferrable job (``--wb-slack=6h``) is submitted with ``--begin`` at the forecast low;
- when the forecast changes, a reconcile pass moves the pending job's start to the new low
  (the job's slack reaches reconcile through job_submit.lua's AdminComment record);
- a job over two whole nodes is packed on one leaf switch of the cluster's topology.conf;
- a per-account budget: a job of the account over it is deferred, its running jobs charged.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from carbon_seed import overspent, series as _series
from cluster_waits import wait_job

from slurm_plugin.history import FILE_NAME, History
from slurm_plugin.policy.greenflow.observe import (LAST_S, PERIOD_START_S, SPENT_G, WEIGHT,
                                                  account_spent_key, account_weight_key)
from slurm_plugin.proc import run
from slurm_plugin.slurm.snapshot import snapshot

pytestmark = pytest.mark.cluster
HOUR_S = 3600.0


def _bin(name: str) -> str:
    """This environment's command (the tests may run without its bin directory on PATH)."""
    return str(Path(sys.executable).with_name(name))


@pytest.fixture()
def env(localcluster, tmp_path) -> dict[str, str]:
    state = tmp_path / "reconcile"
    state.mkdir()
    overspent(state, time.time())
    return {**localcluster.env, "WATTBATCH_RECONCILE_STATE_DIR": str(state),
            "WATTBATCH_CARBON_FILE": str(tmp_path / "carbon.csv"),
            "WATTBATCH_GREENFLOW_BUDGET_KG_PER_DAY": "1", "WATTBATCH_SERVER": "0"}


def _wattbatch(env, *argv, policy: str = "greenflow") -> tuple[str, str]:
    done = run([_bin("wattbatch"), "--parsable", f"--wb-policy={policy}", "--wb-explain",
                "--output=/dev/null", *argv], env=env, timeout_s=60)
    return done.stdout.strip().split(";")[0], done.stderr


def test_a_deferrable_job_starts_at_the_forecast_low_and_follows_a_new_forecast(
        localcluster, env, tmp_path):
    cfg = localcluster.config()
    low_s = _series(tmp_path / "carbon.csv", time.time(), low_at_h=3)
    job_id, why = _wattbatch(env, "--wb-slack=6h", "--wb-app=resnet18", "-t", "30",
                             "--gres=gpu:1", "--wrap=sleep 5")
    assert "sbatch options added: --begin=" in why, why
    job = wait_job(cfg, job_id, lambda j: j.pending)
    assert job.begin_s == pytest.approx(low_s, abs=1), why
    assert job.slack_s == 6 * HOUR_S                     # recorded by job_submit.lua

    new_low_s = _series(tmp_path / "carbon.csv", time.time(), low_at_h=5)
    done = run([_bin("wattctl"), "reconcile", "--policy", "greenflow", "--json"], env=env,
               timeout_s=120)
    moved = [a for a in json.loads(done.stdout)["actions"] if a["kind"] == "defer"]
    assert [(a["job_id"], a["status"]) for a in moved] == [(job_id, "done")], done.stdout
    assert snapshot(cfg).jobs[job_id].begin_s == pytest.approx(new_low_s, abs=1)


def test_with_only_the_past_stored_the_builtin_forecast_finds_the_daily_low(
        localcluster, env, tmp_path):
    """A site that stores only past intensities (no forecast imported): ten days of history
    whose low (100 g/kWh, 400 otherwise) falls at the same hour every day, 3 hours from now.
    The built-in forecast over that history puts the next low there, and a
    deferrable job gets ``--begin`` at it (before, no point ahead meant "carbon data missing")."""
    cfg = localcluster.config()
    base = (time.time() // HOUR_S) * HOUR_S
    low_s = base + 3 * HOUR_S
    rows = ["Time,Carbon Intensity"]
    for k in range(10 * 24, -1, -1):
        t = base - k * HOUR_S
        value = 100.0 if t % 86400 == low_s % 86400 else 400.0
        rows.append(f"{datetime.fromtimestamp(t, timezone.utc):%Y-%m-%d %H:%M:%S},{value}")
    (tmp_path / "carbon.csv").write_text("\n".join(rows) + "\n")
    job_id, why = _wattbatch(env, "--wb-slack=6h", "--wb-app=resnet18", "-t", "30",
                             "--gres=gpu:1", "--wrap=sleep 5")
    try:
        assert "carbon data missing" not in why and "sbatch options added: --begin=" in why, why
        job = wait_job(cfg, job_id, lambda j: j.pending)
        assert job.begin_s == pytest.approx(low_s, abs=1), why
    finally:
        run(["scancel", job_id], env=env, timeout_s=30)


def test_a_series_that_ended_days_ago_is_not_planned_with(localcluster, env, tmp_path):
    """The same daily series, but its newest point three days old (over carbon.max_age_s, two
    days by default): wattbatch says the data is stale and submits the job as asked, with no
    ``--begin``, rather than planning with a forecast of old data."""
    cfg = localcluster.config()
    end = (time.time() // HOUR_S) * HOUR_S - 3 * 86400
    rows = ["Time,Carbon Intensity"]
    for k in range(10 * 24, -1, -1):
        t = end - k * HOUR_S
        value = 100.0 if k % 24 == 3 else 400.0
        rows.append(f"{datetime.fromtimestamp(t, timezone.utc):%Y-%m-%d %H:%M:%S},{value}")
    (tmp_path / "carbon.csv").write_text("\n".join(rows) + "\n")
    job_id, why = _wattbatch(env, "--wb-slack=6h", "--wb-app=resnet18", "-t", "30",
                             "--gres=gpu:1", "--wrap=sleep 5")
    try:
        assert "carbon.max_age_s" in why and "stale" in why, why
        assert "--begin=" not in why, why
        job = wait_job(cfg, job_id, lambda j: j.running or j.pending)
        assert job.begin_s is None or job.begin_s <= time.time() + 60, why
        # reconcile warns where its policy plans with carbon, and only there
        for policy, warned in (("greenflow", True), ("eaco", False)):
            done = run([_bin("wattctl"), "reconcile", "--policy", policy, "--dry-run",
                        "--json"], env=env, timeout_s=120)
            said = json.loads(done.stdout)["warnings"]
            assert any("carbon.max_age_s" in w for w in said) is warned, (policy, said)
    finally:
        run(["scancel", job_id], env=env, timeout_s=30)


def test_only_a_policy_that_plans_with_carbon_reads_it(localcluster, env, tmp_path):
    """A carbon source that cannot be read: greenflow's submission says so and goes in as
    asked; eaco's, which reads the cluster and its GPU readings to place a sharing job, does
    not read carbon, so it is placed by the policy with no word of carbon."""
    (tmp_path / "carbon.csv").write_text("Time,Carbon Intensity\nyesterday,a lot\n")
    for policy, told in (("greenflow", True), ("eaco", False)):
        job_id, why = _wattbatch(env, "--wb-app=resnet18", "--wb-share", "-t", "30",
                                 "--gres=gpu:1", "--wrap=sleep 5", policy=policy)
        run(["scancel", job_id], env=env, timeout_s=30)
        assert job_id.isdigit(), (policy, why)
        assert ("carbon" in why.lower()) is told, (policy, why)
        assert ("submitting the job unchanged" in why) is told, (policy, why)
        if not told:
            assert "readings 0.0 ms" not in why, why        # it read them


def test_a_job_over_two_nodes_is_packed_on_one_switch(localcluster, env, tmp_path):
    cfg = localcluster.config()
    _series(tmp_path / "carbon.csv", time.time(), low_at_h=3)
    done = run(["sbatch", "--parsable", "-w", "gpu1", "--gres=gpu:4", "--output=/dev/null",
                "--wrap=sleep 120"], env=env, timeout_s=30)
    wait_job(cfg, done.stdout.strip().split(";")[0], lambda j: j.running)
    # free whole nodes: gpu2 on switch s0, gpu3 and gpu4 on s1; by name Slurm would take gpu2
    job_id, why = _wattbatch(env, "-N", "2", "--gres=gpu:4", "-t", "10", "--wrap=sleep 5")
    assert "--nodelist=gpu3,gpu4" in why, why
    job = wait_job(cfg, job_id, lambda j: j.nodes != ())
    assert sorted(job.nodes) == ["gpu3", "gpu4"]


def test_an_account_over_its_budget_is_deferred_and_charged_for_its_running_jobs(
        localcluster, env, tmp_path):
    """The cluster is under its budget (weight 0) and account ``root`` far over its own: a job
    of ``-A root`` is deferred to the low, the same job without ``-A`` starts now, and a
    reconcile pass charges root's running job to root's budget."""
    cfg = localcluster.config()
    now = time.time()
    state = Path(env["WATTBATCH_RECONCILE_STATE_DIR"])
    seed = History(state / FILE_NAME)
    for key, value in ((LAST_S, now - 2 * HOUR_S), (SPENT_G, 0.0), (WEIGHT, 0.0),
                       (PERIOD_START_S, (now // 86400) * 86400),
                       (account_spent_key("root"), 1e6), (account_weight_key("root"), 1.0)):
        seed.add(key, value)
    seed.save()
    env = {**env, "WATTBATCH_GREENFLOW_BUDGET_KG_PER_DAY": "100000",
           "WATTBATCH_GREENFLOW_ACCOUNTS": "root=0.001"}
    low_s = _series(tmp_path / "carbon.csv", now, low_at_h=3)
    argv = ("--wb-slack=6h", "--wb-app=resnet18", "-t", "30", "--gres=gpu:1", "--wrap=sleep 60")
    charged, why = _wattbatch(env, "-A", "root", *argv)
    assert "account root's budget" in why and "--begin=" in why, why
    assert wait_job(cfg, charged, lambda j: j.pending).begin_s == pytest.approx(low_s, abs=1)
    free, why = _wattbatch(env, *argv)
    assert "--begin=" not in why, why
    job = wait_job(cfg, free, lambda j: j.running)
    assert job.account == "root"                  # Slurm's default account, read by the snapshot
    done = run([_bin("wattctl"), "reconcile", "--policy", "greenflow", "--json"], env=env,
               timeout_s=120)
    seen = [a for a in json.loads(done.stdout)["actions"] if a["kind"] == "observe"]
    assert len(seen) == 1, done.stdout
    after = History(state / FILE_NAME).view()
    assert after[account_spent_key("root")] > 1e6, done.stdout
    assert after[account_weight_key("root")] == 1.0


def test_a_job_of_more_gpu_time_goes_later_in_slurms_queue(localcluster, env, tmp_path):
    """Queue tiers reach Slurm as --nice: a 4-GPU 10-hour job submitted first ends up behind
    a 1-GPU 10-minute job submitted after it (both pending until their --begin)."""
    from slurm_plugin.policy.queue import queue_tier
    from slurm_plugin.slurm.actions import show_job
    cfg = localcluster.config()
    _series(tmp_path / "carbon.csv", time.time(), low_at_h=3)
    env = {**env, "WATTBATCH_GREENFLOW_BUDGET_KG_PER_DAY": "0"}       # no budget: weight 0
    big, why = _wattbatch(env, "--begin=now+600", "--wb-app=resnet18", "-t", "600",
                          "--gres=gpu:4", "--wrap=sleep 5")
    tier = queue_tier(4 * 10 * HOUR_S)
    assert tier > 0 and f"--nice={100 * tier}" in why, why
    small, why = _wattbatch(env, "--begin=now+600", "--wb-app=resnet18", "-t", "10",
                            "--gres=gpu:1", "--wrap=sleep 5")
    assert "--nice" not in why, why
    shown = {j: show_job(j, cfg) for j in (big, small)}
    assert shown[big]["Nice"] == str(100 * tier) and shown[small]["Nice"] == "0"
    assert int(shown[big]["Priority"]) < int(shown[small]["Priority"]), shown
    run(["scancel", big, small], env=env, timeout_s=30)


def test_owed_work_is_priced_at_the_share_of_their_limits_that_ended_jobs_used(
        localcluster, env, tmp_path):
    """A job ends after a few seconds of its 10 minutes: sacct's record of it enters the
    measured share of time limits used (``Cluster.limit_use``), and greenflow's reconcile pass
    prices a queued 2-GPU 60-minute job at that share of its limit, not the whole limit."""
    from slurm_plugin.live import with_limit_use
    from slurm_plugin.policy.greenflow.observe import LIMIT_USE, OWED_G, OWED_GPU_W
    from slurm_plugin.slurm.limit_use import limit_use_of
    from slurm_plugin.slurm.snapshot import history
    cfg = localcluster.config()
    base = (time.time() // HOUR_S) * HOUR_S
    (tmp_path / "carbon.csv").write_text("Time,Carbon Intensity\n" + "".join(
        f"{datetime.fromtimestamp(base + k * HOUR_S, timezone.utc):%Y-%m-%d %H:%M:%S},400\n"
        for k in range(-3, 30)))                      # 400 g/kWh throughout
    short = run(["sbatch", "--parsable", "-t", "10", "--gres=gpu:1", "--output=/dev/null",
                 "--wrap=sleep 2"], env=env, timeout_s=30).stdout.strip().split(";")[0]
    deadline = time.monotonic() + 60
    while not [r for r in history(cfg, since="now-1hours") if r.job_id == short and r.end_s]:
        assert time.monotonic() < deadline, f"job {short} not ended in sacct after 60 s"
        time.sleep(1)
    mine = [r for r in history(cfg, since="now-1hours") if r.job_id == short][0]
    assert mine.alloc_tres.get("gres/gpu") == "1" and mine.time_limit_s == 600.0
    assert 1 <= mine.elapsed_s < 60
    use = with_limit_use(cfg, snapshot(cfg)).limit_use
    assert use is not None and 0 < use < 1
    assert use == pytest.approx(limit_use_of(history(cfg, since="now-7days"), time.time()))

    queued = run(["sbatch", "--parsable", "--begin=now+3600", "-t", "60", "--gres=gpu:2",
                  "--output=/dev/null", "--wrap=sleep 5"], env=env,
                 timeout_s=30).stdout.strip().split(";")[0]
    try:
        done = run([_bin("wattctl"), "reconcile", "--policy", "greenflow", "--json"], env=env,
                   timeout_s=120)
        data = json.loads(done.stdout)
        assert not [w for w in data["warnings"] if "time limits" in w], data["warnings"]
        seen = History(Path(env["WATTBATCH_RECONCILE_STATE_DIR"]) / FILE_NAME).view()
        owed_g = seen[OWED_G]
        assert seen[LIMIT_USE] == pytest.approx(max(use, 0.05), rel=0.05)
        # no GPU is allocated: an owed GPU is priced at OWED_GPU_W, at 400 g/kWh
        want_g = 2 * max(use, 0.05) * 3600 * OWED_GPU_W / 3.6e6 * 400
        assert owed_g == pytest.approx(want_g, rel=0.05), (owed_g, want_g, use)
    finally:
        run(["scancel", queued], env=env, timeout_s=30)


def test_a_budget_binds_on_queued_work_before_any_carbon_is_spent(localcluster, env, tmp_path):
    """Nothing spent yet in the day: a pass weighs carbon at 0 while the queue is empty, and at
    1 once a queued job owes more than the day's budget (its work counts as spent: the budget
    binds before the carbon is burnt, not after). The intensity is 0 up to this hour (the idle
    cluster spends nothing) and 400 g/kWh from the next (what owed work is priced at)."""
    from slurm_plugin.policy.greenflow.observe import OWED_G
    state = Path(env["WATTBATCH_RECONCILE_STATE_DIR"])
    env = {**env, "WATTBATCH_GREENFLOW_BUDGET_KG_PER_DAY": "0.001"}       # 1 g a day
    hour = time.time() // HOUR_S
    (tmp_path / "carbon.csv").write_text("Time,Carbon Intensity\n" + "".join(
        f"{datetime.fromtimestamp((hour + k) * HOUR_S, timezone.utc):%Y-%m-%d %H:%M:%S},"
        f"{0 if k <= 1 else 400}\n" for k in range(-3, 30)))

    def weight_after_a_pass() -> tuple[float, float]:
        now = time.time()
        (state / FILE_NAME).unlink(missing_ok=True)
        seed = History(state / FILE_NAME)
        for key, value in ((LAST_S, now - 2 * HOUR_S), (SPENT_G, 0.0), (WEIGHT, 0.5),
                           (PERIOD_START_S, (now // 86400) * 86400)):
            seed.add(key, value)
        seed.save()
        run([_bin("wattctl"), "reconcile", "--policy", "greenflow", "--json"], env=env,
            timeout_s=120)
        after = History(state / FILE_NAME).view()
        return after[WEIGHT], after[OWED_G]

    weight, owed = weight_after_a_pass()
    assert owed == 0.0 and weight < 0.5, (weight, owed)      # under pace, nothing owed
    held = run(["sbatch", "--parsable", "-H", "-t", "600", "--gres=gpu:4", "--output=/dev/null",
                "--wrap=sleep 5"], env=env, timeout_s=30).stdout.strip().split(";")[0]
    try:
        weight, owed = weight_after_a_pass()
        assert owed > 1.0 and weight == 1.0, (weight, owed)   # owes grams: over the 1 g budget
    finally:
        run(["scancel", held], env=env, timeout_s=30)
