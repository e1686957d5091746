"""EaCO's caches kept between calls (candidate index, GPU summaries, observe memo) change no
decision: a policy kept over a sequence of snapshots, where each step replaces a few node
views and keeps the others, decides as a fresh policy on every snapshot."""

from __future__ import annotations

import random
from types import MappingProxyType

import test_eaco_shapes as shapes

from slurm_plugin.model import Cluster, Gpu, GpuReading, Node, Progress, Readings
from slurm_plugin.policy.base import Context
from slurm_plugin.policy.eaco.decide import Eaco
from slurm_plugin.policy.eaco.index import KindIndex, NodeMemo
from slurm_plugin.record import replace

STEPS = 60


def _mutate(rng: random.Random, cluster: Cluster, power: dict[str, float],
            serial: list[int]) -> Cluster:
    """1-2 nodes get a new view: a GPU freed, given an exclusive job, or given (or relieved of)
    shard jobs; sometimes the node's state or power changes. Other nodes keep their view."""
    nodes = list(cluster.nodes)
    jobs = dict(cluster.jobs)
    for _ in range(rng.randint(1, 2)):
        pos = rng.randrange(len(nodes))
        node = nodes[pos]
        gpus = list(node.gpus)
        i = rng.randrange(len(gpus))
        g = gpus[i]
        what = rng.random()
        excl, shard = None, ()
        if what < 0.3:
            pass                                        # freed
        elif what < 0.45:
            serial[0] += 1
            excl = f"mx{serial[0]}"
            jobs[excl] = shapes.running(excl, rng.choice(shapes.APPS), [(node.name, i)],
                                        shards=0)
        elif g.shard_jobs and what < 0.65:
            shard = g.shard_jobs[1:]                    # one job leaves
        elif g.shards_total:
            shard = g.shard_jobs if g.exclusive_job is None else ()
            for _ in range(rng.choice([1, 1, 2])):
                serial[0] += 1
                jid = f"ms{serial[0]}"
                jobs[jid] = shapes.running(jid, shapes.pick_app(rng), [(node.name, i)],
                                           shards=1, submit_s=shapes.NOW - rng.uniform(0, 9000),
                                           time_limit_s=rng.uniform(600, 20000))
                shard += (jid,)
        used = min(g.shards_total, len(shard) * max(1, g.shards_total // 4))
        gpus[i] = Gpu(node=node.name, index=i, gres_type=g.gres_type, memory_mib=g.memory_mib,
                      shards_total=g.shards_total, shards_used=used, exclusive_job=excl,
                      shard_jobs=shard)
        state = rng.choice(["idle", "mixed", "mixed", "down"]) if rng.random() < 0.2 \
            else node.state
        nodes[pos] = Node(name=node.name, state=state, gpus=tuple(gpus))
        if rng.random() < 0.3:
            power[node.name] = rng.choice([0.0, 41.0])
    return Cluster(nodes=tuple(nodes), jobs=MappingProxyType(jobs), taken_s=shapes.NOW)


def _readings(cluster: Cluster, power: dict[str, float]) -> Readings:
    gpus = {(n.name, g.index): GpuReading(n.name, g.index, power.get(n.name, 41.0), 0.0, 0.0,
                                          0.0, 250.0, shapes.NOW)
            for n in cluster.nodes for g in n.gpus}
    return Readings(gpus=MappingProxyType(gpus))


def test_kept_policy_advises_as_a_fresh_one_over_changing_snapshots() -> None:
    """The candidate index (per kind of request) and the per-view GPU summaries follow every
    node view that changes; a stale entry would pick another GPU set or count other
    candidates in ``why``."""
    compared = alone = shared = 0
    for seed in range(40):
        rng = random.Random(seed)
        start = shapes.random_cluster(rng)
        running = {k: v for k, v in start.jobs.items() if v.running}     # no long queue
        cluster = Cluster(nodes=start.nodes, jobs=MappingProxyType(running), taken_s=shapes.NOW)
        power = {n.name: rng.choice([0.0, 41.0]) for n in cluster.nodes}
        settings = MappingProxyType(shapes.random_settings(rng) if seed % 4 else {})
        kept = Eaco()
        serial = [0]
        for step in range(STEPS):
            cluster = _mutate(rng, cluster, power, serial)
            ctx = Context(cluster=cluster, readings=_readings(cluster, power),
                          now_s=shapes.NOW + step, settings=settings,
                          history=MappingProxyType({}))
            for _ in range(2):
                request = shapes.random_request(rng)
                pl = kept.advise(request, ctx)
                assert pl == Eaco().advise(request, ctx), (seed, step)
                compared += 1
                alone += "alone" in pl.why[0]
                shared += "share GPU" in pl.why[0]
    assert compared and alone and shared          # both kinds of candidate were taken


def test_kind_index_keeps_the_first_empty_node_of_each_boot_delay() -> None:
    """``KindIndex`` against a scan from scratch after every change of node views."""
    rng = random.Random(7)
    names = [f"n{i}" for i in range(12)]
    kinds: dict[tuple, int] = {}
    index = KindIndex()
    delay = {n: rng.choice([0.0, 300.0]) for n in names}

    def view(name: str, busy: bool) -> Node:
        excl = "x" if busy else None
        gpus = (Gpu(name, 0, shards_total=4, exclusive_job=excl), Gpu(name, 1, shards_total=4))
        return Node(name, "mixed" if busy else "idle", gpus)

    nodes = [view(n, rng.random() < 0.5) for n in names]

    def build(pos: int, node: Node):
        m = NodeMemo(node, kinds)
        busy = sum(g.exclusive_job is not None for g in node.gpus)
        m.idle = (not busy, delay[node.name] if not busy else 5.0)
        return m, (busy, [], [], 0.0, 0.0), True

    for _ in range(200):
        for _ in range(rng.randint(0, 3)):
            pos = rng.randrange(len(nodes))
            nodes[pos] = view(names[pos], rng.random() < 0.5)
            delay[names[pos]] = rng.choice([0.0, 300.0])
        index.refresh(nodes, lambda k: 2, build)
        busy = {pos for pos, n in enumerate(nodes) if n.gpus[0].exclusive_job}
        assert set(index.busy) == busy
        firsts = {}
        for pos, n in enumerate(nodes):
            if pos not in busy:
                firsts.setdefault(delay[n.name], pos)
        assert {(index.idle[pos][0].idle[1], pos) for pos, _, _ in index.firsts()} == \
            {(d, pos) for d, pos in firsts.items()}


def _progress(job_id: str, step: int, at_s: float) -> Progress:
    return Progress(job_id=job_id, step=step, samples_per_s=3.2, epoch=step // 10,
                    steps_per_epoch=10, total_steps=100, taken_s=at_s, started_s=shapes.NOW - 50)


def test_kept_reconcile_judges_as_a_fresh_one_while_groups_wait_and_progress() -> None:
    """The observe memo's waiting and judged groups: a kept policy decides as fresh passes
    while a group waits for its jobs' first steps and their epochs, is judged, and is judged
    again. Each job steps at its own steady rate once it starts (as in the simulator: a
    group's observed slowdown holds while its members do)."""
    for seed in range(20):
        rng = random.Random(seed)
        apps = [shapes.pick_app(rng) for _ in range(6)]
        jobs, gpus = {}, []
        for i in range(3):
            ids = (f"{i}a", f"{i}b")
            for jid, app in zip(ids, apps[2 * i:2 * i + 2]):
                jobs[jid] = shapes.running(jid, app, [("a", i)], shards=1,
                                           submit_s=shapes.NOW - 50,
                                           time_limit_s=rng.choice([600.0, 1200.0, 3000.0]))
            gpus.append(Gpu("a", i, memory_mib=32510, shards_total=4, shards_used=2,
                            shard_jobs=ids))
        gpus.append(Gpu("a", 3, memory_mib=32510, shards_total=4))
        cluster = Cluster(nodes=(Node("a", "mixed", tuple(gpus)),),
                          jobs=MappingProxyType(jobs), taken_s=shapes.NOW)
        history: dict[str, float] = {}
        kept = Eaco()
        starts = {jid: rng.choice([0, 0, 2, 5]) for jid in jobs}     # the pass it steps from
        rates = {jid: rng.choice([1, 2, 3]) for jid in jobs}         # steps per pass
        version = 0
        for k in range(30):
            now = shapes.NOW + 60 * k
            progress = {jid: _progress(jid, rates[jid] * max(0, k - starts[jid]), now)
                        for jid in jobs}
            ctx = Context(cluster=cluster, readings=Readings(progress=MappingProxyType(progress)),
                          now_s=now, settings=MappingProxyType({}),
                          history=MappingProxyType(dict(history)), history_version=version,
                          history_log=MappingProxyType({}))
            got = kept.reconcile(ctx)
            assert got == Eaco().reconcile(ctx), (seed, k)
            for a in got:
                if a.kind == "observe":
                    history.update(a.predicted)
            if any(a.kind == "observe" for a in got):
                version += 1


def test_kept_reconcile_moves_a_judged_late_job_once_it_slows_down() -> None:
    """A judged group that is late but under the limit is judged again on progress alone;
    once a job slows past the limit the kept policy moves it, as a fresh one does."""
    jobs = {j: replace(shapes.running(j, a, [("a", 0)], shards=1, submit_s=shapes.NOW - 50,
                                      time_limit_s=1000.0), deadline_s=shapes.NOW + 500)
            for j, a in (("1", "alexnet"), ("2", "resnet18"))}
    gpus = (Gpu("a", 0, memory_mib=32510, shards_total=4, shards_used=2, shard_jobs=("1", "2")),
            Gpu("a", 1, memory_mib=32510, shards_total=4))
    cluster = Cluster(nodes=(Node("a", "mixed", gpus),), jobs=MappingProxyType(jobs),
                      taken_s=shapes.NOW)
    kept, history, version = Eaco(), {}, 0
    now, step = shapes.NOW, 5
    for k, slowdown in enumerate((1.0, 1.05, 1.05, 1.05, 1.5)):
        if k:
            now, step = now + 10 * 10 * slowdown, step + 10     # 10 steps of 10 s alone
        progress = {j: _progress(j, step, now) for j in jobs}
        ctx = Context(cluster=cluster, readings=Readings(progress=MappingProxyType(progress)),
                      now_s=now, settings=MappingProxyType({}),
                      history=MappingProxyType(dict(history)), history_version=version,
                      history_log=MappingProxyType({}))
        got = kept.reconcile(ctx)
        assert got == Eaco().reconcile(ctx), k
        if any(a.kind == "observe" for a in got):
            for a in got:
                history.update(a.predicted)
            version += 1
    assert [a.kind for a in got] == ["move_exclusive"]


def _spec_order(index: KindIndex, k: int, now: float, run_s: float | None) -> list[tuple]:
    """The candidates' order as specified (docs/eaco.md, "Placement"): every candidate of the
    index sorted by (node-on time added, alone, utilisation, busiest first, position)."""
    from slurm_plugin.policy.eaco.decide import _extend_s
    order = []
    for pos, (m, part) in index.busy.items():
        busy, free, shared = part[0], part[1], part[2]
        extend = _extend_s(m.idle, now, run_s)
        if len(free) >= k:
            order.append((extend, True, 0.0, -busy, pos))
        if shared and len(shared) + len(free) >= k:
            order.append((extend, False, part[3], -busy, pos))
    for pos, m, _ in index.firsts():
        order.append((_extend_s(m.idle, now, run_s), True, 0.0, 0, pos))
    return sorted(order)


def test_candidates_come_in_the_specified_order() -> None:
    """The sets that add no node-on time are yielded from the index's ranking, the others
    sorted after them: together, the order of sorting every candidate at once. Node ends
    straddle the job's would-be end (and run time, or an end, unknown now and then)."""
    from slurm_plugin.policy.eaco.decide import _Shares, known_class
    from slurm_plugin.policy.eaco.settings import EacoSettings
    seen = later = 0
    for seed in range(60):
        rng = random.Random(seed)
        start = shapes.random_cluster(rng)
        running = {k: v for k, v in start.jobs.items() if v.running}
        cluster = Cluster(nodes=start.nodes, jobs=MappingProxyType(running), taken_s=shapes.NOW)
        power = {n.name: rng.choice([0.0, 41.0]) for n in cluster.nodes}
        eaco = Eaco()
        serial = [0]
        for step in range(20):
            cluster = _mutate(rng, cluster, power, serial)
            now = shapes.NOW + rng.uniform(-20000, 20000)
            ctx = Context(cluster=cluster, readings=_readings(cluster, power), now_s=now,
                          history=MappingProxyType({}))
            request = replace(shapes.random_request(rng),
                              time_limit_s=rng.choice([None, 0.0, 600.0, 9000.0, 30000.0]))
            cls = known_class(request.app)
            if cls is None:
                continue
            s = EacoSettings.from_mapping({})
            own_util = cls.util_at(request.gpus)
            need_mib = request.memory_per_gpu_mib or cls.memory_mib
            shares = _Shares(request.app, need_mib, s, ctx.history, None, eaco._weights)
            got = [(c.extend_s, c.alone, 0.0 if c.alone else c.util_pct, -c.busy, c.pos)
                   for c in eaco._options(request, ctx, s, shares, own_util)]
            index = next(i for i in eaco._index.values() if i.k == request.gpus
                         and i.changes.nodes is cluster.nodes)
            assert got == _spec_order(index, request.gpus, now, request.time_limit_s), seed
            seen += len(got)
            later += sum(1 for g in got if g[0] > 0)
    assert seen and later          # both kinds of set were ordered
