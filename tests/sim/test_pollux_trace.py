"""The Pollux workload reader (``--trace-format pollux``): rows, bad rows, replay."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_plugin.cli import group
from slurm_plugin.errors import InputError
from slurm_plugin.physics.pollux import elastic_profile, pollux_apps
from slurm_plugin.sim.trace import read_trace

HEADER = "name,time,application,num_replicas,batch_size"


def _write(path: Path, rows: list[str]) -> Path:
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    return path


def test_rows_become_elastic_jobs(tmp_path):
    p = _write(tmp_path / "w.csv", ["cifar10-0,107,cifar10,6,2048",
                                    "deepspeech2-1,110,deepspeech2,6,320",
                                    "ncf-2,35,ncf,1,256"])
    jobs = read_trace(p, "pollux")
    assert [j.job_id for j in jobs] == ["ncf-2", "cifar10-0", "deepspeech2-1"]   # by time
    c = jobs[1]
    prof = elastic_profile("cifar10", 2048, 6)
    assert c.num_gpus == 6 and c.min_gpus == 1 and c.max_gpus == prof.max_gpus >= 6
    assert c.app == "cifar10" and c.submit_s == 107
    assert c.duration_s == pytest.approx(prof.samples / prof.tput[5])
    assert c.speedup[0] == 1.0 and len(c.speedup) == 64


def test_every_application_and_odd_batch_sizes_replay(tmp_path):
    """Any file in the format: every application, batch sizes between or beyond the measured
    ones, large requests."""
    rng = random.Random(3)
    rows = []
    for i in range(60):
        app = rng.choice(pollux_apps())
        gpus = rng.choice([1, 2, 3, 4, 6, 8, 12, 16])
        rows.append(f"{app}-{i},{i * 37},{app},{gpus},{gpus * rng.choice([1, 7, 33, 200, 5000])}")
    p = _write(tmp_path / "any.csv", rows)
    res = CliRunner().invoke(group, ["simulate", "--trace", str(p), "--trace-format", "pollux",
                                     "--nodes", "4", "--gpus-per-node", "4",
                                     "--compare", "slurm-default,elastic,elastic-restart", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert all(r["jobs_finished"] == 60 for r in out)


@pytest.mark.parametrize("row,field,fix", [
    ("a,1,resnet9,2,64", "application", "use one of"),
    ("a,1,cifar10,0,64", "num_replicas", "at least 1"),
    ("a,1,cifar10,two,64", "num_replicas", "not a number"),
    ("a,-5,cifar10,2,64", "time", "at least 0"),
    ("a,1,cifar10,4,2", "batch_size", "at least one sample per GPU"),
    (",1,cifar10,4,64", "name", "unique name"),
    ("a,1,cifar10,4,nan", "batch_size", "not a"),
])
def test_bad_rows_name_field_value_and_fix(tmp_path, row, field, fix):
    p = _write(tmp_path / "bad.csv", ["ok,0,ncf,1,256", row])
    with pytest.raises(InputError) as exc:
        read_trace(p, "pollux")
    msg = str(exc.value)
    assert "trace:" in msg and "line 3" in msg and f"field {field}" in msg and fix in msg


def test_repeated_name_and_missing_column(tmp_path):
    p = _write(tmp_path / "dup.csv", ["a,0,ncf,1,256", "a,1,ncf,1,256"])
    with pytest.raises(InputError, match="appears twice"):
        read_trace(p, "pollux")
    q = tmp_path / "cols.csv"
    q.write_text("name,time,application,num_replicas\na,0,ncf,1\n")
    with pytest.raises(InputError, match="field batch_size: missing column"):
        read_trace(q, "pollux")


def test_elastic_share_is_seeded_and_within_range():
    from slurm_plugin.sim.elastic_share import make_elastic
    from slurm_plugin.sim.trace import TraceJob
    jobs = [TraceJob(job_id=str(i), submit_s=i, duration_s=600.0, num_gpus=1 + i % 4, line=i + 2)
            for i in range(400)]
    a, b = make_elastic(jobs, 0.5, 7), make_elastic(list(reversed(jobs)), 0.5, 7)
    assert {j.job_id for j in a if j.min_gpus} == {j.job_id for j in b if j.min_gpus}
    share = sum(1 for j in a if j.min_gpus) / len(a)
    assert 0.4 < share < 0.6
    for j in a:
        if j.min_gpus:
            assert j.min_gpus == 1 and j.max_gpus == 2 * j.num_gpus
            assert j.time_limit_s >= 1.25 * j.duration_s * j.num_gpus


def test_resize_pays_the_restart_cost(tmp_path):
    """A running job requeued with a new count pays restart_cost_s at its new size."""
    from slurm_plugin.model import Action
    from slurm_plugin.policy.baseline import SlurmDefault
    from slurm_plugin.sim.cluster import ClusterSpec
    from slurm_plugin.sim.engine import Simulator

    class ResizeOnce(SlurmDefault):
        name = "resize-once"
        done = False

        def reconcile(self, ctx):
            if not self.done and "a" in ctx.cluster.jobs and ctx.cluster.jobs["a"].running:
                self.done = True
                return (Action(kind="resize", job_id="a", policy=self.name, gpus=4,
                               num_nodes=2),)
            return ()

    p = _write(tmp_path / "one.csv", ["a,0,imagenet,4,3200"])
    jobs = read_trace(p, "pollux")
    ends = {}
    for cost in (0.0, 600.0):
        spec = ClusterSpec(nodes=2, gpus_per_node=4, reconcile_interval_s=300.0,
                           restart_cost_s=cost)
        sim = Simulator(jobs, spec, ResizeOnce())
        r = sim.run()
        assert r["actions"] == {"resize": 1} and r["jobs_finished"] == 1
        ends[cost] = r["makespan_s"]
    assert ends[600.0] == pytest.approx(ends[0.0] + 600.0, rel=1e-6)


def test_a_resize_without_a_node_count_keeps_the_jobs_nodes_now(tmp_path):
    """Grown onto 2 nodes, then resized to 3 GPUs per node with num_nodes unsaid: 6 GPUs on
    2 nodes (the job's node count now), not 3 on the 1 node it asked for at submission."""
    from slurm_plugin.model import Action
    from slurm_plugin.policy.baseline import SlurmDefault
    from slurm_plugin.sim.cluster import ClusterSpec
    from slurm_plugin.sim.engine import Simulator

    seen = []

    class GrowThenTrim(SlurmDefault):
        name = "grow-then-trim"

        def reconcile(self, ctx):
            job = ctx.cluster.jobs.get("a")
            if job is None or not job.running:
                return ()
            seen.append(len(job.uses))
            if len(seen) == 1:
                return (Action(kind="resize", job_id="a", policy=self.name, gpus=4, num_nodes=2),)
            if len(job.uses) == 8:
                return (Action(kind="resize", job_id="a", policy=self.name, gpus=3),)
            return ()

    jobs = read_trace(_write(tmp_path / "one.csv", ["a,0,imagenet,4,3200"]), "pollux")
    spec = ClusterSpec(nodes=2, gpus_per_node=4, reconcile_interval_s=300.0, restart_cost_s=0.0)
    Simulator(jobs, spec, GrowThenTrim()).run()
    assert seen[:1] == [4] and 8 in seen and seen[-1] == 6, seen


def test_a_byte_order_mark_does_not_hide_the_name_column(tmp_path):
    rows = ["ncf-0,791,ncf,1,32768", "cifar10-1,1151,cifar10,12,4096"]
    plain = _write(tmp_path / "w.csv", rows)
    bom = tmp_path / "bom.csv"
    bom.write_text("\r\n".join([HEADER, *rows]) + "\r\n", encoding="utf-8-sig", newline="")
    assert read_trace(bom, "pollux") == read_trace(plain, "pollux")


def test_a_cut_line_says_the_row_is_cut_short(tmp_path):
    """Before: "field application: '' has no profile"."""
    p = _write(tmp_path / "cut.csv", ["ncf-0,791,ncf,1,32768", "cifar10-9,3"])
    with pytest.raises(InputError, match=r"line 3: field application: the row is cut short "
                                         r"\(2 fields, the header has 5\)"):
        read_trace(p, "pollux")


def test_outside_the_measured_profiles_is_a_counted_warning(tmp_path):
    """A batch size outside the application's measured range, or more replicas than the
    profiles' 64 GPUs, is read clamped: a warning per kind naming the first jobs."""
    rows = ["ok-0,0,cifar10,4,512", "big-1,1,cifar10,8,100000000", "small-2,2,ncf,1,8",
            "b3,3,cifar10,1,5000", "b4,4,cifar10,1,5000", "b5,5,cifar10,1,5000",
            "wide-6,6,ncf,200,32000"]
    jobs = read_trace(_write(tmp_path / "w.csv", rows), "pollux")
    assert len(jobs) == 7 and len(jobs.warnings) == 2
    batch, wide = jobs.warnings
    assert batch.startswith(f"trace: {tmp_path / 'w.csv'}: 5 job(s) with batch_size outside "
                            "its application's measured batch sizes")
    assert "big-1 (line 3: 100000000 not in cifar10's 128-4096), small-2 (line 4: 8 not in " \
           "ncf's 256-32768), b3 (line 5: 5000 not in cifar10's 128-4096) and 2 more" in batch
    assert wide.endswith("1 job(s) with num_replicas above the profiles' 64 GPUs (run no "
                         "faster than on 64): wide-6 (line 8: 200)")
    # only the jobs kept count; the real workloads are within the profiles
    assert read_trace(tmp_path / "w.csv", "pollux", limit_jobs=1).warnings == ()
    assert read_trace(_write(tmp_path / "ok.csv", rows[:1]), "pollux").warnings == ()


def test_past_the_largest_measured_local_batch_a_step_accumulates_gradients(tmp_path):
    """A local batch no GPU was measured at runs as gradient accumulation (Pollux's way): k
    micro-steps of at most the largest measured one, never more samples per second than at a
    measured local batch.
    Before, the step time was clamped: bert at 48 per GPU ran in the time of 12, 4x the
    throughput of anything measured."""
    from slurm_plugin.physics.pollux import step_s
    from slurm_plugin.physics.pollux_batch import _tables, step_time_s, throughput
    grid, steps = [4.0, 8.0, 12.0], [0.10, 0.15, 0.20]
    assert step_s(grid, steps, 8.0) == pytest.approx(0.15)
    assert step_s(grid, steps, 12.0) == pytest.approx(0.20)
    assert step_s(grid, steps, 48.0) == pytest.approx(4 * 0.20)      # 4 micro-steps of 12
    assert step_s(grid, steps, 18.0) == pytest.approx(2 * step_s(grid, steps, 9.0))  # 2 of 9
    assert 0.15 < step_s(grid, steps, 9.0) < 0.20
    for app in ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"):
        grid_app = _tables(app)[0]
        top = grid_app[-1]
        for n in (1, 4, 8, 16):
            best = max(throughput(app, n, n * g) for g in grid_app)
            for k in (1.5, 2.0, 4.0, 10.0):
                assert throughput(app, n, n * top * k) <= best * (1 + 1e-9), (app, n, k)
            assert step_time_s(app, n, 4 * top) == pytest.approx(4 * step_time_s(app, n, top))
    # bert asked at 384 on 8 GPUs (48 per GPU) is no faster than at 96 (12 per GPU)
    fast = read_trace(_write(tmp_path / "b.csv", ["b-0,0,bert,8,96"]), "pollux")
    big = read_trace(_write(tmp_path / "c.csv", ["c-0,0,bert,8,384"]), "pollux")
    assert big[0].duration_s >= fast[0].duration_s
