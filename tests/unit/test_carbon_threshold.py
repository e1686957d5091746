"""The ``carbon-threshold`` baseline and the simulator's deferrable/slack rule."""

from __future__ import annotations

import random

from slurm_plugin.model import Cluster, JobRequest, Readings
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.base import Context
from slurm_plugin.policy.carbon_threshold import threshold_gco2_per_kwh, threshold_start_s
from slurm_plugin.sim.carbon import WeekAlignedCarbon
from slurm_plugin.sim.slack import draw_slack_s
from slurm_plugin.sim.trace import read_trace

H = 3600.0


def ctx(now_s, ci, forecast):
    return Context(cluster=Cluster(nodes=()), now_s=now_s,
                   readings=Readings(carbon_g_per_kwh=ci, carbon_forecast=tuple(forecast)))


def test_starts_at_the_first_hour_below_the_windows_30th_percentile():
    forecast = [(H, 300.0), (2 * H, 100.0), (3 * H, 50.0), (4 * H, 400.0), (9 * H, 10.0)]
    # window [0, 4h]: 200, 300, 100, 50, 400 -> p30 = 100; first strictly below: 50 at 3 h
    assert threshold_start_s(0.0, 200.0, forecast, 4 * H) == 3 * H
    assert threshold_gco2_per_kwh([200, 300, 100, 50, 400]) == 100


def test_flat_window_waits_until_the_end_of_its_slack():
    assert threshold_start_s(0.0, 100.0, [(H, 100.0), (2 * H, 100.0)], 2 * H) == 2 * H
    p = get_policy("carbon-threshold")
    # clean hours tied at the percentile: none is below it, and the job is told so
    tied = p.advise(JobRequest(gpus=1, slack_s=4 * H),
                    ctx(0.0, 400.0, [(H, 50.0), (2 * H, 50.0), (3 * H, 50.0), (4 * H, 300.0)]))
    assert tied.begin_s == 4 * H and "to the end of its slack: no hour" in tied.why[0]
    below = p.advise(JobRequest(gpus=1, slack_s=4 * H),
                     ctx(0.0, 200.0, [(H, 300.0), (2 * H, 100.0), (3 * H, 50.0), (4 * H, 400.0)]))
    assert below.begin_s == 3 * H and "to the first hour below" in below.why[0]


def test_now_below_the_threshold_starts_now_and_the_begin_stays_in_the_slack():
    p = get_policy("carbon-threshold")
    low = p.advise(JobRequest(gpus=1, slack_s=6 * H), ctx(0.0, 10.0, [(H * k, 100.0 + k)
                                                                     for k in range(1, 48)]))
    assert low.begin_s is None
    rng = random.Random(3)
    for _ in range(200):
        slack = rng.choice([H, 6 * H, 24 * H])
        fc = [(H * k, rng.uniform(0, 500)) for k in range(1, 49)]
        pl = p.advise(JobRequest(gpus=2, slack_s=slack), ctx(0.0, rng.uniform(0, 500), fc))
        assert pl.gpus == 2
        assert pl.begin_s is None or 0.0 < pl.begin_s <= slack


def test_jobs_without_slack_or_carbon_data_go_in_unchanged():
    p = get_policy("carbon-threshold")
    fc = [(H, 1.0)]
    assert not p.advise(JobRequest(gpus=1), ctx(0.0, 500.0, fc)).changes_anything
    assert not p.advise(JobRequest(gpus=1, slack_s=H, opt_out=frozenset({"defer"})),
                        ctx(0.0, 500.0, fc)).changes_anything
    missing = p.advise(JobRequest(gpus=1, slack_s=H), ctx(0.0, None, ()))
    assert not missing.changes_anything and "carbon data missing" in missing.why[0]
    assert "no carbon intensity" in missing.why[0]
    # an intensity now but nothing stored after now (a site that imported only the past)
    stale = p.advise(JobRequest(gpus=1, slack_s=H), ctx(0.0, 93.5, ()))
    assert not stale.changes_anything and "no carbon forecast" in stale.why[0]


def test_slack_rule_is_seeded_and_keeps_its_share():
    drawn = [draw_slack_s(str(i), 0, 0.3, 7200.0) for i in range(4000)]
    assert drawn == [draw_slack_s(str(i), 0, 0.3, 7200.0) for i in range(4000)]
    assert set(drawn) == {None, 7200.0}
    assert 0.27 < sum(d is not None for d in drawn) / len(drawn) < 0.33
    assert draw_slack_s("1", 0, 0.0) is None


def test_a_trace_slack_column_wins_and_an_empty_value_is_not_deferrable(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("job_id,submit_s,duration_s,num_gpus,slack_s\na,0,60,1,3600\nb,1,60,1,\n")
    a, b = read_trace(f, "canonical")
    assert (a.slack_s, a.has_slack, b.slack_s, b.has_slack) == (3600.0, True, None, True)


def test_simulated_carbon_is_a_provider_of_its_own_history():
    c = WeekAlignedCarbon("X", [float(h) for h in range(168)], "mem", 0.0)
    assert c.intensity_at(2.5 * H) == 2.0
    assert c.forecast(0.5 * H, 3 * H) == ((H, 1.0), (2 * H, 2.0), (3 * H, 3.0))


def test_idle_nodes_power_down_as_under_greenflow_and_slurm_powersave():
    """The baselines greenflow is compared with run on the same power-saving cluster, so a
    carbon ratio measures when jobs run, not whether idle nodes burn."""
    from slurm_plugin.sim.cluster import ClusterSpec
    from slurm_plugin.sim.engine import Simulator
    from slurm_plugin.sim.trace import TraceJob
    saving = get_policy("slurm-powersave").slurm_settings
    assert saving["SuspendTime"] > 0
    for name in ("carbon-threshold", "greenflow"):
        assert get_policy(name).slurm_settings == saving
    jobs = [TraceJob("1", 0.0, 600.0, 1, 1), TraceJob("2", 30 * H, 600.0, 1, 2)]
    r = Simulator(jobs, ClusterSpec(nodes=4, gpus_per_node=2), get_policy("carbon-threshold"),
                  seed=0).run()
    assert r["node_suspends"] >= 4 and r["avg_nodes_on"] < 1
