"""The engine on a cluster of several GPU models: each node computes with its own model (idle
power, a job's power and cap, memory, the model its views show); a job runs on one model; a
single-model cluster gives the figures it gave before groups existed."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_plugin.errors import InputError
from slurm_plugin.model import Placement
from slurm_plugin.physics import clamp_cap_w, idle_power_w, job_class
from slurm_plugin.physics.constants import gpu_constants
from slurm_plugin.physics.job_cap import capped_job
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.base import plain_placement
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.run import Inputs, load_jobs, oracle_metrics, simulate
from slurm_plugin.sim.carbon import load_carbon
from slurm_plugin.sim.trace import read_trace

SMALL = Path(__file__).parent / "golden" / "small_trace.csv"
T0 = 1_700_000_000


class Pin:
    """Pins every job to ``nodes`` with ``cap_w``; records the requests it saw."""

    name = "pin"

    def __init__(self, nodes: tuple[str, ...] = (), cap_w: float | None = None) -> None:
        self.nodes, self.cap_w, self.requests = nodes, cap_w, []

    def advise(self, request, ctx):
        self.requests.append(request)
        if not self.nodes:
            return Placement(policy=self.name, gpus=request.gpus, power_cap_w=self.cap_w)
        return Placement(policy=self.name, gpus=request.gpus, nodes=self.nodes,
                         power_cap_w=self.cap_w)

    def reconcile(self, ctx):
        return ()


def _trace(tmp_path: Path, rows: str):
    p = tmp_path / "t.csv"
    p.write_text("job_id,submit_s,duration_s,num_gpus,user,app,time_limit_s\n" + rows)
    return read_trace(p, "canonical")


class Watched(Simulator):
    """Keeps each job's GPUs (node names) as it starts."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.started: dict[str, list[str]] = {}
        self.caps: dict[str, float | None] = {}

    def _start(self, j, gpus):
        super()._start(j, gpus)
        self.started[j.id] = [g.node.name for g in gpus]
        self.caps[j.id] = j.cap_w


def test_a_job_on_an_h100_node_draws_h100_power(tmp_path):
    jobs = _trace(tmp_path, f"a,{T0},3600,1,u,alexnet,7200\n")
    spec = ClusterSpec(groups=(("V100", 1), ("H100", 1)), gpus_per_node=1)
    r = Simulator(jobs, spec, Pin(("node1",))).run()
    want_w = job_class("alexnet").power_at(1, "H100") + idle_power_w("V100")
    assert r["gpu_energy_kwh"] == pytest.approx(want_w * 3600 / 3.6e6, rel=1e-12)
    r = Simulator(jobs, spec, Pin(("node0",))).run()
    want_w = job_class("alexnet").power_at(1, "V100") + idle_power_w("H100")
    assert r["gpu_energy_kwh"] == pytest.approx(want_w * 3600 / 3.6e6, rel=1e-12)


def test_two_jobs_at_once_each_draw_their_nodes_model(tmp_path):
    jobs = _trace(tmp_path, f"a,{T0},3600,1,u,vgg16,7200\nb,{T0},3600,1,u,vgg16,7200\n")
    spec = ClusterSpec(groups=(("A100", 1), ("H100", 1)), gpus_per_node=1)
    r = Simulator(jobs, spec, get_policy("slurm-default")).run()
    want_w = job_class("vgg16").power_at(1, "A100") + job_class("vgg16").power_at(1, "H100")
    assert r["gpu_energy_kwh"] == pytest.approx(want_w * 3600 / 3.6e6, rel=1e-12)


@pytest.mark.parametrize("node, model", [("node0", "V100"), ("node1", "H100")])
def test_a_cap_is_the_nodes_models_clamp_and_power(tmp_path, node, model):
    jobs = _trace(tmp_path, f"a,{T0},3600,1,u,vgg16,36000\n")
    spec = ClusterSpec(groups=(("V100", 1), ("H100", 1)), gpus_per_node=1)
    sim = Watched(jobs, spec, Pin((node,), cap_w=150.0))
    r = sim.run()
    cap = clamp_cap_w(150.0, model)
    assert sim.caps["a"] == cap and (model == "V100") == (cap == 150.0)
    power_w, slow = capped_job("vgg16", 1, cap, model, 1)
    other = idle_power_w("H100" if model == "V100" else "V100")
    assert r["avg_jct_s"] == pytest.approx(3600 * slow, rel=1e-9)
    assert r["gpu_energy_kwh"] == pytest.approx((power_w + other) * 3600 * slow / 3.6e6,
                                                rel=1e-9)


def test_an_unpinned_cap_waits_for_the_model_slurm_gives(tmp_path):
    """Pending on a cluster of several models the cap shows as asked; at the start it is moved
    into the range of the model the job got."""
    jobs = _trace(tmp_path, f"a,{T0},3600,1,u,vgg16,36000\n")
    spec = ClusterSpec(groups=(("H100", 1), ("V100", 1)), gpus_per_node=1)
    sim = Watched(jobs, spec, Pin(cap_w=120.0))
    sim.run()
    assert sim.started["a"] == ["node0"] and sim.caps["a"] == clamp_cap_w(120.0, "H100")
    sim = Simulator(jobs, spec, Pin(cap_w=120.0))
    sim._submit(jobs[0])        # queued, not started: Slurm has yet to choose the model
    assert sim.job_views["a"].power_cap_w == 120.0


def test_views_show_each_nodes_model_and_memory_and_readings_its_top_limit(tmp_path):
    jobs = _trace(tmp_path, f"a,{T0},3600,1,u,vgg16,7200\n")
    spec = ClusterSpec(groups=(("V100", 1), ("A100", 2), ("H100", 1)), gpus_per_node=2)
    sim = Simulator(jobs, spec, get_policy("slurm-default"))
    ctx = sim.context()
    assert [n.gpus[0].model for n in ctx.cluster.nodes] == ["V100", "A100", "A100", "H100"]
    for n, model in zip(ctx.cluster.nodes, ("V100", "A100", "A100", "H100")):
        assert {g.model for g in n.gpus} == {model}
        assert {g.memory_mib for g in n.gpus} == {gpu_constants(model)["memory_mib"]}
        reading = ctx.readings.gpus[(n.name, 0)]
        assert reading.power_limit_w == gpu_constants(model)["max_power_w"]
        assert reading.power_w == idle_power_w(model)
    assert sim.gpu_power_total == pytest.approx(2 * sum(idle_power_w(m) for m in
                                                        ("V100", "A100", "A100", "H100")))


def test_a_trace_job_asks_for_no_model_on_a_mixed_cluster(tmp_path):
    jobs = _trace(tmp_path, f"a,{T0},60,1,u,vgg16,7200\n")
    pin = Pin()
    Simulator(jobs, ClusterSpec(groups=(("V100", 1), ("A100", 1)), gpus_per_node=1), pin).run()
    Simulator(jobs, ClusterSpec(nodes=1, gpus_per_node=1, gpu_type="A100"), pin).run()
    assert [r.gpu_model for r in pin.requests] == ["", "a100"]


def test_a_multi_node_job_waits_for_nodes_of_one_model(tmp_path):
    # node0 (V100) is free, node1 (A100) is busy until 1,000 s: the 2-node job needs two nodes
    # of one model, so it takes the A100 pair once node1 frees, not node0 + node2
    jobs = _trace(tmp_path, f"busy,{T0},1000,2,u,vgg16,1200\n"
                            f"wide,{T0 + 1},100,4,u,vgg16,600\n")
    spec = ClusterSpec(groups=(("V100", 1), ("A100", 2)), gpus_per_node=2)

    class Busy(Pin):
        def advise(self, request, ctx):
            if request.job_id == "busy":
                return Placement(policy=self.name, gpus=2, nodes=("node1",))
            return plain_placement(self.name, request, "as asked")
    sim = Watched(jobs, spec, Busy())
    sim.run()
    assert sim.started["busy"] == ["node1", "node1"]
    assert sorted(set(sim.started["wide"])) == ["node1", "node2"]


def test_first_fit_takes_the_first_model_whose_nodes_suffice(tmp_path):
    jobs = _trace(tmp_path, f"wide,{T0},100,4,u,vgg16,600\n")
    spec = ClusterSpec(groups=(("V100", 1), ("A100", 1), ("H100", 2)), gpus_per_node=2)
    sim = Watched(jobs, spec, get_policy("slurm-default"))
    sim.run()
    assert sorted(set(sim.started["wide"])) == ["node2", "node3"]


def test_a_placement_pinned_to_two_models_falls_back_to_slurms(tmp_path):
    jobs = _trace(tmp_path, f"wide,{T0},100,4,u,vgg16,600\n")
    spec = ClusterSpec(groups=(("V100", 1), ("A100", 1), ("H100", 2)), gpus_per_node=2)
    sim = Watched(jobs, spec, Pin(("node0", "node1")))
    r = sim.run()
    assert r["policy_fallbacks"] == 1
    assert sorted(set(sim.started["wide"])) == ["node2", "node3"]
    sim = Watched(jobs, spec, Pin(("node3", "node2")))
    assert sim.run()["policy_fallbacks"] == 0
    assert sorted(set(sim.started["wide"])) == ["node2", "node3"]


def test_backfill_reserves_nodes_of_one_model_for_a_blocked_wide_job(tmp_path):
    # the 2-node head waits for the A100 pair (free at 1,000 s): a short job backfills on the
    # V100 node, a long one may not take node1 or node2 before the head starts
    jobs = _trace(tmp_path, f"a,{T0},1000,2,u,vgg16,1020\n"
                            f"wide,{T0 + 1},100,4,u,vgg16,600\n"
                            f"short,{T0 + 2},100,2,u,vgg16,120\n")
    spec = ClusterSpec(groups=(("V100", 1), ("A100", 2)), gpus_per_node=2, bf_interval_s=30)

    class First(Pin):
        def advise(self, request, ctx):
            if request.job_id == "a":
                return Placement(policy=self.name, gpus=2, nodes=("node1",))
            return plain_placement(self.name, request, "as asked")
    sim = Watched(jobs, spec, First())
    sim.run()
    assert sim.started["short"] == ["node0", "node0"]
    assert sorted(set(sim.started["wide"])) == ["node1", "node2"]
    assert sim.by_id == {} and len(sim.started) == 3


def test_a_job_larger_than_each_models_nodes_is_an_input_error(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text(f"job_id,submit_s,duration_s,num_gpus\nw,{T0},60,6\n")
    spec = ClusterSpec(groups=(("V100", 2), ("A100", 2)), gpus_per_node=2)
    with pytest.raises(InputError, match="at most 2 nodes x 2 GPUs of one model"):
        load_jobs(Inputs(p, "canonical", spec, "GB"))
    spec = ClusterSpec(groups=(("V100", 2), ("A100", 2), ("V100-SXM2-32GB", 1)), gpus_per_node=2)
    assert len(load_jobs(Inputs(p, "canonical", spec, "GB"))) == 1   # 3 V100 nodes in all


def test_the_oracle_bound_takes_each_jobs_best_model_that_holds_it():
    jobs = read_trace(SMALL, "canonical")
    carbon = load_carbon(None, "GB", jobs[0].submit_s)
    one = {m: oracle_metrics(jobs, ClusterSpec(nodes=2, gpus_per_node=4, gpu_type=m).resolved(),
                             carbon, 0)["energy_kwh"] for m in ("V100", "H100")}
    mixed = oracle_metrics(jobs, ClusterSpec(groups=(("V100", 2), ("H100", 2)),
                                             gpus_per_node=4).resolved(), carbon, 0)
    assert mixed["energy_kwh"] <= min(one.values()) + 1e-12


# figures of these runs before clusters could mix models (seed 7, 2 nodes x 4 GPUs)
BEFORE = {
    ("V100", "slurm-default"): (12.421128210108073, 5.310017098996944, 0.9923183834875056,
                                4529.5),
    ("V100", "greenflow"): (7.56683583704539, 3.7770580592676097, 0.6277518043443571, 4485.125),
    ("V100", "eaco"): (7.304619987885309, 3.769369987885295, 0.6084593341255033,
                       4202.849224388599),
    ("A100", "slurm-default"): (13.617610997989564, 6.506499886878435, 1.0857853164003606,
                                4529.5),
    ("A100", "greenflow"): (8.203333510422471, 4.4135557326446815, 0.6800291093910296,
                            4485.125),
    ("A100", "eaco"): (7.8073654424334915, 4.2721154424334795, 0.6497813402244162,
                       4202.849224388599),
}


@pytest.mark.parametrize("model, policy", sorted(BEFORE))
def test_single_model_figures_are_unchanged(model, policy):
    flat = ClusterSpec(nodes=2, gpus_per_node=4, gpu_type=model)
    one_group = ClusterSpec(gpus_per_node=4, groups=((model, 2),))
    got = []
    for spec in (flat, one_group):
        r = simulate(Inputs(SMALL, "canonical", spec, "GB", seed=7), policy)
        got.append((r["energy_kwh"], r["gpu_energy_kwh"], r["carbon_kg"], r["avg_jct_s"]))
        assert r["jobs_finished"] == 16
    assert got[0] == got[1]
    assert got[0] == pytest.approx(BEFORE[(model, policy)], rel=1e-12)
