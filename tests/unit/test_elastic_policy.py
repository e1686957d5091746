"""The elastic policy by invariants over many cluster shapes (never below a job's minimum,
never above its maximum or the cluster, non-elastic jobs never resized, bad progress ignored),
and its settings' errors."""

from __future__ import annotations

import math
import random

import pytest

from slurm_plugin.errors import ConfigError
from slurm_plugin.model import Cluster, Gpu, GpuUse, Job, JobRequest, Node, Progress, Readings
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.base import Context
from slurm_plugin.policy.elastic.settings import parse_settings

NOW = 100_000.0


def _cluster(rng: random.Random, nodes: int, gpn: int, progress_kind: str = "good"):
    """Random running and pending jobs, elastic or not, on ``nodes`` x ``gpn`` GPUs, with
    progress readings (good, or of one bad kind) and the history of an earlier reading."""
    owner: dict[tuple[str, int], str] = {}
    jobs: dict[str, Job] = {}
    progress: dict[str, Progress] = {}
    history: dict[str, float] = {}
    names = [f"n{i:02d}" for i in range(nodes)]
    free = {n: list(range(gpn)) for n in names}
    for i in range(rng.randint(0, nodes * 2)):
        total = rng.choice([1, 1, 2, 3, gpn, 2 * gpn])
        per, k = (total, 1) if total <= gpn else (gpn, total // gpn)
        chosen = [n for n in names if len(free[n]) >= per][:k]
        if len(chosen) < k:
            continue
        uses = []
        for n in chosen:
            for idx in free[n][:per]:
                uses.append(GpuUse(n, idx))
                owner[(n, idx)] = f"r{i}"
            free[n] = free[n][per:]
        elastic = rng.random() < 0.7
        lo = rng.randint(1, total) if elastic else None
        hi = rng.randint(total, 4 * gpn) if elastic else None
        jid = f"r{i}"
        jobs[jid] = Job(job_id=jid, state="RUNNING", gpus=per, num_nodes=k, nodes=tuple(chosen),
                        uses=tuple(uses), submit_s=NOW - 9000 - i, start_s=NOW - 5000,
                        time_limit_s=rng.choice([None, 10 ** 6]), app=rng.choice(
                            ["cifar10", "imagenet", "bert", "resnet18", "", "unknown-app"]),
                        min_gpus=lo, max_gpus=hi)
        x = rng.uniform(10, 1000) * total
        if progress_kind == "nan":
            x = math.nan
        elif progress_kind == "negative":
            x = -x
        elif progress_kind == "huge":
            x = 1e12
        taken = NOW - (10 ** 5 if progress_kind == "stale" else 10)
        started = NOW - 5000 - (10 ** 4 if progress_kind == "old-run" else 0)
        progress[jid] = Progress(job_id=jid, step=5000, samples_per_s=x, epoch=50,
                                 steps_per_epoch=100, total_steps=rng.randint(5001, 10 ** 6),
                                 taken_s=taken, started_s=started)
        history.update({f"elastic:run:{jid}": float(started), f"elastic:s0:{jid}": 1000.0,
                        f"elastic:t0:{jid}": NOW - 4000})
    for i in range(rng.randint(0, 6)):
        total = rng.choice([1, 2, gpn])
        jobs[f"p{i}"] = Job(job_id=f"p{i}", state="PENDING", gpus=total, num_nodes=1,
                            submit_s=NOW - 100 + i)
    node_views = tuple(Node(name=n, state="mixed", gpus=tuple(
        Gpu(node=n, index=g, exclusive_job=owner.get((n, g))) for g in range(gpn)))
        for n in names)
    cluster = Cluster(nodes=node_views, jobs=jobs, taken_s=NOW)
    return Context(cluster=cluster, readings=Readings(progress=progress), now_s=NOW,
                   history=history)


def _check(ctx: Context, actions) -> list:
    cluster = ctx.cluster
    gpn = len(cluster.nodes[0].gpus)
    resizes = [a for a in actions if a.kind == "resize"]
    assert len({a.job_id for a in resizes}) == len(resizes)      # one resize per job a pass
    total_after = 0
    resized = {a.job_id: a for a in resizes}
    for job in cluster.jobs.values():
        if not job.running:
            continue
        a = resized.get(job.job_id)
        n = len(job.uses)
        if a is None:
            total_after += n
            continue
        assert job.min_gpus is not None and job.max_gpus is not None   # only elastic jobs
        new = a.gpus * (a.num_nodes or job.num_nodes)
        assert job.min_gpus <= new <= job.max_gpus
        assert new <= cluster.gpu_count and a.gpus <= gpn
        assert a.num_nodes is None or 1 <= a.num_nodes <= len(cluster.nodes)
        total_after += new
    assert total_after <= cluster.gpu_count
    return resizes


@pytest.mark.parametrize("seed", range(60))
def test_invariants_over_cluster_shapes(seed):
    rng = random.Random(seed)
    ctx = _cluster(rng, rng.randint(1, 12), rng.choice([1, 2, 4, 8]))
    _check(ctx, get_policy("elastic").reconcile(ctx))


@pytest.mark.parametrize("kind", ["nan", "negative", "huge", "stale", "old-run"])
@pytest.mark.parametrize("seed", range(8))
def test_bad_progress_is_ignored(kind, seed):
    ctx = _cluster(random.Random(seed), 6, 4, kind)
    actions = get_policy("elastic").reconcile(ctx)
    assert not [a for a in actions if a.kind == "resize" and a.job_id.startswith("r")]
    # nothing recorded of the running jobs (a waiting job's due time may be)
    assert not [k for a in actions if a.kind == "observe" for k in a.predicted
                if k.split(":")[-1].startswith("r")]


def test_job_without_progress_keeps_its_count():
    ctx = _cluster(random.Random(5), 6, 4)
    ctx = Context(cluster=ctx.cluster, readings=Readings(), now_s=NOW, history=ctx.history)
    assert not [a for a in get_policy("elastic").reconcile(ctx) if a.kind == "resize"]


def _idle(nodes: int, gpn: int, pending: int = 0) -> Cluster:
    views = tuple(Node(name=f"n{i}", gpus=tuple(Gpu(node=f"n{i}", index=g) for g in range(gpn)))
                  for i in range(nodes))
    jobs = {f"p{i}": Job(job_id=f"p{i}", state="PENDING", gpus=1) for i in range(pending)}
    return Cluster(nodes=views, jobs=jobs, pending_count=pending)


@pytest.mark.parametrize("nodes,gpn,ask,lo,hi,pending", [
    (1, 4, 8, 1, 8, 0), (2, 4, 8, 2, 16, 0), (4, 8, 3, 1, 3, 0), (2, 4, 6, 1, 12, 2),
    (1, 1, 1, 1, 4, 0), (3, 2, 5, 1, 6, 0)])
def test_advise_within_range_and_cluster(nodes, gpn, ask, lo, hi, pending):
    req = JobRequest(gpus=min(ask, gpn), num_nodes=-(-ask // gpn), min_gpus=lo, max_gpus=hi)
    ctx = Context(cluster=_idle(nodes, gpn, pending), now_s=NOW)
    for name in ("elastic", "elastic-restart"):
        pl = get_policy(name).advise(req, ctx)
        total = pl.gpus * (pl.num_nodes or req.num_nodes)
        assert lo <= total <= max(hi, ask) and pl.gpus <= gpn
        assert (pl.num_nodes or req.num_nodes) <= nodes


def test_non_elastic_request_unchanged():
    req = JobRequest(gpus=2, num_nodes=1)
    pl = get_policy("elastic").advise(req, Context(cluster=_idle(2, 4), now_s=NOW))
    assert pl.gpus == 2 and not pl.changes_anything
    assert not any("min_interval_s" in w for w in pl.why)


@pytest.mark.parametrize("interval_s, said", [(None, "600 s"), (120, "120 s"), (0, None)])
def test_an_elastic_jobs_explanation_says_how_long_it_is_not_resized(interval_s, said):
    req = JobRequest(gpus=2, num_nodes=1, min_gpus=1, max_gpus=4)
    settings = {} if interval_s is None else {"min_interval_s": interval_s}
    pl = get_policy("elastic").advise(req, Context(cluster=_idle(2, 4), now_s=NOW,
                                                   settings=settings))
    held = [w for w in pl.why if "min_interval_s" in w]
    assert held == ([] if said is None else [f"elastic: not resized within {said} of a start "
                                             "or restart (min_interval_s)"])


def test_queue_tiers_follow_the_gpu_time_asked():
    """With ``order_queue``, every job, elastic or not, goes into the tier of its time limit x
    GPUs (at the size the policy queues it at); a small job stays in tier 0; off (the
    default), none."""
    from slurm_plugin.policy.queue import queue_tier
    ctx = Context(cluster=_idle(2, 4, pending=1), now_s=NOW, settings={"order_queue": True})
    big = JobRequest(gpus=4, num_nodes=2, min_gpus=2, max_gpus=8, time_limit_s=10 * 3600.0)
    plain = JobRequest(gpus=2, num_nodes=1, time_limit_s=24 * 3600.0)
    small = JobRequest(gpus=1, num_nodes=1, min_gpus=1, max_gpus=4, time_limit_s=1800.0)
    pol = get_policy("elastic")
    assert pol.advise(big, ctx).nice == queue_tier(8 * 10 * 3600.0) == 7
    assert pol.advise(plain, ctx).nice == queue_tier(2 * 24 * 3600.0) == 6
    assert pol.advise(small, ctx).nice is None
    off = Context(cluster=ctx.cluster, now_s=NOW)
    assert pol.advise(big, off).nice is None and pol.advise(plain, off).nice is None


def test_live_admission_reads_the_queue_in_tier_order():
    """Without the simulator's ordered queue, admission reads the pending jobs as Slurm orders
    them once ``advise`` gave their tiers: tier, then submission; by submission without."""
    from slurm_plugin.policy.elastic.decide import Elastic
    jobs = {
        "old-big": Job(job_id="old-big", state="PENDING", gpus=4, num_nodes=2, submit_s=1.0,
                       time_limit_s=10 * 3600.0),
        "new-small": Job(job_id="new-small", state="PENDING", gpus=1, submit_s=5.0,
                         time_limit_s=600.0),
        "mid": Job(job_id="mid", state="PENDING", gpus=2, submit_s=3.0, time_limit_s=3 * 3600.0),
        "no-limit": Job(job_id="no-limit", state="PENDING", gpus=8, submit_s=4.0),
    }
    cluster = Cluster(nodes=_idle(2, 4).nodes, jobs=jobs, pending_count=len(jobs))
    order, n = Elastic._pending(cluster, True)
    assert [j.job_id for j in order] == ["no-limit", "new-small", "mid", "old-big"] and n == 4
    order, _ = Elastic._pending(cluster, False)
    assert [j.job_id for j in order] == ["old-big", "mid", "no-limit", "new-small"]
    aged = {"elastic:tier:old-big": 0.0}        # a job that aged into tier 0 goes by submission
    order, _ = Elastic._pending(cluster, True, aged)
    assert [j.job_id for j in order] == ["old-big", "no-limit", "new-small", "mid"]


def test_queue_tiers_age_so_no_job_waits_behind_smaller_ones_for_good():
    """A pending job's tier drops by one per ``tier_age_s`` waited: moved by a resize at its
    own size into the lower tier, recorded in the history; the longest waiting first, at most
    ``max_resizes_per_pass``; a job already in its aged tier is left alone."""
    from slurm_plugin.policy.elastic.decide import _age_tiers
    from slurm_plugin.policy.elastic.settings import parse_settings as parse
    big = dict(state="PENDING", gpus=4, num_nodes=2, time_limit_s=10 * 3600.0)   # tier 7
    jobs = {"a": Job(job_id="a", submit_s=NOW - 3 * 900 - 1, **big),
            "b": Job(job_id="b", submit_s=NOW - 900 - 1, **big),
            "c": Job(job_id="c", submit_s=NOW - 100, **big),
            "s": Job(job_id="s", state="PENDING", gpus=1, submit_s=NOW - 9000,
                     time_limit_s=600.0)}
    cluster = Cluster(nodes=_idle(2, 4).nodes, jobs=jobs, pending_count=len(jobs))
    s = parse({"order_queue": True, "tier_age_s": 900.0})
    out = _age_tiers("elastic", cluster, NOW, s, {})
    moves = [(a.job_id, a.gpus, a.nice) for a in out if a.kind == "resize"]
    assert moves == [("a", 4, 4), ("b", 4, 6)]
    assert out[-1].predicted == {"elastic:tier:a": 4.0, "elastic:tier:b": 6.0}
    assert _age_tiers("elastic", cluster, NOW, s, out[-1].predicted) == []
    one = parse({"order_queue": True, "tier_age_s": 900.0, "max_resizes_per_pass": 1})
    assert [a.job_id for a in _age_tiers("elastic", cluster, NOW, one, {})
            if a.kind == "resize"] == ["a"]


def test_a_reconcile_pass_ages_tiers_where_the_snapshot_does_not_count_pending_jobs():
    """The live snapshot leaves ``pending_count`` unknown (None): a pass still ages the tiers
    (it once read None as "nothing pending" and never aged a job on a real cluster)."""
    jobs = {"a": Job(job_id="a", state="PENDING", gpus=4, num_nodes=2,
                     time_limit_s=10 * 3600.0, submit_s=NOW - 3 * 900 - 1)}
    cluster = Cluster(nodes=_idle(2, 4).nodes, jobs=jobs, taken_s=NOW)
    assert cluster.pending_count is None
    ctx = Context(cluster=cluster, readings=Readings(), now_s=NOW, history={},
                  settings={"order_queue": True, "tier_age_s": 900.0})
    moves = [(a.job_id, a.nice) for a in get_policy("elastic").reconcile(ctx)
             if a.kind == "resize"]
    assert moves == [("a", 4)]


@pytest.mark.parametrize("key,value", [("restart_cost_s", -1), ("min_interval_s", "soon"),
                                       ("min_efficiency", 2.0), ("stale_s", math.nan),
                                       ("fairness_factor", 0.5), ("max_resizes_per_pass", 1.5),
                                       ("gain_factor", True), ("order_queue", "yes"),
                                       ("tier_age_s", -1),
                                       ("no_such_key", 1)])
def test_settings_errors_name_policy_key_and_value(key, value):
    with pytest.raises(ConfigError) as exc:
        parse_settings({key: value})
    msg = str(exc.value)
    assert "elastic" in msg and key in msg and repr(value) in msg


def _one_waiting(due: float | None) -> Context:
    """An elastic job on the 4 GPUs of one node, 200 s from its end, and a
    2-GPU job waiting behind it since 2,000 s ago: waiting beats shrinking (a restart)."""
    uses = tuple(GpuUse("n00", g) for g in range(4))
    jobs = {
        "r0": Job(job_id="r0", state="RUNNING", gpus=4, num_nodes=1, nodes=("n00",), uses=uses,
                  submit_s=NOW - 9000, start_s=NOW - 5000, time_limit_s=10 ** 6, app="",
                  min_gpus=1, max_gpus=4),
        "p0": Job(job_id="p0", state="PENDING", gpus=2, num_nodes=1, submit_s=NOW - 2000),
    }
    progress = {"r0": Progress(job_id="r0", step=5000, samples_per_s=400.0, total_steps=5200,
                               taken_s=NOW - 10, started_s=NOW - 5000)}
    history = {"elastic:run:r0": NOW - 5000, "elastic:s0:r0": 1000.0,
               "elastic:t0:r0": NOW - 4010}
    if due is not None:
        history["elastic:due:p0"] = due
    node = Node(name="n00", state="mixed", gpus=tuple(
        Gpu(node="n00", index=g, exclusive_job="r0") for g in range(4)))
    cluster = Cluster(nodes=(node,), jobs=jobs, taken_s=NOW)
    return Context(cluster=cluster, readings=Readings(progress=progress), now_s=NOW,
                   history=history)


def test_a_job_past_its_due_time_is_admitted_by_a_shrink():
    """fairness_factor enforced: the first pass gives the waiting job its due time (submission
    + factor x (waited + predicted wait)) and keeps it waiting; past that time, the elastic
    job is shrunk for it although waiting would cost less."""
    first = get_policy("elastic").reconcile(_one_waiting(None))
    assert not [a for a in first if a.kind == "resize"]
    dues = {k: v for a in first if a.kind == "observe" for k, v in a.predicted.items()
            if k == "elastic:due:p0"}
    assert dues == {"elastic:due:p0": pytest.approx(NOW - 2000 + 2.0 * (2000 + 200), abs=15)}
    later = get_policy("elastic").reconcile(_one_waiting(NOW + 3000))   # not yet due
    assert not [a for a in later if a.kind == "resize"]
    late = get_policy("elastic").reconcile(_one_waiting(NOW - 1))
    shrinks = [a for a in late if a.kind == "resize"]
    assert [(a.job_id, a.gpus) for a in shrinks] == [("r0", 2)]
    assert "past its due time" in shrinks[0].why
