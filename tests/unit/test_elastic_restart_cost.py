"""The restart cost ``elastic`` uses for a job: measured from the job's own restarts (the time
from its stop to its progress back at its new rate), the site's until one is measured."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from slurm_plugin.model import Progress
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.elastic.track import MAX_RESTART_S, _keys, restart_cost, stop_marks
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.trace import read_trace

KEYS = _keys("7")


def _measure(hist: dict, run: float = 1050.0, step: float = 560.0, taken_s: float = 1200.0,
             rate: float = 1.0) -> tuple[float, dict]:
    updates: dict[str, float] = {}
    rc = restart_cost(run, step, taken_s, rate, hist.get, KEYS, 90.0, updates)
    return rc, updates


def test_stop_marks_extrapolate_the_step_to_the_stop():
    hist = {KEYS[0]: 100.0, KEYS[1]: 0.0, KEYS[2]: 100.0}      # run 100: step 0 at 100 s
    p = Progress("7", step=400, samples_per_s=64.0, taken_s=500.0, started_s=100.0)
    marks = stop_marks("7", 600.0, {"7": p}, hist)      # 1 step/s: step 500 at 600 s
    assert marks == {KEYS[7]: 600.0, KEYS[8]: pytest.approx(500.0)}
    # no rate of this run measured yet (an earlier run's keys): nothing to mark
    assert stop_marks("7", 600.0, {"7": p}, {**hist, KEYS[0]: 50.0}) == {}
    assert stop_marks("7", 600.0, {}, hist) == {}


def test_the_cost_is_the_time_lost_since_the_stop():
    hist = {KEYS[7]: 1000.0, KEYS[8]: 500.0}    # stopped at 1000 s on step 500
    rc, updates = _measure(hist)      # 200 s later at step 560, 1 step/s: 140 s lost
    assert rc == pytest.approx(140.0)
    assert updates == {KEYS[9]: pytest.approx(140.0), KEYS[10]: 1050.0}
    # measured once per run; the next run's measure is averaged with it
    hist.update(updates)
    assert _measure(hist, taken_s=1300.0, step=660.0) == (pytest.approx(140.0), {})
    hist.update({KEYS[7]: 2000.0, KEYS[8]: 1000.0})
    rc, updates = _measure(hist, run=2100.0, step=1000.0, taken_s=2300.0)
    assert rc == pytest.approx((140.0 + 300.0) / 2)


@pytest.mark.parametrize("hist", [
    {},                                         # never stopped
    {"elastic:stop_t:7": 1100.0, "elastic:stop_step:7": 500.0},    # stopped after this run began
])
def test_the_sites_cost_until_one_is_measured(hist):
    assert _measure(hist) == (90.0, {})


def test_a_measure_is_bounded():
    hist = {KEYS[7]: 1000.0, KEYS[8]: 500.0}
    assert _measure(hist, step=900.0)[0] == 0.0                     # ahead of its rate
    assert _measure(hist, taken_s=1e6)[0] == MAX_RESTART_S          # stuck for days
    assert _measure(hist, rate=0.0) == (90.0, {})


def test_the_simulated_restart_cost_is_measured(tmp_path: Path):
    """The simulator's restarts cost 400 s while the site still says 90 s: every job the
    policy resized measures about 400 s."""
    rows = ["name,time,application,num_replicas,batch_size"]
    apps = [("cifar10", 2048), ("imagenet", 3200), ("ncf", 256), ("yolov3", 64)]
    for i in range(16):
        app, batch = apps[i % len(apps)]
        rows.append(f"j{i},{i * 400},{app},{1 + i % 4},{batch}")
    path = tmp_path / "w.csv"
    path.write_text("\n".join(rows) + "\n")
    spec = ClusterSpec(nodes=4, gpus_per_node=4, restart_cost_s=400.0)
    sim = Simulator(read_trace(path, "pollux"), spec, get_policy("elastic"))
    sim.run()
    got = [v for k, v in sim.history.items() if k.startswith("elastic:rc:")]
    assert got, "no resized job measured its restart"
    assert statistics.median(got) == pytest.approx(400.0, rel=0.1)


@pytest.mark.parametrize("measure", [True, False])
def test_the_model_uses_the_measure_unless_the_site_says_not(measure):
    from slurm_plugin.model import GpuUse, Job
    from slurm_plugin.policy.elastic.settings import parse_settings
    from slurm_plugin.policy.elastic.track import _model

    job = Job(job_id="7", state="RUNNING", gpus=2, num_nodes=1, nodes=("n0",),
              uses=(GpuUse("n0", 0), GpuUse("n0", 1)), start_s=1040.0, min_gpus=1, max_gpus=4)
    p = Progress("7", step=560, samples_per_s=64.0, total_steps=10_000, taken_s=1200.0,
                 started_s=1050.0)
    hist = {KEYS[0]: 1050.0, KEYS[1]: 500.0, KEYS[2]: 1140.0,      # this run: 1 step/s
            KEYS[3]: 2.0, KEYS[4]: 64.0, KEYS[7]: 1000.0, KEYS[8]: 500.0}
    s = parse_settings({"measure_restart_cost": measure})
    updates: dict[str, float] = {}
    m = _model(job, 2, {"n0": 2}, (1, 4), {"7": p}, hist, 1200.0, s, 64, updates)
    assert updates[KEYS[9]] == pytest.approx(140.0)         # recorded either way
    assert m.restart_s == (pytest.approx(140.0) if measure else 90.0)


def test_measure_restart_cost_must_be_a_boolean():
    from slurm_plugin.errors import ConfigError
    from slurm_plugin.policy.elastic.settings import parse_settings

    with pytest.raises(ConfigError, match="measure_restart_cost"):
        parse_settings({"measure_restart_cost": "yes"})
