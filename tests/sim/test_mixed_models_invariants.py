"""Over many shapes of clusters that mix GPU models, every policy: a job's GPUs are all of one
model (a multi-GPU job never spans two), a job shares a GPU only with jobs on its model, no
placement or action names nodes of two models, and every job finishes."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from slurm_plugin.physics import class_names, job_class
from slurm_plugin.physics.constants import catalogue_entry
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.eaco.settings import EacoSettings
from slurm_plugin.policy.eaco.shards import memory_cap_mib, share_weights
from slurm_plugin.policy.registry import builtin_policy_names
from slurm_plugin.sim.carbon import load_carbon
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.trace import read_trace

POLICIES = tuple(p for p in builtin_policy_names() if p != "baseline")
MODELS = ("V100", "A100", "H100", "A40", "L40S", "A100-SXM4-40GB", "H200")
SHAPES = 8


class Recorder:
    """The policy under test, its placements and actions kept as it returns them."""

    def __init__(self, policy) -> None:
        self.policy, self.name = policy, policy.name
        self.slurm_settings = getattr(policy, "slurm_settings", {})
        self.placements: list = []
        self.actions: list = []

    def advise(self, request, ctx):
        pl = self.policy.advise(request, ctx)
        self.placements.append(pl)
        return pl

    def reconcile(self, ctx):
        acts = self.policy.reconcile(ctx)
        self.actions += acts
        return acts


class OneModel(Simulator):
    """Asserts at every start that the job's GPUs are of one model, and so are the GPUs of
    every job it shares a GPU with."""

    starts = 0

    def _start(self, j, gpus):
        super()._start(j, gpus)
        self.starts += 1
        kinds = {g.node.kind.entry_id for g in gpus}
        assert len(kinds) == 1, f"{j.id} spans {[g.node.kind.model for g in gpus]}"
        for g in gpus:
            for other in g.jobs:
                assert {x.node.kind.entry_id for x in other.gpus} == kinds


def _cluster(rng: random.Random) -> ClusterSpec:
    models = rng.sample(MODELS, rng.randint(2, 3))
    if rng.random() < 0.3:
        models.append(models[0])        # the first model again, after another
    return ClusterSpec(groups=tuple((m, rng.randint(1, 3)) for m in models),
                       gpus_per_node=rng.choice([1, 2, 4, 8]),
                       shards_per_gpu=rng.choice([0, 2, 4]),
                       backfill_depth=rng.choice([5, 100]),
                       reconcile_interval_s=rng.choice([60.0, 600.0]),
                       suspend_time_s=rng.choice([None, 600.0]),
                       nodes_per_switch=rng.choice([0, 1, 2]))


def _trace(path: Path, rng: random.Random, jobs: int, spec: ClusterSpec) -> Path:
    """Jobs up to the largest model's GPUs, some elastic (a GPU range)."""
    most = spec.largest_model_nodes * spec.gpus_per_node
    apps = class_names()
    rows = ["job_id,submit_s,duration_s,num_gpus,user,app,min_gpus,max_gpus"]
    t = 1_700_000_000.0
    for i in range(jobs):
        t += rng.expovariate(1 / 120)
        gpus = min(most, rng.choice([1, 1, 1, 2, 4, spec.gpus_per_node, 2 * spec.gpus_per_node,
                                     most]))
        lo = hi = ""
        if rng.random() < 0.3:
            lo, hi = 1, min(most, 2 * gpus)
        rows.append(f"j{i},{t:.0f},{rng.randint(30, 3 * 3600)},{gpus},u{rng.randint(0, 3)},"
                    f"{rng.choice(apps + ('',))},{lo},{hi}")
    path.write_text("\n".join(rows) + "\n")
    return path


def _nodes_one_model(spec: ClusterSpec, nodes: tuple[str, ...]) -> bool:
    width = len(str(spec.nodes - 1))
    entry = {}
    pos = 0
    for model, count in spec.node_groups:
        for _ in range(count):
            entry[f"node{pos:0{width}d}"] = catalogue_entry(model)
            pos += 1
    return len({entry[n] for n in nodes}) <= 1


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", range(SHAPES))
def test_no_job_spans_two_models(tmp_path, policy, case):
    rng = random.Random(f"{policy}:{case}")
    spec = _cluster(rng)
    jobs = read_trace(_trace(tmp_path / "t.csv", rng, rng.randint(10, 40), spec), "canonical")
    rec = Recorder(get_policy(policy))
    sim = OneModel(jobs, spec, rec, seed=case, carbon=load_carbon(None, "GB", jobs[0].submit_s))
    r = sim.run()
    assert r["jobs_finished"] == len(jobs) and r["unfinished_jobs"] == 0, spec
    assert sim.starts >= len(jobs)
    for pl in rec.placements:
        assert _nodes_one_model(spec, pl.nodes), (spec, pl)
    for a in rec.actions:
        assert _nodes_one_model(spec, a.nodes), (spec, a)


class EacoChecked(Recorder):
    """EaCO, each of its pinned shares checked when made: the shards are the job's weight in
    the share table of the chosen GPU's own model."""

    pinned = 0

    def advise(self, request, ctx):
        pl = super().advise(request, ctx)
        if pl.share_mode != "exclusive" and pl.gpu_indexes:
            s = EacoSettings.from_mapping(ctx.settings)
            node = ctx.cluster.node(pl.nodes[0])
            g = node.gpus[pl.gpu_indexes[0]]
            assert {node.gpus[i].model for i in pl.gpu_indexes} == {g.model}
            w = share_weights(g.shards_total, g.memory_mib, s, ctx.history, g.model,
                              len(node.gpus)).get(request.app, 0)
            need = request.memory_per_gpu_mib or job_class(request.app).memory_mib
            assert need <= memory_cap_mib(g.memory_mib, w, g.shards_total, s)
            assert pl.shards == w, (g.model, request.app, pl)
            self.pinned += 1
        return pl


@pytest.mark.parametrize("case", range(6))
def test_eaco_shares_within_a_model_by_that_models_table(tmp_path, case):
    rng = random.Random(f"eaco-tables:{case}")
    groups = tuple((m, rng.randint(1, 2)) for m in rng.sample(("V100", "A100", "H100", "A40"), 2))
    spec = ClusterSpec(groups=groups, gpus_per_node=rng.choice([1, 2, 4]), shards_per_gpu=8)
    jobs = read_trace(_trace(tmp_path / "t.csv", rng, 40, spec), "canonical")
    rec = EacoChecked(get_policy("eaco"))
    sim = OneModel(jobs, spec, rec, seed=case, carbon=load_carbon(None, "GB", jobs[0].submit_s))
    assert sim.run()["jobs_finished"] == len(jobs)
    assert rec.pinned > 0
