"""The elastic policy's choices on small hand-built clusters: a queued job waits for its count
when that ends sooner than a run on fewer GPUs, a long job is shrunk for a short one when the
wait saved exceeds its loss over the short job's run, a job shrunk from many GPUs keeps a usable
progress reading, and growth leaves the nodes kept for a waiting job alone."""

from __future__ import annotations

from slurm_plugin.model import Cluster, Gpu, GpuUse, Job, Node, Progress, Readings
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.base import Context
from slurm_plugin.policy.elastic.observe import usable_rate
from slurm_plugin.policy.elastic.settings import parse_settings

NOW = 100_000.0


def _running(jid, node_gpus, *, lo=1, hi=16, app="imagenet", start=NOW - 5000, limit=10 ** 7):
    uses = tuple(GpuUse(n, i) for n, idxs in node_gpus.items() for i in idxs)
    per = max(len(v) for v in node_gpus.values())
    return Job(job_id=jid, state="RUNNING", gpus=per, num_nodes=len(node_gpus),
               nodes=tuple(node_gpus), uses=uses, submit_s=start - 100, start_s=start,
               time_limit_s=limit, app=app, min_gpus=lo, max_gpus=hi)


def _ctx(nodes, gpn, running, pending, remaining):
    """``remaining``: job -> (seconds left on its GPUs, samples/s): progress read 10 s ago
    and 1000 s ago in this run, consistent with that remaining time."""
    owner = {(u.node, u.index): j.job_id for j in running for u in j.uses}
    views = tuple(Node(name=f"n{i}", state="mixed", gpus=tuple(
        Gpu(node=f"n{i}", index=g, exclusive_job=owner.get((f"n{i}", g))) for g in range(gpn)))
        for i in range(nodes))
    jobs = {j.job_id: j for j in list(running) + list(pending)}
    progress, history = {}, {}
    for j in running:
        rem, x = remaining[j.job_id]
        total = 100_000
        rate = 10.0                         # steps/s in this run, read 990 s apart
        step = int(total - rem * rate)
        progress[j.job_id] = Progress(job_id=j.job_id, step=step, samples_per_s=x,
                                      total_steps=total, taken_s=NOW - 10, started_s=j.start_s)
        history.update({f"elastic:run:{j.job_id}": float(j.start_s),
                        f"elastic:s0:{j.job_id}": float(step - 9900),
                        f"elastic:t0:{j.job_id}": NOW - 1000,
                        f"elastic:n:{j.job_id}": float(len(j.uses)),
                        f"elastic:x:{j.job_id}": x})
    cluster = Cluster(nodes=views, jobs=jobs, taken_s=NOW, pending_count=len(pending))
    return Context(cluster=cluster, readings=Readings(progress=progress), now_s=NOW,
                   history=history)


def _resizes(ctx):
    return {a.job_id: a for a in get_policy("elastic").reconcile(ctx) if a.kind == "resize"}


def test_queued_job_waits_for_its_count_when_that_ends_sooner():
    # n0's 4 GPUs held by a job whose time limit ends in 60 s; the queued job runs 40,000 s
    # on 1 GPU and about 11,000 s on 4: it waits, rather than start on n1's free GPU
    r0 = _running("r0", {"n0": [0, 1, 2, 3]}, lo=4, hi=4, limit=5060)
    r1 = _running("r1", {"n1": [0, 1, 2]}, lo=3, hi=3)
    p0 = Job(job_id="p0", state="PENDING", gpus=4, num_nodes=1, submit_s=NOW - 50,
             time_limit_s=40_000, app="imagenet", min_gpus=1, max_gpus=4)
    ctx = _ctx(2, 4, [r0, r1], [p0], {"r0": (60.0, 1000.0), "r1": (50_000.0, 800.0)})
    assert "p0" not in _resizes(ctx)


def test_long_job_is_shrunk_for_a_short_one():
    # a 100,000 s job on all 8 GPUs; a queued job of ~1,000 s on 4 would wait ~100,000 s:
    # shrinking the long one for the short one's run costs it far less
    r0 = _running("r0", {"n0": [0, 1, 2, 3], "n1": [0, 1, 2, 3]}, lo=1, hi=8)
    p0 = Job(job_id="p0", state="PENDING", gpus=4, num_nodes=1, submit_s=NOW - 50,
             time_limit_s=4_000, app="imagenet", min_gpus=1, max_gpus=4)
    acts = _resizes(_ctx(2, 4, [r0], [p0], {"r0": (100_000.0, 5000.0)}))
    assert "r0" in acts
    assert 1 <= acts["r0"].gpus * (acts["r0"].num_nodes or 2) <= 4
    assert "p0" not in acts             # it starts as asked on the GPUs freed


def test_reading_after_a_shrink_from_many_gpus_is_usable():
    # 40 GPUs gave 7,200 samples/s (180 a GPU); on 1 GPU the same job does 288: more per GPU
    # under sublinear scaling, not a bad reading
    s = parse_settings({})
    job = _running("r0", {"n0": [0]})
    p = Progress(job_id="r0", step=900, samples_per_s=288.0, total_steps=1500,
                 taken_s=NOW - 10, started_s=job.start_s)
    hist = {"elastic:pn:r0": 40.0, "elastic:px:r0": 7200.0}
    assert usable_rate(p, job, 1, NOW, s, hist["elastic:pn:r0"], hist["elastic:px:r0"]) == 288.0
    # grown from 1 to 2 GPUs, 4x the throughput is still not physical
    hist = {"elastic:pn:r0": 1.0, "elastic:px:r0": 288.0}
    p2 = Progress(job_id="r0", step=900, samples_per_s=4 * 288.0, total_steps=1500,
                  taken_s=NOW - 10, started_s=job.start_s)
    assert usable_rate(p2, job, 2, NOW, s, hist["elastic:pn:r0"],
                       hist["elastic:px:r0"]) is None


def test_growth_leaves_the_waiting_jobs_nodes_alone():
    # n0 and n1 each have 2 free GPUs; a non-elastic job waits for a whole node (4), which
    # frees on n1 soonest; the elastic job on n1 may not grow into n1's free GPUs
    r0 = _running("r0", {"n0": [0, 1]}, lo=2, hi=2)
    r1 = _running("r1", {"n1": [0, 1]}, lo=1, hi=4)
    p0 = Job(job_id="p0", state="PENDING", gpus=4, num_nodes=1, submit_s=NOW - 50,
             time_limit_s=4_000)
    ctx = _ctx(2, 4, [r0, r1], [p0], {"r0": (10_000.0, 500.0), "r1": (5_000.0, 500.0)})
    acts = _resizes(ctx)
    assert "r1" not in acts
    # with no job waiting, it grows
    ctx = _ctx(2, 4, [r0, r1], [], {"r0": (10_000.0, 500.0), "r1": (5_000.0, 500.0)})
    assert "r1" in _resizes(ctx)


def test_tracker_sees_a_job_restarted_on_the_same_node():
    # the simulator names the nodes changed per version; a job shrunk from 4 to 2 GPUs on the
    # same node keeps the node's job list but is a new run: its count must follow
    from slurm_plugin.policy.elastic.track import Tracker
    s = parse_settings({})
    r4 = _running("r0", {"n0": [0, 1, 2, 3]}, lo=1, hi=8)
    ctx = _ctx(1, 4, [r4], [], {"r0": (10_000.0, 500.0)})
    c4 = Cluster(nodes=ctx.cluster.nodes, jobs=ctx.cluster.jobs, taken_s=NOW, pending_count=0,
                 nodes_version=1, nodes_log={1: ("n0",)})
    t = Tracker()
    t.update(Context(cluster=c4, readings=ctx.readings, now_s=NOW, history=ctx.history), s, 4)
    assert t.running() == [(r4, 4)]
    r2 = _running("r0", {"n0": [0, 1]}, lo=1, hi=8, start=NOW - 10)
    ctx2 = _ctx(1, 4, [r2], [], {"r0": (10_000.0, 300.0)})
    c2 = Cluster(nodes=ctx2.cluster.nodes, jobs=ctx2.cluster.jobs, taken_s=NOW,
                 pending_count=0, nodes_version=2, nodes_log={1: ("n0",), 2: ("n0",)})
    t.update(Context(cluster=c2, readings=ctx2.readings, now_s=NOW, history=ctx2.history), s, 4)
    assert t.running() == [(r2, 2)]
    # a job that left every node is forgotten, with its expected ends
    c0 = Cluster(nodes=_ctx(1, 4, [], [], {}).cluster.nodes, jobs={}, taken_s=NOW,
                 pending_count=0, nodes_version=3, nodes_log={3: ("n0",)})
    t.update(Context(cluster=c0, now_s=NOW), s, 4)
    assert t.running() == [] and not t.ends_on("n0")
