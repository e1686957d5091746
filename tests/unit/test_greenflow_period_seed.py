"""GreenFlow's first pass of a period it has no history of starts from what jobs measurably
spent in the period (``Readings.period_spent_g``, the ``job_energy`` points ``wattctl carbon
budget`` counts), not from 0; a history of the period wins, a measurement of another period
is ignored; the live reader fills it only where a greenflow budget is set."""

from __future__ import annotations

import pytest
from test_bad_input import Answers

from slurm_plugin import config, live
from slurm_plugin.errors import TelemetryError
from slurm_plugin.model import Cluster, Readings
from slurm_plugin.policy import get_policy
from slurm_plugin.policy.base import Context
from slurm_plugin.policy.greenflow.observe import (LAST_S, PERIOD_START_S, SPENT_G, WEIGHT,
                                                  account_spent_key, account_weight_key,
                                                  observe)
from slurm_plugin.policy.greenflow.settings import DAY_S, parse_settings
from slurm_plugin.report.carbon_budget import budget_report, period_spent_g

H = 3600.0
START_S = 20_000 * DAY_S                 # a day's budget period
NOW_S = START_S + 12 * H                 # half way through it: pro-rata share 50 kg of 100
DAY = parse_settings({"budget_kg_per_day": 100})


def reads(spent=None, ci=300.0, power_w=0.0):
    return Readings(carbon_g_per_kwh=ci, cluster_power_w=power_w, period_spent_g=spent)


def test_a_fresh_history_mid_period_starts_from_the_measured_spend():
    # 400 kg spent by noon of a 100 kg day (4x the budget): carbon is all that counts
    seen = observe(DAY, {}, reads((START_S, 400_000.0, {"physics": 400_000.0})), NOW_S, 0.0)
    assert seen[SPENT_G] == 400_000.0 and seen[PERIOD_START_S] == START_S
    assert seen[WEIGHT] == 1.0
    # and where the spend is low, JCT is all that counts
    low = observe(DAY, {}, reads((START_S, 1_000.0, {})), NOW_S, 0.0)
    assert low[SPENT_G] == 1_000.0 and low[WEIGHT] == 0.0


def test_the_policy_paces_on_the_measured_spend_at_its_first_pass():
    fc = tuple((NOW_S + H * h, 300.0) for h in range(1, 12))
    ctx = Context(cluster=Cluster(nodes=()), now_s=NOW_S, settings={"budget_kg_per_day": 100},
                  readings=Readings(carbon_g_per_kwh=300.0, carbon_forecast=fc,
                                    cluster_power_w=0.0,
                                    period_spent_g=(START_S, 400_000.0, {})))
    actions = get_policy("greenflow").reconcile(ctx)
    assert actions[0].kind == "observe" and actions[0].predicted[WEIGHT] == 1.0


def test_a_history_of_the_period_wins_over_the_measurement():
    hist = {LAST_S: NOW_S - H, PERIOD_START_S: START_S, SPENT_G: 20_000.0,
            account_spent_key("physics"): 2_000.0}
    s = parse_settings({"budget_kg_per_day": 100, "accounts": {"physics": 10}})
    seen = observe(s, hist, reads((START_S, 400_000.0, {"physics": 300_000.0}),
                                  power_w=1e6), NOW_S, 0.0)
    # an hour of 1 MW at 300 g/kWh added to what the history holds; the measurement unused
    assert seen[SPENT_G] == pytest.approx(20_000.0 + 300_000.0)
    assert seen[account_spent_key("physics")] == pytest.approx(2_000.0)


def test_a_measurement_of_another_period_is_ignored():
    yesterday = (START_S - DAY_S, 400_000.0, {"physics": 400_000.0})
    s = parse_settings({"budget_kg_per_day": 100, "accounts": {"physics": 10}})
    seen = observe(s, {}, reads(yesterday), NOW_S, 0.0)
    assert seen[SPENT_G] == 0.0 and seen[WEIGHT] == 0.0
    assert seen[account_spent_key("physics")] == 0.0
    assert seen[account_weight_key("physics")] == 0.0


def test_each_account_starts_from_its_measured_spend():
    s = parse_settings({"accounts": {"physics": 10, "bio": 10}})
    measured = (START_S, 25_000.0, {"physics": 20_000.0, "bio": 1_000.0, "": 4_000.0})
    seen = observe(s, {}, reads(measured), NOW_S, 0.0)
    assert seen[account_spent_key("physics")] == 20_000.0     # 4x its 5 kg pro-rata share
    assert seen[account_weight_key("physics")] == 1.0
    assert seen[account_spent_key("bio")] == 1_000.0
    assert seen[account_weight_key("bio")] == 0.0
    # an account in the history's period keeps its figure
    hist = {LAST_S: NOW_S - H, PERIOD_START_S: START_S, account_spent_key("physics"): 500.0}
    kept = observe(s, hist, reads(measured), NOW_S, 0.0)
    assert kept[account_spent_key("physics")] == 500.0
    assert kept[account_weight_key("physics")] == 0.0


def test_a_new_period_counts_the_hours_since_its_start_not_the_measurement():
    hist = {LAST_S: START_S - 0.5 * H, PERIOD_START_S: START_S - DAY_S, SPENT_G: 9e9}
    now_s = START_S + 0.5 * H
    seen = observe(DAY, hist, reads((START_S, 1_000.0, {}), power_w=1e6), now_s, 0.0)
    # half an hour of 1 MW at 300 g/kWh since the period began; yesterday's spend is gone, and
    # the measured 1,000 g (jobs that ended in that half hour) is not counted a second time
    assert seen[SPENT_G] == pytest.approx(150_000.0)


def test_no_measurement_starts_from_0_as_before():
    assert Readings().period_spent_g is None
    seen = observe(DAY, {}, reads(None), NOW_S, 0.0)
    assert seen[SPENT_G] == 0.0 and seen[WEIGHT] == 0.0


# --- the live reader


class Spend(Answers):
    """``job_energy`` sums per account; records the queries; raises when ``down``."""

    def __init__(self, down: bool = False, **by_measurement) -> None:
        super().__init__(**by_measurement)
        self.queries: list[str] = []
        self.down = down

    def query(self, influxql: str):
        self.queries.append(influxql)
        if self.down and '"job_energy"' in influxql:
            raise TelemetryError("influx: GET http://db:8086/query: connection refused")
        return super().query(influxql)


def energy(**by_account: float) -> dict:
    return {"results": [{"statement_id": 0, "series": [
        {"name": "job_energy", "tags": {"account": a}, "columns": ["time", "co2_g"],
         "values": [[0, g]]} for a, g in by_account.items()]}]}


def site(**env: str):
    return config.load(site_file=None, environ={"WATTBATCH_CLUSTER_NAME": "c1", **env})


def test_the_live_reader_reads_the_periods_job_energy():
    client = Spend(job_energy=energy(physics=300_000.0, bio=100_000.0))
    cfg = site(WATTBATCH_GREENFLOW_BUDGET_KG_PER_DAY="100")
    spent, said = live.period_spent(cfg, client, NOW_S)
    assert said == () and spent[:2] == (START_S, 400_000.0)
    assert dict(spent[2]) == {"physics": 300_000.0, "bio": 100_000.0}
    q = client.queries[0]
    assert f"time > {int(START_S * 1e9)}" in q and f"time <= {int(NOW_S * 1e9)}" in q
    assert "\"cluster\" = 'c1'" in q
    # accounts alone are a budget too
    accounts = site(WATTBATCH_GREENFLOW_ACCOUNTS="physics=10")
    assert live.period_spent(accounts, client, NOW_S)[0][1] == 400_000.0


def test_without_a_budget_nothing_is_read():
    client = Spend(job_energy=energy(physics=1.0))
    assert live.period_spent(site(), client, NOW_S) == (None, ())
    assert client.queries == []


def test_an_unreadable_spend_is_a_warning_not_an_error():
    cfg = site(WATTBATCH_GREENFLOW_BUDGET_KG_PER_DAY="100")
    spent, said = live.period_spent(cfg, Spend(down=True), NOW_S)
    assert spent is None and len(said) == 1
    assert "greenflow" in said[0] and "job_energy" in said[0]
    assert f"start_s={START_S:.0f}" in said[0] and "connection refused" in said[0]


def test_readings_carry_the_spend_and_its_warning(monkeypatch):
    cfg = site(WATTBATCH_GREENFLOW_BUDGET_KG_PER_DAY="100")
    client = Spend(job_energy=energy(physics=300_000.0))
    monkeypatch.setattr(live.InfluxClient, "from_config", staticmethod(lambda _cfg: client))
    monkeypatch.setattr(live, "planning_provider", lambda *_: None)
    monkeypatch.setattr(live.time, "time", lambda: NOW_S)
    got = live.readings(cfg)
    assert got.period_spent_g[:2] == (START_S, 300_000.0)
    client.queries.clear()          # a policy that reads no carbon: no spend, no carbon read
    assert live.readings(cfg, carbon=False).period_spent_g is None
    assert client.queries and not any("job_energy" in q for q in client.queries)
    down = Spend(down=True)
    monkeypatch.setattr(live.InfluxClient, "from_config", staticmethod(lambda _cfg: down))
    got = live.readings(cfg)
    assert got.period_spent_g is None and any("job_energy" in w for w in got.warnings)


def test_the_budget_report_and_the_reader_count_the_same_spend(monkeypatch, tmp_path):
    client = Spend(job_energy=energy(physics=300_000.0, bio=100_000.0))
    from slurm_plugin.report import carbon_budget
    monkeypatch.setattr(carbon_budget.InfluxClient, "from_config",
                        staticmethod(lambda _cfg: client))
    cfg = site(WATTBATCH_GREENFLOW_BUDGET_KG_PER_DAY="100",
               WATTBATCH_RECONCILE_STATE_DIR=str(tmp_path))
    report = budget_report(cfg, NOW_S)
    assert report["spent_kg"] == 400.0
    assert period_spent_g(client, "c1", START_S, NOW_S)[1] == 400_000.0


@pytest.mark.parametrize("ended_h_ago, forecast", [(72, False), (1, True)])
def test_the_budget_report_forecasts_no_period_end_from_stale_carbon(monkeypatch, tmp_path,
                                                                     ended_h_ago, forecast):
    from datetime import datetime, timezone

    from slurm_plugin.report import carbon_budget
    client = Spend(job_energy=energy(physics=1_000.0))
    monkeypatch.setattr(carbon_budget.InfluxClient, "from_config",
                        staticmethod(lambda _cfg: client))
    end_s = NOW_S - ended_h_ago * H
    rows = ["Time,Carbon Intensity"] + [
        f"{datetime.fromtimestamp(end_s - k * H, timezone.utc):%Y-%m-%d %H:%M:%S},300"
        for k in range(48, -1, -1)]
    (tmp_path / "gb.csv").write_text("\n".join(rows) + "\n")
    cfg = site(WATTBATCH_GREENFLOW_BUDGET_KG_PER_DAY="100", WATTBATCH_CARBON_ZONE="GB",
               WATTBATCH_CARBON_FILE=str(tmp_path / "gb.csv"),
               WATTBATCH_RECONCILE_STATE_DIR=str(tmp_path))
    report = budget_report(cfg, NOW_S)
    assert report["spent_kg"] == 1.0
    stale = [w for w in report["warnings"] if "carbon.max_age_s" in w]
    if forecast:
        assert report["forecast_kg"] is not None and not stale, report["warnings"]
    else:   # 3 days old: the stale intensity is not carried to the period's end
        assert report["forecast_kg"] is None and len(stale) == 1, report["warnings"]
