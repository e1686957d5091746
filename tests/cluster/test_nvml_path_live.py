"""The collector's NVML read path live: the local cluster's GPUs shown to it as NVML would
show them (``localcluster up --gpu-source emulated-nvml``, ``node/emulated_nvml.py``), so the
real ``Nvml`` wrapper, ``NvmlSource``, the attribution of processes to jobs (time-sliced, and
MPS clients under their server) and the ledger split a shared H100's energy, and each job's
record is held against the emulated truth.

The module brings the session's cluster down, runs one cluster of its own per way of sharing
a GPU (shards, then MPS; same ports, their own state directories) and puts the session's back
at the end."""

from __future__ import annotations

import pytest
from cluster_waits import own_cluster, wait_job

from slurm_plugin.localcluster.energy_check import compare, submit_group, truth, wait_records
from slurm_plugin.localcluster.render import type_prefix
from slurm_plugin.node.source import make_source
from slurm_plugin.telemetry.influx import quote_str

pytestmark = pytest.mark.cluster
H100 = "H100-80GB-HBM3"
APPS = ["vgg16", "lstm"]
DURATION_S = 60
SHARE = {"shard": 1, "mps": 50}      # what each job holds of the GPU: shards, or MPS percent
NODE, GPU = "gpu1", 1


@pytest.fixture(scope="module", params=list(SHARE))
def nvml_cluster(request, session_down):
    """An H100 cluster read through the NVML path, its GPUs shared by ``request.param``."""
    with own_cluster(session_down, f"nvml-{request.param}", gpu_model="H100",
                     gpu_source="emulated-nvml", share_gres=request.param) as cluster:
        yield cluster


def gpu_points(cluster, cfg, node: str, index: int, last_s: int) -> list[tuple[float, float]]:
    """(power_w, util_pct) of each ``gpu`` point the collector wrote for the GPU lately."""
    series = cluster.influx(cfg["influx.database"]).query(
        f'SELECT "power_w", "util_pct" FROM "gpu" WHERE "node" = {quote_str(node)} AND '
        f'"gpu" = {quote_str(str(index))} AND time > now() - {last_s}s')
    return [(row[1], row[2]) for s in series for row in s.values]


def test_a_shared_h100_read_through_nvml_is_split_as_its_truth(nvml_cluster):
    cfg = nvml_cluster.config()
    share_gres = nvml_cluster.spec.share_gres
    assert (cfg["node.gpu_source"], cfg["slurm.share_gres"]) == ("emulated-nvml", share_gres)
    jobs = submit_group(cfg, APPS, NODE, f"{type_prefix(H100)}g{GPU}", DURATION_S,
                        gres=share_gres, count=SHARE[share_gres])
    for job_id in jobs:
        wait_job(cfg, job_id, lambda j: j.running)
    # the site's source finds both jobs' processes on the GPU, with Slurm's shares and classes
    (reading,) = [r for r in make_source(cfg["node.gpu_source"], NODE, cfg).read()
                  if r.index == GPU]
    assert reading.model == H100
    assert sorted((r.job_id, r.shares, r.app) for r in reading.residents) == sorted(
        (j, SHARE[share_gres], app) for j, app in zip(jobs, APPS))

    records = wait_records(cfg, jobs, timeout_s=DURATION_S + 90)
    assert set(records) == set(jobs), records
    group = compare(records, truth(cfg))
    assert group["max_abs_error"] <= 0.05, group
    assert group["splits"] == ["util-class"], group     # the class weights of the NVML rule

    # the collector read the GPU through NVML: its points hold NVML's whole mW and percents
    busy = [(p, u) for p, u in gpu_points(nvml_cluster, cfg, NODE, GPU, 3 * DURATION_S)
            if u > 0]
    assert len(busy) >= DURATION_S // 4, busy
    assert all(u == round(u) and abs(p * 1000 - round(p * 1000)) < 1e-6 for p, u in busy), busy
