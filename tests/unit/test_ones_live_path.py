"""The live path of ``ones``'s batch-size advice: the progress API records a job's batch and
returns the advice (never raising for want of it), reconcile writes it (a ``batch`` action,
and a resize that sets a batch), the policy reads a live job's batch from its progress and
advises a new one on the same GPUs without a restart, the restarted job's script reads it,
the emulated program follows it, and ``wattctl report --batches`` shows the history."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from slurm_plugin import progress
from slurm_plugin.emulated_train import batch_factor, start_batch
from slurm_plugin.errors import InputError, TelemetryError
from slurm_plugin.model import (Action, Cluster, Gpu, GpuUse, Job, Node, Placement, Progress,
                                Readings)
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.base import Context
from slurm_plugin.policy.ones.evolve import Plan
from slurm_plugin.policy.ones.observe import with_reported_batch
from slurm_plugin.record import replace
from slurm_plugin.report.batches import batch_events, batch_table
from slurm_plugin.telemetry.influx import Series
from slurm_plugin.telemetry.readers import _progress

from test_reconcile import Fixed, Recorder, run
from test_wrapper_translate import REQ, _plan

NOW = 10_000.0


class FakeInflux:
    """Records writes; answers ``job_advice`` queries with ``advice`` rows (or raises)."""

    def __init__(self, advice: list[dict] | None = None, fail_query: bool = False) -> None:
        self.points: list = []
        self.queries: list[str] = []
        self.advice, self.fail_query = advice or [], fail_query

    def write(self, points):
        self.points += list(points)
        return len(self.points)

    def query(self, q):
        self.queries.append(q)
        if self.fail_query:
            raise TelemetryError("influx: GET http://x/query: connection refused")
        if not self.advice:
            return []
        cols = tuple(self.advice[0])
        return [Series("job_advice", {}, cols, tuple(tuple(r[c] for c in cols)
                                                     for r in self.advice))]


@pytest.fixture(autouse=True)
def _no_key(monkeypatch, tmp_path):
    monkeypatch.setenv("WATTBATCH_PROGRESS_KEY_FILE", str(tmp_path / "no-key"))
    monkeypatch.setenv("SLURM_JOB_ID", "7")


ADVICE_ROW = {"time": NOW - 5, "batch_size": 470, "lr_scale": 1.916, "from_batch_size": 128,
              "why": "ones: batch 128->470 on 1 GPU"}


def test_report_progress_records_the_batch_and_returns_the_advice():
    client = FakeInflux([ADVICE_ROW])
    advice = progress.report_progress(5, 100.0, total_steps=50, batch_size=128, client=client,
                                      now_s=NOW)
    assert advice == progress.Advice(470, 1.916, 128, NOW - 5, "ones: batch 128->470 on 1 GPU")
    assert client.points[0].fields["batch_size"] == 128
    assert '"job_id" = \'7\'' in client.queries[0]


def test_a_job_that_does_not_report_its_batch_is_not_asked_anything():
    client = FakeInflux([ADVICE_ROW])
    assert progress.report_progress(5, 100.0, client=client, now_s=NOW) is None
    assert client.queries == [] and "batch_size" not in client.points[0].fields


def test_no_advice_and_an_outage_return_none_without_raising():
    assert progress.report_progress(1, 1.0, batch_size=64, client=FakeInflux(), now_s=NOW) is None
    down = FakeInflux([ADVICE_ROW], fail_query=True)
    assert progress.report_progress(1, 1.0, batch_size=64, client=down, now_s=NOW) is None
    assert progress.current_advice("7", client=down) is None
    bad = FakeInflux([{**ADVICE_ROW, "batch_size": -3}])
    assert progress.current_advice("7", client=bad) is None


@pytest.mark.parametrize("batch", [0, -1, 2.5, True])
def test_a_bad_batch_is_an_input_error_naming_it(batch):
    with pytest.raises(InputError, match=r"progress: batch_size=.*give a whole number >= 1"):
        progress.report_progress(1, 1.0, batch_size=batch, client=FakeInflux(), now_s=NOW)
    with pytest.raises(InputError, match="job_advice: batch_size"):
        progress.advice_point("7", 0, 1.0, now_s=NOW)


def test_the_cli_prints_the_advice_as_json_and_as_shell_lines(monkeypatch):
    client = FakeInflux([ADVICE_ROW])
    monkeypatch.setattr(progress, "_site_client", lambda: client)
    out = CliRunner().invoke(progress.cli, ["--advice"])
    assert out.exit_code == 0 and json.loads(out.output)["batch_size"] == 470
    out = CliRunner().invoke(progress.cli, ["--advice", "--shell"])
    assert out.output == "export WATTBATCH_BATCH_SIZE=470\nexport WATTBATCH_LR_SCALE=1.916\n"
    out = CliRunner().invoke(progress.cli, ["--step", "3", "--samples-per-s", "9",
                                            "--batch-size", "128"])
    assert out.exit_code == 0 and json.loads(out.output)["lr_scale"] == 1.916
    assert client.points[-1].fields["batch_size"] == 128
    monkeypatch.setattr(progress, "_site_client", lambda: FakeInflux(fail_query=True))
    assert CliRunner().invoke(progress.cli, ["--advice"]).output == "null\n"
    assert CliRunner().invoke(progress.cli, ["--advice", "--shell"]).output == ""
    assert CliRunner().invoke(progress.cli, ["--epoch", "1"]).exit_code != 0


def test_the_reader_takes_the_batch_from_a_progress_point():
    row = {"time": NOW, "step": 3, "samples_per_s": 5.0, "batch_size": 256}
    assert _progress("7", row).batch_size == 256
    assert _progress("7", {**row, "batch_size": None}).batch_size is None


class AdviceRecorder(Recorder):
    def advise(self, job_id, batch_size, lr_scale, from_batch_size, why):
        self._check("advise")
        self._done("advise", job_id, batch_size, lr_scale, from_batch_size)


BATCH = Action("batch", "7", "ones", batch_size=470, lr_scale=1.9, why="ones: batch",
               predicted={"from_batch_size": 128})


def test_a_batch_action_writes_the_advice_and_changes_nothing_in_slurm(tmp_path):
    act = AdviceRecorder()
    res = run(tmp_path, Fixed(BATCH), act)
    assert [o.status for o in res.outcomes] == ["done"]
    assert act.calls == [("advise", "7", 470, 1.9, 128)]
    again = run(tmp_path, Fixed(BATCH), act)          # idempotent: the same advice is one
    assert [o.status for o in again.outcomes] == ["skipped"] and len(act.calls) == 1
    assert res.as_dict()["actions"][0]["batch_size"] == 470


def test_a_failed_advice_is_journaled_failed_and_the_job_not_touched(tmp_path):
    act = AdviceRecorder(fail_on="advise")
    res = run(tmp_path, Fixed(BATCH), act)
    assert res.outcomes[0].status == "failed" and "advise" in res.outcomes[0].detail
    assert act.calls == []


def test_a_resize_with_a_batch_writes_the_advice_before_the_job_is_released(tmp_path):
    act = AdviceRecorder()
    grow = Action("resize", "7", "ones", gpus=2, batch_size=512, lr_scale=2.0, why="grow")
    assert [o.status for o in run(tmp_path, Fixed(grow), act).outcomes] == ["done"]
    assert [c[0] for c in act.calls] == ["requeue_hold", "set_gpus", "advise", "release",
                                         "start_now"]
    plain = AdviceRecorder()
    run(tmp_path / "x", Fixed(Action("resize", "7", "ones", gpus=2, why="grow")), plain)
    assert "advise" not in [c[0] for c in plain.calls]


# ---------------------------------------------------------------- the policy, live view
def _cluster(job: Job) -> Cluster:
    gpus0 = tuple(Gpu("n1", i, exclusive_job=job.job_id if i == 0 else None) for i in range(4))
    nodes = (Node("n1", gpus=gpus0),) + tuple(
        Node(f"n{k}", gpus=tuple(Gpu(f"n{k}", i) for i in range(4))) for k in (2, 3))
    return Cluster(nodes=nodes, jobs={job.job_id: job}, taken_s=NOW)


JOB = Job("7", "RUNNING", gpus=1, nodes=("n1",), uses=(GpuUse("n1", 0),), submit_s=NOW - 100,
          start_s=NOW - 60, time_limit_s=7200, app="cifar10", min_batch_size=128,
          max_batch_size=1024, lr_scaling="sqrt")


def _prog(batch: int | None, started_s: float = NOW - 55) -> dict:
    return {"7": Progress("7", step=50, samples_per_s=1000.0, total_steps=600, taken_s=NOW - 1,
                          started_s=started_s, batch_size=batch)}


def _decide(job: Job, prog: dict) -> tuple:
    return get_policy("ones").reconcile(Context(
        cluster=_cluster(job), readings=Readings(progress=prog), now_s=NOW,
        settings={"min_interval_s": 0}))


def test_a_live_job_reporting_its_batch_is_advised_a_better_one_on_its_gpus():
    acts = _decide(JOB, _prog(128))
    assert [a.kind for a in acts] == ["batch"], acts
    a = acts[0]
    assert 128 < a.batch_size <= 1024 and a.gpus is None
    assert a.lr_scale == pytest.approx((a.batch_size / 128) ** 0.5)      # its sqrt rule
    assert a.predicted["from_batch_size"] == 128 and "128->" in a.why
    # once it runs at the advised batch, nothing more
    assert _decide(JOB, _prog(a.batch_size)) == ()


def test_a_job_that_never_reports_its_batch_keeps_it():
    assert _decide(JOB, _prog(None)) == ()
    assert _decide(replace(JOB, min_batch_size=None, max_batch_size=None), _prog(128)) == ()


def test_a_reported_batch_counts_only_from_this_run_and_within_the_range():
    p = _prog(128)["7"]
    assert with_reported_batch(JOB, p).batch_size == 128
    assert with_reported_batch(JOB, replace(p, started_s=NOW - 500)).batch_size is None
    assert with_reported_batch(JOB, replace(p, batch_size=4096)).batch_size is None
    assert with_reported_batch(replace(JOB, batch_size=256), p).batch_size == 256
    assert with_reported_batch(JOB, None) is JOB


def test_a_new_batch_on_the_same_gpus_costs_no_restart_in_the_fitness():
    plan = Plan("7", True, False, [(1, 128, 0.001), (1, 470, 0.0011), (2, 470, 0.002)], 0,
                0.5, 90.0, (0.0, "7"), {"n1": 1})
    assert plan.score(1) == pytest.approx(1 / (0.5 / 0.0011))
    assert plan.score(2) == pytest.approx(1 / (0.5 / 0.002 + 90.0))


# ---------------------------------------------------------------- job script, program, report
def test_the_batch_range_goes_into_the_job_environment_and_the_script_reads_the_advice():
    req = replace(REQ, min_batch_size=64, max_batch_size=1024, lr_scaling="sqrt")
    out = _plan(Placement("ones", 1), req=req)
    assert ("WATTBATCH_BATCH_RANGE", "64-1024") in out.env
    assert ("WATTBATCH_LR_SCALING", "sqrt") in out.env
    assert out.template
    assert any(n.startswith("batch size 64-1024 (sqrt learning-rate rule)")
               and "wattctl report --batches" in n for n in out.notes), out.notes
    assert not any(n == "WATTBATCH_BATCH_RANGE" for n, _ in _plan(Placement("ones", 1)).env)


def test_the_emulated_program_starts_at_the_handed_batch_and_a_bigger_one_is_slower_per_step():
    assert start_batch(None, "512") is None             # it does not follow advice
    assert start_batch(128, "") == 128
    assert start_batch(128, "512") == 512
    assert start_batch(128, "x") == 128
    assert batch_factor(None, None) == 1.0 and batch_factor(512, 128) == 2.0


def test_the_batch_history_lists_advice_and_each_change_the_job_reported():
    reported = [{"time": t, "batch_size": b} for t, b in
                ((1.0, 128), (2.0, 128), (4.0, 470), (5.0, 470), (6.0, None))]
    events = batch_events([ADVICE_ROW | {"time": 3.0}], reported)
    assert [(e["time_s"], e["source"], e["batch_size"]) for e in events] == \
        [(1.0, "job", 128), (3.0, "advice", 470), (4.0, "job", 470)]
    text = batch_table({"7": events}, lambda t: f"t{t:g}")
    assert "7  t3  advice      470  lr x1.916  ones: batch 128->470 on 1 GPU" in text
    assert batch_events([], []) == []


def test_on_a_site_with_progress_keys_only_advice_signed_with_the_job_key_counts(
        monkeypatch, tmp_path):
    from slurm_plugin import progress_key

    key = progress_key.job_key(b"site-secret", "7").hex().encode()
    (tmp_path / "job.key").write_bytes(key)
    monkeypatch.setenv("WATTBATCH_PROGRESS_KEY_FILE", str(tmp_path / "job.key"))

    def row(point):     # as InfluxDB answers a query without GROUP BY: the tag a column
        return {"time": point.time_s, "job_id": "7", **point.fields}
    signed = progress.advice_point("7", 470, 1.9, now_s=NOW, from_batch_size=128, why="w",
                                   key=key)
    assert progress.current_advice("7", client=FakeInflux([row(signed)])).batch_size == 470
    forged = progress.advice_point("7", 470, 1.9, now_s=NOW, from_batch_size=128, why="w")
    assert progress.current_advice("7", client=FakeInflux([row(forged)])) is None
    other = progress.advice_point("7", 470, 1.9, now_s=NOW, key=b"someone else's")
    assert progress.current_advice("7", client=FakeInflux([row(other)])) is None


def test_advice_outside_the_jobs_declared_range_is_not_taken(monkeypatch):
    monkeypatch.setenv("WATTBATCH_BATCH_RANGE", "128-256")
    assert progress.current_advice("7", client=FakeInflux([ADVICE_ROW])) is None
    monkeypatch.setenv("WATTBATCH_BATCH_RANGE", "128-1024")
    assert progress.current_advice("7", client=FakeInflux([ADVICE_ROW])).batch_size == 470


# ---------------------------------------------------------------- the simulator's batch action
class BatchOnce:
    """Advises the first running job one new batch, once, on its GPUs."""

    name = "batch-once"

    def __init__(self, batch: int) -> None:
        self.batch, self.done, self.views = batch, None, []

    def advise(self, request, ctx):
        return get_policy("slurm-default").advise(request, ctx)

    def reconcile(self, ctx):
        for job in ctx.cluster.jobs.values():
            if job.running:
                self.views.append(job.batch_size)
        if self.done is not None:
            return ()
        for job in ctx.cluster.jobs.values():
            if job.running:
                p = ctx.readings.progress[job.job_id]
                self.done = (ctx.now_s, p.step / p.total_steps)
                return (Action(kind="batch", job_id=job.job_id, policy=self.name,
                               batch_size=self.batch),)
        return ()


def test_the_simulator_applies_a_batch_action_at_once_without_a_restart():
    from slurm_plugin.physics.pollux_batch import progress_rate
    from slurm_plugin.sim.cluster import ClusterSpec
    from slurm_plugin.sim.engine import Simulator

    from test_ones_policy import _job

    job = _job(0, "cifar10", 1, 128, 0.0)
    pol = BatchOnce(512)
    spec = ClusterSpec(nodes=1, gpus_per_node=4, reconcile_interval_s=600, restart_cost_s=90)
    r = Simulator([job], spec, pol).run()
    t, f = pol.done
    want = t + (1 - f) / progress_rate("cifar10", 1, 512, True, 128)     # no restart cost
    # within 1% (the step counter rounds f); a restart would add 90 s, 2.4%
    assert r["jobs_finished"] == 1 and abs(r["avg_jct_s"] - want) < 0.01 * want
    assert pol.views[0] == 128 and set(pol.views[1:]) == {512}     # the view follows
