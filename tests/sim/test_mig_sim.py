"""The engine runs EaCO's MIG placements (``eaco.share_modes`` with "mig") on A100 nodes: jobs in
MIG instances progress at their instance's rate with no co-location slowdown, a GPU in MIG mode
draws the MIG physics' power and holds a valid layout, and goes back to normal when empty;
every job finishes and the energy integrates."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_helpers import Recorder, random_trace

from slurm_plugin.model import Placement
from slurm_plugin.physics.mig import layout_valid, mig_gpu_power_w, mig_profile, mig_rate
from slurm_plugin.physics import job_class
from slurm_plugin.policy import get_policy
from slurm_plugin.sim.carbon import load_carbon
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.mig import mig_rate_of
from slurm_plugin.sim.state import RUNNING
from slurm_plugin.sim.trace import read_trace

T0 = 1_700_000_000
APPS = ("aps", "transformer", "vgg16", "wavenet", "alexnet", "resnet18", "lstm")


class Checked(Simulator):
    """At every start: a GPU in MIG mode holds MIG jobs only, in a valid layout, each at its
    instance's rate, and draws the MIG physics' power; every job's work is integrated."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.work: dict[str, float] = {}
        self.mig_starts = 0

    def _start(self, j, gpus):
        super()._start(j, gpus)
        self.mig_starts += j.mig is not None
        for n in self.nodes:
            for g in n.gpus:
                if not g.jobs or g.jobs[0].mig is None:
                    assert all(x.mig is None for x in g.jobs)
                    continue
                assert g.exclusive and all(x.mig is not None for x in g.jobs)
                assert layout_valid([x.mig for x in g.jobs])
                live = [x for x in g.jobs if not x.blocked]
                for x in live:
                    assert x.irate == mig_rate(x.mig, x.util_pct)
                if n.power == "on":
                    assert g.power_w == pytest.approx(mig_gpu_power_w(
                        [x.dyn_w for x in live], [x.irate for x in live], n.kind.model))

    def _settle(self, j):
        if j.state == RUNNING and j.rate:
            self.work[j.id] = self.work.get(j.id, 0.0) + j.rate / j.scale * (self.now - j.last_s)
        super()._settle(j)


def _trace(path: Path, jobs: int, seed: int) -> list:
    return random_trace(path, jobs, seed, APPS, gap_s=300, longest_s=6 * 3600)


@pytest.mark.parametrize("seed", [0, 1])
def test_eaco_runs_mig_instances_on_a100s(tmp_path, seed):
    jobs = _trace(tmp_path / "t.csv", 120, seed)
    spec = ClusterSpec(nodes=3, gpus_per_node=4, gpu_type="A100")
    rows: list[dict] = []
    policy = Recorder(get_policy("eaco"))
    sim = Checked(jobs, spec, policy, seed=seed, timeline=rows.append,
                  carbon=load_carbon(None, "GB", jobs[0].submit_s),
                  settings={"share_modes": ["shard", "mig"]})
    r = sim.run()
    assert r["jobs_finished"] == len(jobs) and r["unfinished_jobs"] == 0
    assert r["policy_fallbacks"] == 0
    mig = [p for p in policy.placements if p.share_mode == "mig"]
    assert mig and sim.mig_starts > 0
    assert all(p.mig_profile == mig_profile("A100", p.mig_profile).name for p in mig)
    energy_j = sum(row["power_w"] * row["duration_s"] for row in rows)
    assert r["energy_kwh"] * 3.6e6 == pytest.approx(energy_j, rel=1e-9)
    assert r["gpu_energy_kwh"] <= r["energy_kwh"]
    for j in jobs:
        if j.job_id in sim.work:
            assert sim.work[j.job_id] == pytest.approx(j.duration_s, rel=1e-6)
    # every GPU is back to normal: no job, no MIG mark
    assert all(not g.jobs and not g.exclusive for n in sim.nodes for g in n.gpus)


def test_default_share_modes_run_no_mig(tmp_path):
    jobs = _trace(tmp_path / "t.csv", 60, 3)
    spec = ClusterSpec(nodes=2, gpus_per_node=4, gpu_type="A100")
    sim = Checked(jobs, spec, get_policy("eaco"), seed=3)
    sim.run()
    assert sim.mig_starts == 0


class Pin:
    """Every job to GPU 0 of node0 in a MIG instance of ``profiles[job id]``."""

    name = "pin"

    def __init__(self, profiles: dict[str, str]) -> None:
        self.profiles = profiles

    def advise(self, request, ctx):
        return Placement(policy=self.name, gpus=1, nodes=("node0",), gpu_indexes=(0,),
                         share_mode="mig", mig_profile=self.profiles[request.job_id])

    def reconcile(self, ctx):
        return ()


def test_two_instances_run_at_their_rates_and_draw_the_mig_power(tmp_path):
    """vgg16 in 4g.40gb and aps in 3g.40gb of one A100: no interference, each at its rate; a
    third job waits for room; the GPU's energy is the MIG physics' over each interval."""
    p = tmp_path / "t.csv"
    p.write_text("job_id,submit_s,duration_s,num_gpus,user,app,time_limit_s\n"
                 f"a,{T0},3600,1,u,vgg16,36000\nb,{T0},1800,1,u,aps,36000\n"
                 f"c,{T0},600,1,u,aps,36000\n")
    jobs = read_trace(p, "canonical")
    spec = ClusterSpec(nodes=1, gpus_per_node=1, gpu_type="A100")
    sim = Checked(jobs, spec, Pin({"a": "4g.40gb", "b": "3g.40gb", "c": "3g.40gb"}))
    r = sim.run()
    assert r["jobs_finished"] == 3 and r["policy_fallbacks"] == 0
    rate_b = mig_rate(mig_profile("A100", "3g.40gb"), job_class("aps").util_at(1))
    assert rate_b < 1
    end_b = 1800 / rate_b
    end_c = end_b + 600 / rate_b            # c waits for b's instance
    want = {"a": 3600.0, "b": end_b, "c": end_c}
    assert r["avg_jct_s"] == pytest.approx(sum(want.values()) / 3, rel=1e-9)
    assert r["makespan_s"] == pytest.approx(max(want.values()), rel=1e-9)


def test_a_mig_placement_on_a_v100_falls_back(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("job_id,submit_s,duration_s,num_gpus,user,app\n"
                 f"a,{T0},600,1,u,aps\n")
    jobs = read_trace(p, "canonical")
    sim = Simulator(jobs, ClusterSpec(nodes=1, gpus_per_node=1, gpu_type="V100"),
                    Pin({"a": "3g.40gb"}))
    r = sim.run()
    assert r["policy_fallbacks"] == 1 and r["jobs_finished"] == 1


def test_mig_rate_of_a_sim_job_is_the_physics(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("job_id,submit_s,duration_s,num_gpus,user,app\n"
                 f"a,{T0},600,1,u,vgg16\n")
    jobs = read_trace(p, "canonical")
    sim = Simulator(jobs, ClusterSpec(nodes=1, gpus_per_node=1, gpu_type="H100"),
                    Pin({"a": "3g.40gb"}))
    sim._submit(jobs[0])
    j = sim.by_id["a"]
    assert j.mig == mig_profile("H100", "3g.40gb") and not j.share and j.shards == 0
    sim._schedule()
    assert j.state == RUNNING
    assert mig_rate_of(j) == mig_rate(j.mig, job_class("vgg16").util_at(1)) == j.irate
    view = sim.context().cluster.nodes[0].gpus[0]
    assert view.shard_jobs == ("a",) and view.mig_profiles == ("3g.40gb",)
    assert view.exclusive_job is None and view.shards_used == view.shards_total
