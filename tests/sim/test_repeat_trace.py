"""``--repeat K``: K copies of a trace overlaid on its own span, ids renumbered, each copy
shifted by i/K of the span; the million-job workload of docs/scale.md is built this way."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from slurm_plugin.cli import group
from slurm_plugin.sim.trace import TraceJob, builtin_trace, read_trace, repeat_trace

GOLDEN = Path(__file__).parent / "golden"


def test_copies_interleave_over_the_span_with_ids_of_their_own():
    jobs = read_trace(builtin_trace())
    span_s = jobs[-1].submit_s - jobs[0].submit_s
    got = repeat_trace(jobs, 3)
    assert len(got) == 3 * len(jobs)
    assert len({j.job_id for j in got}) == len(got)
    assert [j.submit_s for j in got] == sorted(j.submit_s for j in got)
    top = max(int(j.job_id) for j in jobs)
    by_id = {j.job_id: j for j in got}
    for j in jobs[:50]:
        for i in range(3):
            c = by_id[str(i * top + int(j.job_id))]
            assert abs(c.submit_s - (j.submit_s + span_s * i / 3)) < 1e-6
            assert (c.duration_s, c.num_gpus, c.line) == (j.duration_s, j.num_gpus, j.line)
    assert repeat_trace(jobs, 1) == jobs


def test_named_jobs_get_a_copy_suffix():
    jobs = [TraceJob("a", 0.0, 60.0, 1, 2), TraceJob("b", 100.0, 60.0, 2, 3)]
    got = repeat_trace(jobs, 2)
    assert [(j.job_id, j.submit_s) for j in got] == [("a", 0.0), ("a#1", 50.0), ("b", 100.0),
                                                      ("b#1", 150.0)]


def test_simulate_repeat_runs_k_times_the_jobs():
    args = ["simulate", "--nodes", "16", "--policy", "slurm-default", "--json"]
    one = json.loads(CliRunner().invoke(group, args).stdout)
    res = CliRunner().invoke(group, args + ["--repeat", "2"])
    assert res.exit_code == 0, res.output
    two = json.loads(res.stdout)
    assert two["jobs"] == 2 * one["jobs"]
    assert two["avg_queue_s"] > one["avg_queue_s"]    # twice the arrivals on the same nodes
    res = CliRunner().invoke(group, args + ["--repeat", "2", "--limit-jobs", "300"])
    assert json.loads(res.stdout)["jobs"] == 300        # the first 300 of both copies


def test_repeat_with_an_accounting_replay_is_refused():
    res = CliRunner().invoke(group, ["simulate", "--from-sacct", str(GOLDEN / "small_trace.csv"),
                                     "--repeat", "2", "--policy", "slurm-default"])
    assert res.exit_code == 2 and "--repeat 2" in res.output and "--from-sacct" in res.output
