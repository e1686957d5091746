"""The Slurm adapter against the real local cluster (4 nodes x 4 fake GPUs, typed shards)."""

from __future__ import annotations

import time

import pytest
from cluster_waits import wait_job

from slurm_plugin.errors import CommandError
from slurm_plugin.model import Cluster
from slurm_plugin.slurm import actions
from slurm_plugin.slurm.parse import parse_gres
from slurm_plugin.slurm.snapshot import history, snapshot

pytestmark = pytest.mark.cluster
SLEEP = "#!/bin/bash\nsleep 600\n"


@pytest.fixture()
def cfg(localcluster):
    return localcluster.config()


@pytest.fixture()
def opts(tmp_path) -> list[str]:
    return ["--output=/dev/null", f"--chdir={tmp_path}"]




def test_snapshot_shows_four_idle_nodes_with_four_free_gpus(cfg):
    cluster = snapshot(cfg)
    assert isinstance(cluster, Cluster) and not cluster.jobs
    assert [n.name for n in cluster.nodes] == ["gpu1", "gpu2", "gpu3", "gpu4"]
    for node in cluster.nodes:
        assert node.state == "idle" and node.available
        assert [(g.index, g.gres_type, g.shards_total) for g in node.gpus] == \
            [(i, f"g{i}", 4) for i in range(4)]
        assert len(node.free_gpus()) == 4
    assert cluster.gpu_count == 16


def test_submit_passes_sbatch_options_through(cfg, opts):
    job_id = actions.submit([*opts, "-J", "adapter-submit", "--gres=gpu:2", "-t", "30",
                             "--comment=app=resnet50", "-w", "gpu2"], SLEEP, cfg)
    shown = actions.show_job(job_id, cfg)
    assert shown["JobId"] == job_id and shown["JobName"] == "adapter-submit"
    assert shown["TresPerNode"] == "gres:gpu:2"
    assert shown["TimeLimit"] == "00:30:00" and shown["Comment"] == "app=resnet50"
    job = wait_job(cfg, job_id, lambda j: j.running)
    assert job.nodes == ("gpu2",) and job.gpus == 2 and job.app == "resnet50"
    assert len({u.index for u in job.uses}) == 2 and all(u.shards == 0 for u in job.uses)
    shown = actions.show_job(job_id, cfg)     # the allocation, seen the scontrol way
    held = [i for it in parse_gres(shown["GRES"]) for i in it.indexes]
    assert sorted(held) == sorted(u.index for u in job.uses)


def test_two_shard_jobs_pinned_to_one_gpu_share_it(cfg, opts):
    ids = [actions.submit([*opts, "-J", f"shard{k}", "-w", "gpu3", "--gres=shard:g2:2"],
                          SLEEP, cfg) for k in range(2)]
    jobs = [wait_job(cfg, j, lambda j: j.running) for j in ids]
    for job in jobs:
        assert [(u.node, u.index, u.shards) for u in job.uses] == [("gpu3", 2, 2)]
    gpu = snapshot(cfg).node("gpu3").gpus[2]
    assert sorted(gpu.shard_jobs) == sorted(ids) and gpu.shards_used == 4
    assert gpu.exclusive_job is None


def test_resize_running_job_to_new_gpu_count(cfg, opts):
    job_id = actions.submit([*opts, "-J", "resize-me", "--gres=gpu:1"], SLEEP, cfg)
    before = wait_job(cfg, job_id, lambda j: j.running)
    assert before.restart_count == 0 and len(before.uses) == 1
    actions.requeue_hold(job_id, cfg)
    held = wait_job(cfg, job_id, lambda j: j.pending, timeout_s=20)
    assert held.reason.startswith("JobHeld")
    actions.set_gpu_count(job_id, 3, cfg)
    actions.release(job_id, cfg)
    actions.start_now(job_id, cfg)
    after = wait_job(cfg, job_id, lambda j: j.running, timeout_s=60)
    assert after.restart_count == 1 and after.gpus == 3
    assert len({u.index for u in after.uses}) == 3


def test_defer_sets_start_time_and_cancel_removes_job(cfg, opts):
    job_id = actions.submit([*opts, "-J", "defer-me", "-H", "--gres=gpu:1"], SLEEP, cfg)
    begin_s = time.time() + 3600
    actions.defer(job_id, begin_s, cfg)
    assert actions.show_job(job_id, cfg)["StartTime"] == actions.slurm_time(begin_s)
    actions.cancel(job_id, cfg)
    job = snapshot(cfg).jobs.get(job_id)
    assert job is None or job.state == "CANCELLED"


def test_history_reports_real_exit_codes(cfg, opts):
    job_id = actions.submit([*opts, "-J", "exit7", "--wrap", "exit 7"], None, cfg)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        rec = {r.job_id: r for r in history(cfg, since="now-10minutes")}.get(job_id)
        if rec is not None and rec.state == "FAILED":
            break
        time.sleep(0.5)
    assert rec is not None and rec.state == "FAILED" and rec.exit_code == 7, rec


def test_controller_down_gives_clear_error(localcluster, tmp_path, monkeypatch):
    """A slurm.conf whose controller port nobody listens on: squeue --json exits 0 with an
    ``errors`` list there, which must be an error here, not an empty cluster. (Each command
    retries for about MessageTimeout seconds: 3 here.)"""
    conf = tmp_path / "slurm.conf"
    changed = {"SlurmctldPort": "1", "MessageTimeout": "3"}
    lines = [line.split("=", 1) for line in localcluster.slurm_conf.read_text().splitlines()]
    conf.write_text("".join(f"{kv[0]}={changed.get(kv[0], kv[-1])}\n" if len(kv) == 2
                            else f"{kv[0]}\n" for kv in lines))
    (tmp_path / "gres.conf").write_text((localcluster.slurm_conf.parent / "gres.conf").read_text())
    cfg = localcluster.config().with_overrides({"slurm.conf": str(conf), "slurm.timeout_s": 30})
    monkeypatch.delenv("SLURM_CONF")          # the site's slurm.conf counts when the user has none
    with pytest.raises(CommandError) as err:
        snapshot(cfg)
    assert "controller is not reachable" in str(err.value)
    assert str(conf) in str(err.value)
    with pytest.raises(CommandError, match="controller is not reachable"):
        actions.submit(["--wrap", "true"], None, cfg)
