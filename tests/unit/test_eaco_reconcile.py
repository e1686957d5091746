"""EaCO reconcile: early-stage observation, the history it feeds, and undoing a bad pair."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import test_eaco_shapes as shapes

from slurm_plugin.model import JobRequest, Progress
from slurm_plugin.policy.eaco.decide import Eaco
from slurm_plugin.policy.eaco.predict import group_slowdowns
from slurm_plugin.history import History
from slurm_plugin.record import replace

SOLO_S = 1000.0          # both jobs: 100 steps of 10 s alone, 10 steps per epoch
T0 = shapes.NOW


def progress(job_id: str, step: int, at_s: float) -> Progress:
    return Progress(job_id=job_id, step=step, samples_per_s=3.2, epoch=step // 10,
                    steps_per_epoch=10, total_steps=100, taken_s=at_s, started_s=T0 - 50)


def pair_cluster(apps: tuple[str, str] = ("alexnet", "resnet18")):
    cluster = shapes.one_gpu({"1": apps[0], "2": apps[1]})
    jobs = {j: shapes.running(j, a, [("a", 0)], shards=1, submit_s=T0 - 50, time_limit_s=SOLO_S)
            for j, a in (("1", apps[0]), ("2", apps[1]))}
    return cluster.__class__(cluster.nodes, jobs, T0)


def passes(cluster, slowdown: float, history: History, steps: int = 10):
    """Pass 1 marks the group at T0 (step 5 each); pass 2 after ``steps`` steps at
    ``slowdown``. Returns both passes' actions; observe figures go into ``history``."""
    first = {j: progress(j, 5, T0) for j in ("1", "2")}
    a1 = Eaco().reconcile(shapes.context(cluster, history=dict(history.view()), progress=first))
    feed(history, a1)
    later = T0 + steps * 10 * slowdown
    second = {j: progress(j, 5 + steps, later) for j in ("1", "2")}
    ctx = shapes.context(cluster, history=dict(history.view()), progress=second, now_s=later)
    a2 = Eaco().reconcile(ctx)
    feed(history, a2)
    return a1, a2, ctx


def feed(history: History, actions) -> None:
    """What the reconciler does with observe actions."""
    for a in actions:
        if a.kind == "observe":
            for k, v in a.predicted.items():
                history.add(k, float(v))


def test_good_pair_is_observed_and_kept(tmp_path: Path) -> None:
    history = History(tmp_path / "h.json")
    a1, a2, ctx = passes(pair_cluster(), 1.01, history)
    assert [a.kind for a in a1] == ["observe"]
    assert all(k.startswith("mark:1+2:") for k in a1[0].predicted)
    assert [a.kind for a in a2] == ["observe"]                    # no move for a good pair
    figures = a2[0].predicted
    assert abs(figures["pair:alexnet+resnet18"] - 1.01) < 0.005
    # the observation carries the prediction it tested
    predicted = max(group_slowdowns(["alexnet", "resnet18"], {})[0])
    assert figures["pair:alexnet+resnet18:predicted"] == predicted
    assert "vs predicted" in a2[0].why
    # idempotent: the same state again changes nothing
    again = ctx.__class__(**{**_ctx_kw(ctx), "history": dict(history.view())})
    assert Eaco().reconcile(again) == ()


def _ctx_kw(ctx) -> dict:
    return {f: getattr(ctx, f) for f in ("cluster", "readings", "now_s", "settings", "history")}


def test_bad_pair_moves_the_slowed_job_and_is_not_paired_again(tmp_path: Path) -> None:
    history = History(tmp_path / "h.json")
    _, a2, _ = passes(pair_cluster(), 1.5, history)
    kinds = sorted(a.kind for a in a2)
    assert kinds == ["move_exclusive", "observe"]
    move = next(a for a in a2 if a.kind == "move_exclusive")
    assert move.gpus == 1 and "observed slowdown 1.5" in move.why
    assert move.predicted["observed_slowdown"] > 1.4
    assert len({a.job_id for a in a2}) == len(a2)                 # one action per job
    assert history.view()["pair:alexnet+resnet18"] > 1.4
    # a later submission of the same pair is not put on that GPU
    again = JobRequest(gpus=1, app="alexnet", submit_s=T0, time_limit_s=600)
    cluster = shapes.one_gpu({"9": "resnet18"})
    pl = Eaco().advise(again, shapes.context(cluster, history=dict(history.view())))
    assert pl.gpu_indexes != (0,)
    assert Eaco().advise(again, shapes.context(cluster)).gpu_indexes == (0,)   # physics alone


def test_not_observed_long_enough_means_no_judgement(tmp_path: Path) -> None:
    history = History(tmp_path / "h.json")
    _, a2, _ = passes(pair_cluster(), 3.0, history, steps=5)      # half an epoch together
    assert a2 == ()


def _late_pair(free_gpus: int):
    # job 2's deadline (submit + 2 x 1000 s) is T0 + 1000: alone it ends at T0 + 958, sharing
    # at 1.08x at T0 + 1026
    cluster = shapes.one_gpu({"1": "alexnet", "2": "resnet18"}, free_gpus=free_gpus)
    jobs = {"1": shapes.running("1", "alexnet", [("a", 0)], shards=1, submit_s=T0 - 50,
                                time_limit_s=SOLO_S),
            "2": shapes.running("2", "resnet18", [("a", 0)], shards=1, submit_s=T0 - 1000,
                                time_limit_s=SOLO_S)}
    return cluster.__class__(cluster.nodes, jobs, T0)


def test_deadline_miss_moves_the_job(tmp_path: Path) -> None:
    _, a2, _ = passes(_late_pair(free_gpus=1), 1.08, History(tmp_path / "h.json"))
    move = [a for a in a2 if a.kind == "move_exclusive"]
    assert [a.job_id for a in move] == ["2"] and "deadline" in move[0].why


def test_no_deadline_move_without_a_free_gpu(tmp_path: Path) -> None:
    """Requeued behind a queue the job would only be later: it stays."""
    _, a2, _ = passes(_late_pair(free_gpus=0), 1.08, History(tmp_path / "h.json"))
    assert [a.kind for a in a2] == ["observe"]


def test_unplanned_group_is_undone_on_prediction() -> None:
    cluster = pair_cluster(("vgg16", "vgg16"))                    # predicted 2.78x each
    first = {j: progress(j, 5, T0) for j in ("1", "2")}
    actions = Eaco().reconcile(shapes.context(cluster, progress=first))
    assert [a.kind for a in actions] == ["move_exclusive"]
    assert "by prediction" in actions[0].why


def test_no_progress_no_action() -> None:
    assert Eaco().reconcile(shapes.context(pair_cluster())) == ()


def test_an_explicit_deadline_counts_over_the_default(tmp_path: Path) -> None:
    """Job 2 submitted recently (default deadline T0 + 1950) but with sbatch --deadline
    T0 + 1000: sharing at 1.08x makes it late, an exclusive GPU does not."""
    from slurm_plugin.record import replace
    cluster = pair_cluster()
    jobs = dict(cluster.jobs)
    jobs["2"] = replace(jobs["2"], deadline_s=T0 + 1000)
    _, a2, _ = passes(cluster.__class__(cluster.nodes, jobs, T0), 1.08, History(tmp_path / "h"))
    move = [a for a in a2 if a.kind == "move_exclusive"]
    assert [a.job_id for a in move] == ["2"] and "after its deadline" in move[0].why
    _, plain_a2, _ = passes(pair_cluster(), 1.08, History(tmp_path / "h2"))
    assert [a.kind for a in plain_a2] == ["observe"]                # default deadline: stays


def test_a_kept_policy_rejudges_a_quiet_group_when_the_log_names_a_key_it_reads(
        tmp_path: Path) -> None:
    """One policy object over passes (the simulator's way): a quiet group is skipped while the
    history log names only keys it does not read, and judged again, as a fresh pass would,
    once a key it reads changes."""
    history = History(tmp_path / "h.json")
    passes(pair_cluster(), 1.01, history)      # marked, then observed: "seen" is recorded
    cluster = pair_cluster()
    later = T0 + 10 * 10 * 1.01
    second = {j: progress(j, 15, later) for j in ("1", "2")}
    figures = dict(history.view())
    policy = Eaco()
    log: dict[int, tuple[str, ...]] = {}

    def run(version: int):
        ctx = replace(shapes.context(cluster, history=figures, progress=second, now_s=later),
                      history_version=version, history_log=MappingProxyType(dict(log)))
        return policy.reconcile(ctx), Eaco().reconcile(ctx)

    assert run(1) == ((), ())                  # judged: nothing to do, so the group is quiet
    figures["job:someone:vgg16:solo_s"] = 5.0
    log[2] = ("job:someone:vgg16:solo_s",)
    assert run(2) == ((), ())
    figures["pair:alexnet+resnet18"] = 1.5     # now predicted over the limit
    log[3] = ("pair:alexnet+resnet18",)
    kept, fresh = run(3)
    assert [a.kind for a in kept] == ["move_exclusive"] and kept == fresh
    figures["pair:alexnet+resnet18"] = 1.0
    assert run(5)[0] == ()                     # version 4 missing from the log: full recompute
