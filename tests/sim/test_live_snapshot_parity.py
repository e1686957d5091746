"""Every policy decides on a live Slurm snapshot as on the simulator's view of the same moment.

The simulator hands a policy a ``Cluster`` with fields that the live snapshot leaves None
(``pending_count``, ``nodes_version``, ``nodes_log``, ``pending_jobs``, ``pending_tiered``,
``pending_pinned``;
``limit_use`` wherever the live path does not read sacct: at submission, and in a reconcile pass
of a policy without ``reads_limit_use``) and a ``Context`` with ``history_version`` and
``history_log``, which ``reconcile.py`` and ``wrapper/decide.py`` leave None. They are caches and
shortcuts: without them a policy may take longer, never decide otherwise. (Elastic's tier aging
once read a None ``pending_count`` as "nothing pending" and never ran on a real cluster.)

At every call of a short simulation the same moment is decided again with and without them, by
fresh policy objects (a policy keeps state between passes): reconcile's actions, then advise for
the first pending job's request, and advise for the request being submitted. Every field is
compared, ``why`` and ``predicted`` included: none is documented as depending on the caches.
A second test keeps one policy object on the live side for the whole run, so the state a policy
keeps between passes (elastic's tracker, EaCO's memo, tiresias's rows) is compared as well.

Submissions are one per second at most: on a tie in submission time a policy orders a live
snapshot's queue by job id (Slurm's ids rise with submission), the simulator by trace line, and
trace ids need not sort in line order.
"""

from __future__ import annotations

import random
from dataclasses import replace as trace_replace
from pathlib import Path

import pytest

from slurm_plugin.model import JobRequest
from slurm_plugin.physics.pollux_batch import measured_batch_range
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.registry import builtin_policy_names
from slurm_plugin.record import replace
from slurm_plugin.sim.carbon import load_carbon
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.elastic_share import make_elastic
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.trace import builtin_trace, read_trace

PHILLY_JOBS = 48
PHILLY_SPEEDUP = 200.0      # a queue builds within a few simulated hours
POLLUX_JOBS = 30

# every registered policy with its defaults; elastic also with its queue tiers (aged)
CASES = [(name, {}) for name in builtin_policy_names()] + [
    ("elastic", {"order_queue": True, "tier_age_s": 900.0})]
CASE_IDS = [name + ("@tiers" if settings else "") for name, settings in CASES]

# The quiet rule of ``elastic`` and ``ones``: a pass that decided nothing is skipped while the
# nodes and the pending count (for ``ones`` the history too) are unchanged, ignoring the progress
# made meanwhile by design (docs/ones.md, "Quiet passes": "the rule ignores that (as
# elastic's)"; docs/elastic.md, "Cost of a pass"). Live, with no nodes version, every pass runs:
# the kept-state test clears their mark on the simulator's side. (tiresias's quiet rule is exact:
# kept.)
QUIET_MARK = "_quiet"
QUIET_IGNORES_PROGRESS = ("elastic", "ones")


def _philly_jobs() -> list:
    """The first jobs of the built-in Philly trace, ``PHILLY_SPEEDUP`` x faster (submissions and
    runs), half of them elastic, at most one submission per second."""
    jobs = read_trace(builtin_trace(), "philly", limit_jobs=PHILLY_JOBS)
    t0_s = jobs[0].submit_s
    out, seen_s = [], set()
    for j in jobs:
        submit_s = t0_s + (j.submit_s - t0_s) // PHILLY_SPEEDUP
        if submit_s not in seen_s:
            seen_s.add(submit_s)
            out.append(trace_replace(j, submit_s=submit_s,
                                     duration_s=max(60.0, j.duration_s / PHILLY_SPEEDUP)))
    return make_elastic(out, 0.5, seed=3)


def _pollux_jobs(tmp_path: Path, seed: int) -> list:
    """Pollux rows (elastic jobs with batch sizes ``ones`` may change), one per second at most."""
    rng = random.Random(seed)
    rows = ["name,time,application,num_replicas,batch_size"]
    t_s = 0
    for i in range(POLLUX_JOBS):
        t_s += 1 + int(rng.expovariate(1 / 150))
        app = rng.choice(["bert", "cifar10", "deepspeech2", "ncf"])
        gpus = rng.choice([1, 2, 4, 8])
        lo, hi = measured_batch_range(app)
        rows.append(f"j{i},{t_s},{app},{gpus},{max(gpus, int(lo * (hi / lo) ** rng.random()))}")
    path = tmp_path / "pollux.csv"
    path.write_text("\n".join(rows) + "\n")
    return read_trace(path, "pollux")


SCENARIOS = {
    # nodes x GPUs with shards (the packing policies share), reconcile every 5 minutes
    "philly": (lambda tmp_path: _philly_jobs(),
               ClusterSpec(nodes=4, gpus_per_node=4, shards_per_gpu=4,
                           reconcile_interval_s=300.0)),
    # fewer GPUs than the jobs ask: a queue, resizes, batch-size changes, resized jobs queued
    # again in a tier their new size alone would not give
    "pollux": (lambda tmp_path: _pollux_jobs(tmp_path, seed=9),
               ClusterSpec(nodes=2, gpus_per_node=4, reconcile_interval_s=60.0)),
    "pollux-8gpu": (lambda tmp_path: _pollux_jobs(tmp_path, seed=10),
                    ClusterSpec(nodes=2, gpus_per_node=8, reconcile_interval_s=60.0)),
}


def _live(ctx, keep_limit_use: bool):
    """``ctx`` as the live path builds it: no simulator caches."""
    c = ctx.cluster
    cluster = replace(c, pending_count=None, nodes_version=None, nodes_log=None,
                      pending_jobs=None, pending_tiered=None, pending_pinned=None,
                      limit_use=c.limit_use if keep_limit_use else None)
    return replace(ctx, cluster=cluster, history_version=None, history_log=None)


def _request_of(job) -> JobRequest:
    """The request a pending job was submitted with, as far as its view tells."""
    return JobRequest(name=job.name, user=job.user, account=job.account,
                      partition=job.partition, gpus=job.gpus, num_nodes=job.num_nodes,
                      time_limit_s=job.time_limit_s, deadline_s=job.deadline_s,
                      slack_s=job.slack_s, app=job.app, min_gpus=job.min_gpus,
                      max_gpus=job.max_gpus, min_batch_size=job.min_batch_size,
                      max_batch_size=job.max_batch_size, submit_s=job.submit_s,
                      job_id=job.job_id)


def _first_pending(cluster):
    pending = [j for j in cluster.jobs.values() if j.pending]
    return min(pending, key=lambda j: (j.submit_s, j.job_id)) if pending else None


def _outcome(call, *args):
    """What a call returns, or the error it raises (the simulator would hide it: fail-open)."""
    try:
        return call(*args)
    except Exception as exc:        # compared like an answer
        return ("raised", type(exc).__name__, str(exc))


class _Twin:
    """Drives the simulation with one policy object and decides every call again, with and
    without the caches, keeping what differs (asserted after the run: the simulator swallows
    what a policy raises)."""

    def __init__(self, name: str, kept: bool) -> None:
        self.name = name
        self.driver = get_policy(name)
        self.slurm_settings = getattr(self.driver, "slurm_settings", {})
        self.reads_limit_use = getattr(self.driver, "reads_limit_use", False)
        self.kept = get_policy(name) if kept else None    # the live side, kept between calls
        self.calls = 0
        self.queued_passes = 0      # reconcile passes with a job pending
        self.differ: list[tuple] = []

    def _check(self, what: str, now_s: float, sim, live) -> None:
        self.calls += 1
        if sim != live:
            self.differ.append((what, now_s, sim, live))

    def advise(self, request, ctx):
        live = _live(ctx, keep_limit_use=False)     # wattbatch reads no sacct at submission
        if self.kept is None:
            self._check("advise", ctx.now_s, _outcome(get_policy(self.name).advise, request, ctx),
                        _outcome(get_policy(self.name).advise, request, live))
            return self.driver.advise(request, ctx)
        got = self.driver.advise(request, ctx)
        self._check("advise", ctx.now_s, got, _outcome(self.kept.advise, request, live))
        return got

    def reconcile(self, ctx):
        self.queued_passes += _first_pending(ctx.cluster) is not None
        live = _live(ctx, keep_limit_use=self.reads_limit_use)
        if self.kept is None:
            self._fresh_pass(ctx, live)
            return self.driver.reconcile(ctx)
        if self.name in QUIET_IGNORES_PROGRESS:
            setattr(self.driver, QUIET_MARK, None)
        got = self.driver.reconcile(ctx)
        self._check("reconcile", ctx.now_s, got, _outcome(self.kept.reconcile, live))
        return got

    def _fresh_pass(self, ctx, live) -> None:
        """A reconcile pass by fresh objects on each side, then advice for the head of the
        queue's request by the same objects (what the pass learnt included)."""
        sim_side, live_side = get_policy(self.name), get_policy(self.name)
        self._check("reconcile", ctx.now_s, _outcome(sim_side.reconcile, ctx),
                    _outcome(live_side.reconcile, live))
        job = _first_pending(ctx.cluster)
        if job is not None:
            req = _request_of(job)
            self._check("advise queued", ctx.now_s, _outcome(sim_side.advise, req, ctx),
                        _outcome(live_side.advise, req, live))


def _run(tmp_path: Path, scenario: str, name: str, settings: dict, kept: bool) -> _Twin:
    make_jobs, spec = SCENARIOS[scenario]
    jobs = make_jobs(tmp_path)
    twin = _Twin(name, kept)
    Simulator(jobs, spec, twin, seed=1, settings=settings,
              carbon=load_carbon(None, "GB", jobs[0].submit_s)).run()
    return twin


def _report(twin: _Twin) -> str:
    what, now_s, sim, live = twin.differ[0]
    return (f"{len(twin.differ)} of {twin.calls} calls differ; first, {what} at {now_s}:\n"
            f"  simulator: {sim}\n  live:      {live}")


@pytest.mark.parametrize("kept", [False, True], ids=["fresh", "kept"])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("name,settings", CASES, ids=CASE_IDS)
def test_policies_decide_the_same_without_the_simulators_caches(tmp_path, scenario, name,
                                                                settings, kept):
    """Fresh policy objects at every call, and one policy kept across the whole run."""
    twin = _run(tmp_path, scenario, name, settings, kept=kept)
    assert twin.calls > 50 and twin.queued_passes > 10
    assert not twin.differ, _report(twin)
