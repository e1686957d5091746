"""The stack pal+eaco+greenflow+elastic in the simulator, its settings built as the wrapper and
the reconciler build them: every job finishes, the energy integrates, each stage decides for
the jobs it should (a share, a count, a placement)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_helpers import Recorder, random_trace

from slurm_plugin import config
from slurm_plugin.policy import get_policy
from slurm_plugin.sim.carbon import load_carbon
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator

T0 = 1_700_000_000
APPS = ("alexnet", "resnet18", "vgg16", "lstm", "transformer")
STACK = "pal+eaco+greenflow+elastic"


def _trace(path: Path, jobs: int, seed: int) -> list:
    return random_trace(path, jobs, seed, APPS, gap_s=400, longest_s=4 * 3600, counts=(1, 1, 1, 2, 4))


def _run(tmp_path, name: str, seed: int = 0):
    jobs = _trace(tmp_path / "t.csv", 150, seed)
    cfg = config.load(site_file="/dev/null", environ={"WATTBATCH_POLICY_ALLOW_SHARE": "true"})
    spec = ClusterSpec(nodes=3, gpus_per_node=4)
    rows: list[dict] = []
    policy = Recorder(get_policy(name))
    sim = Simulator(jobs, spec, policy, seed=seed, timeline=rows.append,
                    carbon=load_carbon(None, "GB", jobs[0].submit_s),
                    settings=config.policy_settings(cfg, name,
                                                    shards_per_gpu=spec.resolved().shards_per_gpu))
    r = sim.run()
    return jobs, r, rows, policy.placements


@pytest.mark.parametrize("seed", [0, 1])
def test_the_four_stage_stack_runs_every_job_and_each_stage_decides(tmp_path, seed):
    jobs, r, rows, placements = _run(tmp_path, STACK, seed)
    assert r["jobs_finished"] == len(jobs) and r["policy_fallbacks"] == 0
    energy_j = sum(row["power_w"] * row["duration_s"] for row in rows)
    assert r["energy_kwh"] * 3.6e6 == pytest.approx(energy_j, rel=1e-9)
    whys = [w for p in placements for w in p.why]
    assert not [w for w in whys if ": failed (" in w]
    for kind, name in (("sizing", "elastic"), ("timing", "greenflow"), ("sharing", "eaco"),
                       ("placement", "pal")):
        assert any(w.startswith(f"{kind} ({name}): ") for w in whys), kind
    assert any(p.share_mode != "exclusive" for p in placements)
    assert all(p.policy == STACK for p in placements)


def test_a_stage_that_raises_counts_as_a_fallback(tmp_path, monkeypatch):
    """A stage that fails leaves the job as the stages before it decided: the run goes on
    and ``policy_fallbacks`` says how often (a broken stage must not pass for a fast one)."""
    from slurm_plugin.policy.greenflow.decide import GreenFlow

    def boom(self, request, ctx):
        raise RuntimeError("boom")

    monkeypatch.setattr(GreenFlow, "advise", boom)
    jobs, r, _, placements = _run(tmp_path, STACK)
    assert r["jobs_finished"] == len(jobs)
    assert r["policy_fallbacks"] == len(jobs) == sum(
        any("timing (greenflow): failed (RuntimeError: boom)" in w for w in p.why)
        for p in placements)
