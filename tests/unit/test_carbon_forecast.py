"""Carbon forecasts: the hourly grid, the built-in forecasters, the forecasting providers and the
external forecast CSV."""

from __future__ import annotations

import math
import random

import pytest

from slurm_plugin.errors import ConfigError, InputError
from slurm_plugin.physics.carbon_forecast import (FORECASTERS, HOUR_S, Blend, HourlySeries,
                                                  Persistence, Profile, SeasonalNaive,
                                                  forecaster, predict)
from slurm_plugin.formats.carbon_series import SeriesCarbon
from slurm_plugin.formats.carbon_csv import CarbonPoint
from slurm_plugin.formats.carbon_forecast import (ExternalForecastCarbon, ForecastingCarbon,
                                                    load_forecast)

T0 = 1_700_006_400.0  # a UTC hour boundary (2023-11-15 00:00)


def daily(hours: int, noise: float = 0.0, seed: int = 1, ar: float = 0.0) -> list[float]:
    """A daily cycle around 300 plus an AR(1) anomaly."""
    rng = random.Random(seed)
    out, a = [], 0.0
    for k in range(hours):
        a = ar * a + rng.gauss(0, noise)
        out.append(300 + 100 * math.sin(2 * math.pi * k / 24) + a)
    return out


def test_hourly_grid_means_skips_invalid_and_counts_gaps():
    pts = [(T0, 100.0), (T0 + 1800, 200.0), (T0 + 900, math.nan), (T0 + 2 * HOUR_S, 50.0),
           (T0 + 2 * HOUR_S + 60, -1.0)]
    s = HourlySeries.from_points(pts)
    assert s.start_s == T0
    assert s.values == (150.0, None, 50.0)
    assert s.skipped_points == 2 and s.gap_hours == 1
    stale = HourlySeries.from_points(pts, until_s=T0 + 5 * HOUR_S + 10)
    assert len(stale.values) == 6 and stale.gap_hours == 4
    assert stale.end_s == T0 + 6 * HOUR_S


def test_persistence_and_seasonal_naive():
    v = daily(24 * 10)
    assert Persistence().predict_at(v, 100, 3) == [v[99]] * 3
    sd = SeasonalNaive(24, "seasonal-day").predict_at(v, 100, 30)
    assert sd[0] == v[100 - 24] and sd[23] == v[99] and sd[24] == v[100 + 24 - 48]
    # a gap a day back: two days back
    gapped: list[float | None] = list(v)
    gapped[100 - 24] = None
    assert SeasonalNaive(24, "x").predict_at(gapped, 100, 1) == [v[100 - 48]]


def test_profile_and_blend_exact_on_a_pure_daily_cycle():
    v = daily(24 * 40)
    for f in (Profile(), Blend()):
        pred = f.predict_at(v, len(v) - 24, 24)
        assert pred == pytest.approx(v[-24:], abs=1e-6), f.name


def test_blend_learns_a_persistent_anomaly():
    v = daily(24 * 60, noise=15.0, ar=0.97, seed=3)
    w = Blend().weights(v, len(v), 48)
    assert 0.8 < w[0] <= 1.0 and all(0.0 <= x <= 1.0 for x in w)
    assert w[0] > w[23] and w[47] <= w[23]
    # against persistence half a day ahead and the profile at 1 h, over many origins
    err = {n: [0.0, 0.0] for n in ("blend", "persistence", "profile")}
    for end in range(24 * 36, len(v) - 24, 7):
        for n in err:
            p = FORECASTERS[n].predict_at(v, end, 24)
            err[n][0] += abs(p[0] - v[end])
            err[n][1] += abs(p[11] - v[end + 11])
    assert err["blend"][0] < err["profile"][0]
    assert err["blend"][1] < err["persistence"][1]


def test_gaps_are_skipped_not_used():
    v: list[float | None] = list(daily(24 * 40, noise=5, ar=0.9))
    for i in range(300, 340):
        v[i] = None
    v[-1] = None
    for f in FORECASTERS.values():
        out = f.predict_at(v, len(v), 24)
        assert all(x is not None and math.isfinite(x) and x >= 0 for x in out), f.name
    assert Persistence().predict_at(v, len(v), 1) == [v[-2]]
    assert Blend().predict_at([None] * 50, 50, 3) == [None] * 3


def test_unknown_method_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"method = 'arima'.*persistence, .*blend"):
        forecaster("arima")
    assert forecaster(" Blend ").name == "blend"


def _series_provider(values: list[float]) -> SeriesCarbon:
    return SeriesCarbon("ZZ", tuple(CarbonPoint(T0 + k * HOUR_S, v) for k, v in enumerate(values)))


def test_forecasting_provider_sees_only_the_past():
    v = daily(24 * 45, noise=10, ar=0.9)
    changed = v[: 24 * 40] + [x + 500 for x in v[24 * 40:]]
    now = T0 + (24 * 40 - 1) * HOUR_S + 1200          # inside the last hour both share
    a = ForecastingCarbon(_series_provider(v)).forecast(now, now + 6 * HOUR_S)
    b = ForecastingCarbon(_series_provider(changed)).forecast(now, now + 6 * HOUR_S)
    assert a == b
    assert [t for t, _ in a] == [T0 + (24 * 40 + i) * HOUR_S for i in range(6)]
    assert a != tuple(zip((t for t, _ in a), v[24 * 40: 24 * 40 + 6]))


def test_forecasting_provider_reports_stale_history():
    v = daily(24 * 40)
    p = ForecastingCarbon(_series_provider(v), method="persistence")
    now = T0 + (len(v) + 4) * HOUR_S + 10                  # 5 hours after the last point
    out = p.forecast(now, now + 2 * HOUR_S)
    assert [x for _, x in out] == [v[-1], v[-1]]
    assert p.report.stale_hours == 5 and p.report.gap_hours == 5
    assert "5 hour(s)" in p.report.warning("ZZ")
    # cached per hour: a shorter window inside the same hour gives the same points
    assert p.forecast(now + 60, now + HOUR_S) == out[:1]


def test_live_planning_uses_stored_points_ahead_then_the_builtin_forecast():
    """A site that stores only the past (no forecast imported) still gets a forecast for its
    policies: the built-in one over that history; stored points ahead win where they exist,
    and the built-in forecast fills the hours after the last of them."""
    from slurm_plugin.formats.carbon_forecast import StoredThenForecast
    v = daily(24 * 40, noise=10, ar=0.9)
    now = T0 + (24 * 38 - 1) * HOUR_S + 1200
    past_only = StoredThenForecast(_series_provider(v[: 24 * 38]))
    got = past_only.forecast(now, now + 6 * HOUR_S)
    assert [t for t, _ in got] == [T0 + (24 * 38 + i) * HOUR_S for i in range(6)]
    assert got == ForecastingCarbon(_series_provider(v[: 24 * 38])).forecast(now, now + 6 * HOUR_S)
    assert past_only.intensity_at(now) == v[24 * 38 - 1]
    stored = StoredThenForecast(_series_provider(v))        # the next 2 days are stored
    assert stored.forecast(now, now + 6 * HOUR_S) == \
        tuple(zip([T0 + (24 * 38 + i) * HOUR_S for i in range(6)], v[24 * 38: 24 * 38 + 6]))
    short = StoredThenForecast(_series_provider(v[: 24 * 38 + 2]))   # 2 hours ahead stored
    mixed = short.forecast(now, now + 6 * HOUR_S)
    assert [t for t, _ in mixed] == [T0 + (24 * 38 + i) * HOUR_S for i in range(6)]
    assert [x for _, x in mixed[:2]] == v[24 * 38: 24 * 38 + 2]
    assert [x for _, x in mixed[2:]] == [x for _, x in ForecastingCarbon(_series_provider(
        v[: 24 * 38 + 2])).forecast(now, now + 6 * HOUR_S)[2:]]


def test_external_forecast_csv_newest_issue_and_skipped_rows(tmp_path):
    f = tmp_path / "fc.csv"
    f.write_text("time,gco2_per_kwh,issued\n"
                 "2024-05-01 13:00:00,200,2024-05-01 10:00:00\n"
                 "2024-05-01 14:00:00,210,2024-05-01 10:00:00\n"
                 "2024-05-01 14:00:00,150,2024-05-01 12:00:00\n"
                 "2024-05-01 15:00:00,nan,2024-05-01 12:00:00\n"
                 "2024-05-01 16:00:00,,2024-05-01 12:00:00\n")
    table = load_forecast(f, zone="GB")
    assert table.skipped_lines == (5, 6)
    p = ExternalForecastCarbon(table)
    h = 3600.0
    t13 = 1714568400.0
    assert p.forecast(t13 - 2.5 * h, t13 + 2 * h) == ((t13, 200.0), (t13 + h, 210.0))
    assert p.forecast(t13 - 0.5 * h, t13 + 2 * h) == ((t13, 200.0), (t13 + h, 150.0))
    assert p.intensity_at(t13 + h + 1) == 150.0


@pytest.mark.parametrize("body, match", [
    ("when,value\n2024-05-01 13:00:00,1\n", "column 'time' missing"),
    ("time,gco2_per_kwh\n2024-05-01 13:00:00,abc\n", r":2: field 'gco2_per_kwh' = 'abc'"),
    ("time,gco2_per_kwh\n2024-05-01 13:00:00,1\nyesterday,2\n", r":3: field 'time' = 'yesterday'"),
    ("time,gco2_per_kwh\n2024-05-01 13:00:00,-4\n", r":2: .*non-negative"),
    ("time,gco2_per_kwh\n2024-05-01 13:00:00,nan\n", "no usable rows"),
    ("", "empty file"),
])
def test_external_forecast_csv_errors_name_the_line(tmp_path, body, match):
    f = tmp_path / "bad.csv"
    f.write_text(body)
    with pytest.raises(InputError, match=match):
        load_forecast(f)


def test_predict_stamps_hours_after_the_series():
    s = HourlySeries(T0, tuple(daily(24 * 8)))
    out = predict(Persistence(), s, 3)
    assert [t for t, _ in out] == [s.end_s, s.end_s + HOUR_S, s.end_s + 2 * HOUR_S]


class _RecordingHistory:
    """A provider standing in for InfluxDB: records the windows asked for."""

    zone = "ZZ"

    def __init__(self, values: list[float]) -> None:
        self.inner = _series_provider(values)
        self.asked: list[tuple[float, float]] = []

    def intensity_at(self, t_s: float) -> float | None:
        return self.inner.intensity_at(t_s)

    def forecast(self, start_s: float, end_s: float) -> tuple[tuple[float, float], ...]:
        self.asked.append((start_s, end_s))
        return self.inner.forecast(start_s, end_s)


def test_forecasting_provider_reads_history_up_to_now_only_once_per_hour():
    h = _RecordingHistory(daily(24 * 50))
    p = ForecastingCarbon(h, history_days=10)
    now = T0 + 24 * 45 * HOUR_S + 100
    p.forecast(now, now + 3 * HOUR_S)
    p.forecast(now + 600, now + 2 * HOUR_S)          # same hour, shorter: the cached forecast
    assert h.asked == [(now - 10 * 86400, now)]
    p.forecast(now + HOUR_S, now + 2 * HOUR_S)       # next hour: a new read
    assert len(h.asked) == 2 and h.asked[1][1] == now + HOUR_S
    assert p.intensity_at(now) == h.inner.intensity_at(now)


@pytest.mark.parametrize("hours", [1, 5, 30, 24 * 3])
def test_short_history_still_forecasts(hours):
    v = daily(hours, noise=3, ar=0.5)
    for f in FORECASTERS.values():
        out = f.predict_at(v, len(v), 48)
        assert len(out) == 48 and all(x is not None and x >= 0 for x in out), f.name
    if hours < 24:                    # no day of history yet: every forecaster persists
        assert Blend().predict_at(v, len(v), 2) == [v[-1], v[-1]]


def test_blend_ages_a_stale_anomaly():
    v: list[float | None] = list(daily(24 * 40, noise=15.0, ar=0.97, seed=5))
    v[-1] = 900.0                                      # a big anomaly at the last valid hour
    stale = Blend().predict_at(v + [None] * 5, len(v) + 5, 1)
    w = Blend().weights(v + [None] * 5, len(v) + 5, 6)
    # five gap hours later, the first forecast uses the 6-hour weight, not the 1-hour one
    profile = Profile().predict_at(v + [None] * 5, len(v) + 5, 1)[0]
    anomaly = 900.0 - Profile().predict_at(v, len(v) - 1, 1)[0]
    assert stale[0] == pytest.approx(profile + w[5] * anomaly)
    assert w[5] < w[0]
