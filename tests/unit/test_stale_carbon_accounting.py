"""No job is charged CO2 at a stale intensity: the collector's ledger, the epilog's fall-back
and its prolog-only path use an intensity only where the zone has a point within
``carbon.max_age_s`` before the time charged; ``carbon import --shift-to-now`` replays a past
series as current data."""

from __future__ import annotations

import pytest

from slurm_plugin.node.jobenergy import finish, from_ledger, mean_intensity, record_start
from slurm_plugin.node.ledger import CachedIntensity
from slurm_plugin.formats.carbon_series import SeriesCarbon, is_stale
from slurm_plugin.formats.carbon_csv import WEEK_S, CarbonPoint, CarbonSeries

H, DAY = 3600.0, 86400.0


def points(first_s: float, last_s: float, value: float = 200.0) -> tuple[CarbonPoint, ...]:
    n = int((last_s - first_s) // H) + 1
    return tuple(CarbonPoint(first_s + i * H, value) for i in range(n))


def hourly(first_s: float, last_s: float, value: float = 200.0) -> SeriesCarbon:
    return SeriesCarbon("GB", points(first_s, last_s, value))


def test_a_point_within_max_age_before_the_time_is_fresh():
    c = hourly(0.0, 10 * H)
    assert not is_stale(c, 10 * H, 2 * DAY)
    assert not is_stale(c, 10 * H + 2 * DAY - 1, 2 * DAY)
    assert is_stale(c, 10 * H + 2 * DAY, 2 * DAY)          # the last point is exactly max_age old
    assert not is_stale(c, 1e9, 0.0)                       # 0: no limit
    assert is_stale(hourly(0.0, 0.0), -1.0, 2 * DAY)       # before the first point: none


class Flaky(SeriesCarbon):
    def __init__(self, *a):
        super().__init__(*a)
        self.fail = False

    def intensity_at(self, t_s):
        if self.fail:
            raise OSError("influx down")
        return super().intensity_at(t_s)


def test_the_ledger_charges_no_co2_at_a_stale_intensity_and_says_so_once():
    said: list[str] = []
    c = Flaky("GB", points(0.0, 4 * DAY))
    cached = CachedIntensity(c, ttl_s=0.0, warn=said.append, max_age_s=2 * DAY)
    assert cached(3 * DAY) == 200.0 and not said
    assert cached(6 * DAY) is None                      # newest point two days old: stale
    assert cached(7 * DAY) is None
    assert len(said) == 1 and "zone GB" in said[0] and "carbon.max_age_s" in said[0], said
    assert "wattctl carbon import" in said[0]
    assert cached(5 * DAY) == 200.0                     # fresh again (a pass back in the window)
    assert cached(6 * DAY) is None and len(said) == 2   # stale again: said again
    c.fail = True
    assert cached(3 * DAY) is None and "influx down" in said[-1]
    # without a limit the old behaviour: the value in force, whatever its age
    assert CachedIntensity(hourly(0.0, 4 * DAY), ttl_s=0.0)(9 * DAY) == 200.0


def test_mean_intensity_leaves_out_a_stale_value_at_the_start():
    c = SeriesCarbon("GB", (CarbonPoint(0.0, 100.0), CarbonPoint(10 * DAY, 300.0)))
    # a run from day 5 to day 6 has no point of its own, and the one in force is 5 days old
    assert mean_intensity(c, 5 * DAY, 6 * DAY, 2 * DAY) is None
    assert mean_intensity(c, 5 * DAY, 6 * DAY) == pytest.approx(100.0)    # no limit: as before
    # a run that reaches day 10 counts the point it saw, not the stale one before it
    assert mean_intensity(c, 5 * DAY, 11 * DAY, 2 * DAY) == pytest.approx(300.0)
    assert mean_intensity(c, 1 * DAY, 2 * DAY, 2 * DAY) == pytest.approx(100.0)


def test_the_epilog_leaves_co2_out_where_the_zone_is_stale():
    c = SeriesCarbon("GB", (CarbonPoint(0.0, 100.0),))
    entry = {"energy_j": 3.6e6, "first_s": 5 * DAY}       # charged while no intensity was known
    stale = from_ledger("7", "n1", entry, 5 * DAY + H, c, max_age_s=2 * DAY)
    assert stale.energy_j == 3.6e6 and stale.co2_g is None and stale.gco2_per_kwh is None
    assert from_ledger("7", "n1", entry, 5 * DAY + H, c).co2_g == pytest.approx(100.0)
    fresh = from_ledger("7", "n1", {"energy_j": 3.6e6, "first_s": 1 * DAY}, 1 * DAY + H, c,
                        max_age_s=2 * DAY)
    assert fresh.co2_g == pytest.approx(100.0)
    # what the collector already charged (fresh at the time) stays as charged
    part = from_ledger("7", "n1", {"energy_j": 3.6e6, "first_s": 5 * DAY, "co2_g": 50.0,
                                   "co2_energy_j": 1.8e6}, 5 * DAY + H, c, max_age_s=2 * DAY)
    assert part.co2_g == pytest.approx(100.0)            # the rest at the covered part's rate


class Counters:
    def __init__(self):
        self.reads = 0

    def read(self):
        from slurm_plugin.model import GpuReading
        self.reads += 1
        return [GpuReading("n1", 0, 100.0, self.reads * 3.6e6, 50.0, 1024.0, 300.0, 0.0)]


def test_the_prolog_only_path_leaves_co2_out_where_the_zone_is_stale(tmp_path):
    c = SeriesCarbon("GB", (CarbonPoint(0.0, 100.0),))
    src = Counters()
    record_start(src, "9", (0,), tmp_path, now_s=5 * DAY)
    r = finish(src, "n1", "9", tmp_path, now_s=5 * DAY + H, carbon=c, max_age_s=2 * DAY)
    assert r.energy_j == pytest.approx(3.6e6) and r.co2_g is None


def series(first_s: float, last_s: float) -> CarbonSeries:
    n = int((last_s - first_s) // H) + 1
    return CarbonSeries("x.csv", "electricitymaps", "GB",
                        tuple(CarbonPoint(first_s + i * H, float(i)) for i in range(n)))


@pytest.mark.parametrize("now_s", [40 * DAY, 40 * DAY + 1, 47 * DAY - 1, 300 * DAY + 5 * H])
def test_a_series_of_weeks_moves_by_whole_weeks_to_cover_now(now_s):
    s = series(0.0, 31 * DAY)
    moved, d = s.shifted_to(now_s)
    assert d > 0 and d % WEEK_S == 0
    assert moved.points[0].time_s <= now_s <= moved.points[-1].time_s < now_s + WEEK_S
    assert [p.time_s - d for p in moved.points] == [p.time_s for p in s.points]
    assert [p.gco2_per_kwh for p in moved.points] == [p.gco2_per_kwh for p in s.points]
    assert moved.zone == s.zone and moved.path == s.path


@pytest.mark.parametrize("now_s", [40 * DAY, 40 * DAY + 1, 44 * DAY - 1, 300 * DAY + 5 * H])
def test_a_shorter_series_moves_by_whole_days_or_hours_to_cover_now(now_s):
    s = series(0.0, 3 * DAY)             # 72 h: whole weeks could leave now outside it
    moved, d = s.shifted_to(now_s)
    assert d > 0 and d % DAY == 0
    assert moved.points[0].time_s <= now_s <= moved.points[-1].time_s
    hours, h = series(0.0, 5 * H).shifted_to(now_s)
    assert h % H == 0 and hours.points[0].time_s <= now_s <= hours.points[-1].time_s


def test_a_series_that_reaches_now_is_not_moved():
    s = series(0.0, 31 * DAY)
    assert s.shifted_to(31 * DAY) == (s, 0)
    assert s.shifted_to(10 * DAY) == (s, 0)
