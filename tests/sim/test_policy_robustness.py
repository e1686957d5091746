"""Every registered policy on random traces that use every optional column of the canonical
format (GPU ranges, time limits shorter and far longer than the run, slacks, deadlines, bursts
of simultaneous submissions, jobs wider than a node or than the cluster's free GPUs): a policy
that raises is hidden by the simulator's fail-open (the job goes in unchanged, counted in
``policy_fallbacks``), so this asserts there is none, and that every job ends. The same on
random Pollux-format workloads (profiled applications with batch sizes, simultaneous
submissions), each run under a timer: a policy that keeps a run from ending fails it."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from slurm_plugin.physics import class_names
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.registry import builtin_policy_names
from slurm_plugin.sim.carbon import load_carbon
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.trace import read_trace

COLUMNS = "job_id,submit_s,duration_s,num_gpus,user,app,deadline_s,min_gpus,max_gpus," \
          "time_limit_s,slack_s"


def awkward_trace(path: Path, rng: random.Random, jobs: int, gpn: int, nodes: int) -> Path:
    apps = class_names()
    rows = [COLUMNS]
    t = 1_700_000_000.0
    burst = rng.random() < 0.3
    for i in range(jobs):
        if not (burst and rng.random() < 0.5):
            t += rng.expovariate(1 / rng.choice([10, 120, 900]))
        gpus = max(1, min(rng.choice([1, 1, 2, 3, 4, 5, 7, 12, gpn, 2 * gpn, gpn * nodes]),
                          gpn * nodes))
        run_s = rng.choice([1, 30, 600, 3600, 4 * 3600, 30 * 3600])
        lo = hi = ""
        if rng.random() < 0.4:
            lo, hi = rng.randint(1, gpus), rng.randint(gpus, gpn * nodes)
        limit = "" if rng.random() < 0.3 else int(run_s * rng.choice([0.5, 1, 1.01, 3, 10])) + 1
        slack = "" if rng.random() < 0.5 else rng.choice([0, 3600, 6 * 3600])
        deadline = "" if rng.random() < 0.8 else f"{t + run_s * rng.choice([0.5, 2, 5]):.0f}"
        rows.append(f"j{i},{t:.0f},{run_s},{gpus},u{rng.randint(0, 3)},"
                    f"{rng.choice(apps + ('',))},{deadline},{lo},{hi},{limit},{slack}")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("policy", builtin_policy_names())
@pytest.mark.parametrize("case", range(3))
def test_no_policy_fails_open_on_awkward_traces(tmp_path, policy, case):
    rng = random.Random(f"{policy}:{case}")
    spec = ClusterSpec(nodes=rng.randint(1, 5), gpus_per_node=rng.choice([1, 2, 4, 8]),
                       shards_per_gpu=rng.choice([0, 2, 4, 8]),
                       backfill_depth=rng.choice([1, 5, 100]),
                       reconcile_interval_s=rng.choice([30.0, 300.0]),
                       suspend_time_s=rng.choice([None, 0.0, 600.0]))
    jobs = read_trace(awkward_trace(tmp_path / "t.csv", rng, rng.randint(1, 50),
                                    spec.gpus_per_node, spec.nodes), "canonical")
    raised: list[BaseException] = []
    pol = get_policy(policy)

    def watched(call):
        def inner(*args):
            try:
                return call(*args)
            except Exception as e:      # the simulator swallows it: keep it for the assert
                raised.append(e)
                raise
        return inner

    pol.advise, pol.reconcile = watched(pol.advise), watched(pol.reconcile)
    sim = Simulator(jobs, spec, pol, seed=case,
                    carbon=load_carbon(None, "GB", jobs[0].submit_s))
    r = sim.run()
    assert not raised, raised[0]
    assert r["policy_fallbacks"] == 0, "a placement the simulator found invalid"
    assert r["jobs_finished"] == len(jobs) and r["unfinished_jobs"] == 0, r


class _Hung(BaseException):
    """Raised by the alarm: out of the simulator's fail-open, so the test fails, not hangs."""


def awkward_pollux(path: Path, rng: random.Random, jobs: int, gpn: int, nodes: int) -> Path:
    """A Pollux-format workload (profiled applications with batch sizes: the batch-size paths
    of ``ones`` and the simulator's statistical efficiency) with bursts of jobs submitted at
    the same second, whose names sort otherwise than their lines."""
    from slurm_plugin.physics.pollux import pollux_apps
    from slurm_plugin.physics.pollux_batch import batch_bounds

    rows = ["name,time,application,num_replicas,batch_size"]
    t = 0
    for i in range(jobs):
        t += rng.choice([0, 0, 5, 60, 600])
        app = rng.choice(pollux_apps())
        n = min(gpn * nodes, rng.choice([1, 2, 3, 4, 6, 8, 12, 16, 32, 64]))
        lo, hi = batch_bounds(app, min(n, 64)) or batch_bounds(app, 1)
        rows.append(f"{app}-{i},{t},{app},{n},{rng.choice([lo, hi, (lo + hi) // 2])}")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("policy", builtin_policy_names())
@pytest.mark.parametrize("case", range(3))
def test_no_policy_fails_open_or_hangs_on_awkward_pollux_workloads(tmp_path, policy, case):
    import signal

    rng = random.Random(f"pollux:{policy}:{case}")
    # case 0: one small node, and a restart longer than a reconcile pass: a policy that stops
    # a job for one it cannot tell apart restarts it pass after pass, and nothing progresses
    spec = ClusterSpec(nodes=1 if case == 0 else rng.randint(1, 4),
                       gpus_per_node=4 if case == 0 else rng.choice([1, 2, 4]),
                       shards_per_gpu=rng.choice([0, 4]),
                       reconcile_interval_s=30.0 if case == 0 else rng.choice([60.0, 300.0]),
                       restart_cost_s=90.0 if case == 0 else rng.choice([0.0, 90.0]))
    n_jobs = rng.randint(8 if case == 0 else 1, 30)
    jobs = read_trace(awkward_pollux(tmp_path / "w.csv", rng, n_jobs, spec.gpus_per_node,
                                     spec.nodes), "pollux")

    def hung(*_):
        raise _Hung(f"{policy}: the simulation of {len(jobs)} jobs on {spec} ran 120 s")
    before = signal.signal(signal.SIGALRM, hung)
    signal.alarm(120)
    try:
        r = Simulator(jobs, spec, get_policy(policy), seed=case,
                      carbon=load_carbon(None, "GB", jobs[0].submit_s)).run()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
    assert r["policy_fallbacks"] == 0
    assert r["jobs_finished"] == len(jobs) and r["unfinished_jobs"] == 0, r
