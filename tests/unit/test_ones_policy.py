"""The ``ones`` policy and its ``tiresias`` baseline in the simulator: the goodput model
(a bigger batch is not free), the step-time fit, determinism for a seed, invariants of every
decision (within the cluster, each job's GPU and batch range; non-elastic jobs never resized),
the batch-size path of the engine, and the settings' errors."""

from __future__ import annotations

import math

import pytest

from slurm_plugin.errors import ConfigError
from slurm_plugin.physics.pollux import elastic_profile, pollux_apps
from slurm_plugin.physics.pollux_batch import (batch_bounds, measured_batch_range,
                                               progress_rate, samples_to_target)
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.ones.predict import best_batch, fit_error, goodput, lr_scale
from slurm_plugin.policy.ones.settings import parse_settings
from slurm_plugin.policy.tiresias.settings import parse_settings as tiresias_settings
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.trace import TraceJob

APPS = ("cifar10", "deepspeech2", "yolov3", "bert", "ncf", "imagenet")


def _job(i: int, app: str, gpus: int, batch: int, submit_s: float, elastic: bool = True):
    prof = elastic_profile(app, batch, gpus)
    lo, hi = measured_batch_range(app)
    return TraceJob(job_id=f"{app}-{i}", submit_s=submit_s, duration_s=prof.duration_s(gpus),
                    num_gpus=gpus, line=i + 2, app=app,
                    min_gpus=1 if elastic else None, max_gpus=prof.max_gpus if elastic else None,
                    time_limit_s=60.0 * -(-1.25 * prof.duration_s(1) // 60),
                    speedup=prof.speedup(), samples=prof.samples,
                    batch_size=batch if elastic else None,
                    min_batch_size=lo if elastic else None, max_batch_size=hi if elastic else None)


def _workload(n: int = 24) -> list[TraceJob]:
    rows = [("cifar10", 2, 256), ("deepspeech2", 4, 80), ("yolov3", 2, 16), ("bert", 1, 12),
            ("ncf", 1, 1024), ("cifar10", 4, 512)]
    out = []
    for i in range(n):
        app, g, b = rows[i % len(rows)]
        out.append(_job(i, app, g, b, 120.0 * i, elastic=i % 5 != 4))
    return out


class Recorder:
    """Wraps a policy and checks every action against the cluster it saw."""

    def __init__(self, name: str) -> None:
        self.inner = get_policy(name)
        self.name = self.inner.name
        self.actions: list = []
        self.problems: list[str] = []

    def advise(self, request, ctx):
        return self.inner.advise(request, ctx)

    def reconcile(self, ctx):
        acts = self.inner.reconcile(ctx)
        cap = ctx.cluster.gpu_count
        for a in acts:
            self.actions.append((ctx.now_s, a.kind, a.job_id, a.gpus, a.num_nodes, a.batch_size,
                                 a.nice))
            if a.kind != "resize":
                continue
            job = ctx.cluster.jobs[a.job_id]
            total = a.gpus * (a.num_nodes or job.num_nodes)
            if total > cap:
                self.problems.append(f"{a.job_id}: {total} GPUs > cluster {cap}")
            if job.min_gpus is None:
                if total != job.gpus * job.num_nodes or a.batch_size is not None:
                    self.problems.append(f"{a.job_id}: non-elastic job resized")
                continue
            if not job.min_gpus <= total <= job.max_gpus:
                self.problems.append(f"{a.job_id}: {total} outside {job.min_gpus}-{job.max_gpus}")
            if a.batch_size is not None and not (
                    job.min_batch_size <= a.batch_size <= job.max_batch_size
                    and batch_bounds(job.app, total) is not None
                    and batch_bounds(job.app, total)[0] <= a.batch_size
                    <= batch_bounds(job.app, total)[1]):
                self.problems.append(f"{a.job_id}: batch {a.batch_size} outside its range")
        return acts


def _run(policy: str, settings=None, stat_eff: bool = True, jobs=None):
    rec = Recorder(policy)
    spec = ClusterSpec(nodes=4, gpus_per_node=4, reconcile_interval_s=60, restart_cost_s=90)
    sim = Simulator(jobs or _workload(), spec, rec, seed=0, settings=settings,
                    statistical_efficiency=stat_eff)
    return sim.run(), rec


# ---------------------------------------------------------------- goodput model
@pytest.mark.parametrize("app", APPS)
def test_bigger_batch_is_not_free(app):
    """Samples to target grow with the batch, so the progress rate at a bigger batch is below
    what the same throughput would give at the small batch's samples."""
    lo, hi = measured_batch_range(app)
    assert samples_to_target(app, hi) > samples_to_target(app, lo)
    n = 4
    b0, b1 = batch_bounds(app, n)
    assert progress_rate(app, n, b1) < progress_rate(app, n, b1, stat_eff=False, ref_batch=b0)
    assert goodput(app, n, b1) < goodput(app, n, b1, False, b0)


def test_statistical_efficiency_changes_the_best_batch():
    """Off, the batch of the most samples per second looks best (the largest, but where the
    measured step times say a smaller one runs more samples per second); on, a batch never
    larger than that, and a smaller one on some GPU counts."""
    smaller = 0
    for app in APPS:
        for n in (1, 2, 4, 8):
            on = best_batch(app, n, None, None, True, None)
            off = best_batch(app, n, None, None, False, measured_batch_range(app)[0])
            if on is None:
                continue
            b0, b1 = batch_bounds(app, n)
            assert off[1] >= goodput(app, n, b1, False, measured_batch_range(app)[0])
            assert on[0] <= off[0]
            smaller += on[0] < off[0]
    assert smaller >= 3


@pytest.mark.parametrize("app", APPS)
def test_step_time_fit_error_on_held_out_rows(app):
    mean, worst = fit_error(app)
    assert mean < 0.2 and worst < 0.8


@pytest.mark.parametrize("app", APPS)
def test_each_application_predicts_with_its_better_held_out_predictor(app):
    from slurm_plugin.physics.pollux_batch import _tables
    from slurm_plugin.policy.ones.predict import _rows, fit_errors, predicted_step_s, predictor
    errors = fit_errors(app)
    assert fit_error(app) == min(errors.values())
    assert errors[predictor(app)][0] == min(e[0] for e in errors.values())
    top = _tables(app)[0][-1]
    for n in (1, 3, 8, 17):     # past the largest measured local batch: accumulation
        assert predicted_step_s(app, n, 3 * top) == pytest.approx(3 * predicted_step_s(app, n,
                                                                                       top))
    if predictor(app) == "interp":      # through every measured row it was made from
        for n, b, step in _rows(app)[::37]:
            assert predicted_step_s(app, n, b) == pytest.approx(step, rel=1e-9)


def test_interpolation_wins_where_the_model_misses_most():
    from slurm_plugin.policy.ones.predict import fit_errors, predictor
    # measured here: the fitted model's mean held-out error is 14-15% on cifar10 and ncf,
    # interpolation's 4-6%; on yolov3 the model's is smaller
    assert predictor("cifar10") == predictor("ncf") == "interp"
    assert fit_errors("ncf")["interp"][0] < 0.5 * fit_errors("ncf")["model"][0]


def test_lr_scale_rules():
    assert lr_scale("", 256, 512) == 2.0
    assert lr_scale("linear", 512, 256) == 0.5
    assert math.isclose(lr_scale("sqrt", 256, 1024), 2.0)


# ---------------------------------------------------------------- the engine's batch path
class ResizeOnce:
    """Resizes the first running job once, to ``gpus`` GPUs at ``batch``."""

    name = "resize-once"

    def __init__(self, gpus: int, batch: int) -> None:
        self.gpus, self.batch, self.done = gpus, batch, None

    def advise(self, request, ctx):
        return get_policy("slurm-default").advise(request, ctx)

    def reconcile(self, ctx):
        from slurm_plugin.model import Action
        if self.done is not None:
            return ()
        for job in ctx.cluster.jobs.values():
            if job.running:
                self.done = (ctx.now_s, ctx.readings.progress[job.job_id].step
                             / ctx.readings.progress[job.job_id].total_steps)
                return (Action(kind="resize", job_id=job.job_id, policy=self.name,
                               gpus=self.gpus, num_nodes=1, batch_size=self.batch),)
        return ()


@pytest.mark.parametrize("stat_eff", [True, False])
def test_resize_with_batch_keeps_progress_and_uses_the_batch_model(stat_eff):
    job = _job(0, "cifar10", 1, 128, 0.0)
    pol = ResizeOnce(4, 2048)
    spec = ClusterSpec(nodes=1, gpus_per_node=4, reconcile_interval_s=600, restart_cost_s=90)
    r = Simulator([job], spec, pol, statistical_efficiency=stat_eff).run()
    t, f = pol.done
    rate = progress_rate("cifar10", 4, 2048, stat_eff, 128)
    want = t + 90 + (1 - f) / rate
    assert r["jobs_finished"] == 1
    # the step counter's rounding: f is known to 1 / total_steps
    assert abs(r["avg_jct_s"] - want) < 0.02 * want
    # a bigger batch is slower with statistical efficiency (more samples to target)
    if stat_eff:
        assert rate < progress_rate("cifar10", 4, 2048, False, 128)


# ---------------------------------------------------------------- the policies
def test_ones_is_deterministic_for_a_seed_and_keeps_its_invariants():
    r1, a = _run("ones", {"seed": 3})
    r2, b = _run("ones", {"seed": 3})
    assert a.actions == b.actions and r1["avg_jct_s"] == r2["avg_jct_s"]
    assert not a.problems, a.problems[:5]
    assert r1["jobs_finished"] == len(_workload()) and r1["jobs_timed_out"] == 0
    assert any(x[1] == "resize" and x[5] is not None for x in a.actions)


def test_ones_beats_static_sizes_on_a_small_workload():
    ones, _ = _run("ones")
    default, _ = _run("slurm-default")
    assert ones["avg_jct_s"] < default["avg_jct_s"]


def test_tiresias_preempts_by_attained_service_and_never_resizes():
    long = _job(0, "imagenet", 4, 800, 0.0, elastic=False)
    short = _job(1, "cifar10", 4, 512, 20_000.0, elastic=False)    # ~1,170 s on 4 GPUs
    spec = ClusterSpec(nodes=1, gpus_per_node=4, reconcile_interval_s=60, restart_cost_s=90)
    rec = Recorder("tiresias")
    Simulator([long, short], spec, rec, settings={"thresholds_gpu_s": [10_000.0]}).run()
    assert not rec.problems
    stops = [x for x in rec.actions if x[1] == "resize"]
    assert stops and stops[0][2] == long.job_id          # the long job made room
    assert stops[0][6] == 1                 # requeued into queue 1's tier, behind the short one
    assert not [x for x in rec.actions if x[1] == "defer"]      # queued jobs are never held
    default = Simulator([long, short], spec, get_policy("slurm-default")).run()
    tir = Simulator([long, short], spec, get_policy("tiresias"),
                    settings={"thresholds_gpu_s": [10_000.0]}).run()
    assert tir["avg_jct_s"] < default["avg_jct_s"]


@pytest.mark.parametrize("key,value", [("population", 1), ("crossover_p", 1.5),
                                       ("seed", 0.5), ("statistical_efficiency", 2),
                                       ("hold_s", float("nan")), ("nope", 1)])
def test_ones_settings_errors_name_policy_key_and_value(key, value):
    with pytest.raises(ConfigError) as e:
        parse_settings({key: value})
    assert "ones" in str(e.value) and key in str(e.value)


@pytest.mark.parametrize("key,value", [("thresholds_gpu_s", [10, 5]), ("hold_s", 0),
                                       ("lookahead", 1.5), ("nope", 1)])
def test_tiresias_settings_errors_name_policy_key_and_value(key, value):
    with pytest.raises(ConfigError) as e:
        tiresias_settings({key: value})
    assert "tiresias" in str(e.value) and key in str(e.value)


def test_every_pollux_app_has_batch_bounds():
    for app in pollux_apps():
        assert batch_bounds(app, 1) is not None
