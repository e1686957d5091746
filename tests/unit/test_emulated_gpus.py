"""Emulated GPUs: the physics applied to what Slurm placed on each fake GPU."""

from __future__ import annotations

import json

import pytest

from slurm_plugin.model import Cluster, Gpu, GpuUse, Job, Node
from slurm_plugin.node.emulated import EmulatedSource, gpu_state, slowdown_path
from slurm_plugin.physics import (group_slowdowns, idle_power_w, job_class, max_power_w,
                                  shared_gpu_throttle)


def job(jid: str, app: str, node: str = "gpu1", index: int = 0, shards: int = 0) -> Job:
    return Job(jid, "RUNNING", app=app, uses=(GpuUse(node, index, shards),))


def test_idle_gpu_draws_idle_power():
    st = gpu_state(Gpu("gpu1", 0), {})
    assert (st.util_pct, st.mem_used_mib, dict(st.slowdown), st.residents) == (0.0, 0.0, {}, ())
    assert st.power_w == idle_power_w("V100")


def test_shared_gpu_draws_less_than_two_gpus_and_slows_both():
    a, b = job("1", "lstm", shards=2), job("2", "lstm", shards=2)
    shared = Gpu("gpu1", 0, shard_jobs=("1", "2"), shards_total=4, shards_used=4)
    st = gpu_state(shared, {"1": a, "2": b})
    util, power, slow = st.util_pct, st.power_w, st.slowdown
    solo = job_class("lstm").power_at(1)
    assert power < 2 * solo                 # one GPU, not two
    assert power > solo * 0.9               # but busier than one job alone
    assert slow["1"] > 1.05 and slow["2"] > 1.05
    assert util <= 100.0
    # each job's own reading and true power; the true powers add up to the GPU's
    assert [(r.job_id, r.shares) for r in st.residents] == [("1", 2), ("2", 2)]
    assert sum(r.util_pct for r in st.residents) == pytest.approx(util)
    assert sum(st.job_power_w.values()) == pytest.approx(power)


def test_a_shared_gpu_past_its_limit_draws_the_limit_and_slows_every_job():
    """As the simulator runs it (tests/sim/test_shared_throttle.py): one limit for the GPU,
    every job slower when its jobs together would draw more."""
    a, b = job("1", "nas", shards=2), job("2", "nas", shards=2)
    shared = Gpu("gpu1", 0, shard_jobs=("1", "2"), shards_total=4, shards_used=4)
    st = gpu_state(shared, {"1": a, "2": b})
    apart = group_slowdowns(["nas", "nas"])[0]
    dyn = [job_class("nas").dynamic_power_at(1, "V100")] * 2
    assert st.power_w == pytest.approx(max_power_w("V100"))
    assert st.slowdown["1"] == pytest.approx(
        apart * shared_gpu_throttle(dyn, [1 / apart] * 2, None, "V100"))
    assert st.slowdown["1"] > apart * 1.05
    # a cap only one job asks for sets no limit: the same state as without it
    capped = gpu_state(shared, {"1": Job("1", "RUNNING", app="nas", power_cap_w=150.0,
                                         uses=a.uses), "2": b})
    assert (capped.power_w, dict(capped.slowdown)) == (st.power_w, dict(st.slowdown))


def test_source_integrates_energy_and_writes_slowdowns(tmp_path):
    t = [1000.0]
    a, b = job("1", "lstm", shards=2), job("2", "vgg16", shards=2)
    gpus = (Gpu("gpu1", 0, shard_jobs=("1", "2")), Gpu("gpu1", 1))
    cluster = Cluster(nodes=(Node("gpu1", gpus=gpus),), jobs={"1": a, "2": b})
    src = EmulatedSource("all", lambda: cluster, tmp_path, clock=lambda: t[0])
    first = src.read()
    t[0] += 10.0
    second = src.read()
    assert [r.energy_j for r in first] == [0.0, 0.0]
    assert second[1].energy_j == pytest.approx(10.0 * idle_power_w("V100"))
    assert second[0].energy_j == pytest.approx(10.0 * second[0].power_w)
    assert float(slowdown_path(tmp_path, "1").read_text()) > 1.0
    truth = json.loads(src.truth_file.read_text())
    assert truth["1"] + truth["2"] == pytest.approx(second[0].energy_j)
    assert truth["1"] > truth["2"]           # lstm draws more than vgg16 (143 W vs 130 W)
