"""Splitting a shared GPU's energy between its jobs, and the collector's per-job ledger."""

from __future__ import annotations

import itertools
import json

import pytest

from slurm_plugin.model import Cluster, Gpu, GpuReading, GpuUse, Job, Node, Resident
from slurm_plugin.node import ledger
from slurm_plugin.node.emulated import EmulatedSource
from slurm_plugin.node.jobenergy import from_ledger
from slurm_plugin.node.split import SoloRate, split_interval
from slurm_plugin.physics import class_names, idle_power_w
from slurm_plugin.formats.carbon_series import SeriesCarbon
from slurm_plugin.formats.carbon_csv import CarbonPoint


def test_alone_on_a_gpu_gets_everything():
    (share,) = split_interval(500.0, 10.0, 40.0, {"1": 0}, {}, {}, {}).values()
    assert (share.energy_j, share.idle_j, share.method) == (500.0, 400.0, "exclusive")


def test_idle_evenly_dynamic_by_weighted_utilisation():
    got = split_interval(1000.0, 10.0, 40.0, {"a": 2, "b": 2}, {"a": 30.0, "b": 10.0},
                         {"a": 1.0, "b": 3.0}, {"a": "util-class", "b": "util-class"})
    assert got["a"].idle_j == got["b"].idle_j == 200.0
    assert got["a"].energy_j == pytest.approx(200 + 300) and got["a"].method == "util-class"
    assert got["a"].energy_j + got["b"].energy_j == pytest.approx(1000.0)


def test_without_per_job_utilisation_by_shares_held():
    got = split_interval(1000.0, 10.0, 40.0, {"a": 3, "b": 1}, {"a": 50.0}, {}, {})
    assert got["a"].method == got["b"].method == "shards"
    assert got["a"].energy_j == pytest.approx(200 + 600 * 3 / 4)


@pytest.mark.parametrize("energy_j, dt_s", [(0.0, 10.0), (100.0, 10.0), (5000.0, 1.0)])
def test_shares_always_add_up_and_are_never_negative(energy_j, dt_s):
    got = split_interval(energy_j, dt_s, 40.0, {"a": 1, "b": 1, "c": 2},
                         {"a": 0.0, "b": 5.0, "c": 50.0}, {}, {})
    assert sum(s.energy_j for s in got.values()) == pytest.approx(energy_j)
    assert all(s.energy_j >= 0 and 0 <= s.idle_j <= s.energy_j for s in got.values())


def test_solo_rate_learns_watts_per_point():
    rate = SoloRate()
    for p in (140.0, 160.0):
        rate.observe("a", p, 40.0, 50.0)
    rate.observe("a", 30.0, 40.0, 50.0)        # below idle: not a reading of the job
    assert rate.get("a") == pytest.approx(2.2) and rate.get("b") is None


def emulated(tmp_path, jobs, t):
    gpu = Gpu("gpu1", 0, shard_jobs=tuple(j.job_id for j in jobs), shards_total=4)
    cluster = Cluster(nodes=(Node("gpu1", gpus=(gpu,)),), jobs={j.job_id: j for j in jobs})
    return EmulatedSource("all", lambda: cluster, tmp_path, clock=lambda: t[0])


MIXES = [m for n in (2, 3, 4) for m in itertools.combinations(class_names(), n)]


@pytest.mark.parametrize("apps", MIXES[::7], ids="+".join)
def test_ledger_matches_the_emulated_truth_and_conserves_energy(tmp_path, apps):
    t = [1000.0]
    jobs = [Job(str(k), "RUNNING", app=a, uses=(GpuUse("gpu1", 0, 1),))
            for k, a in enumerate(apps, 1)]
    src = emulated(tmp_path, jobs, t)
    book = ledger.Ledger(tmp_path, idle_power_w("V100"), intensity=lambda s: 300.0)
    for _ in range(6):
        book.update(src.read())
        t[0] += 2.0
    truth = json.loads(src.truth_file.read_text())
    gpu_j = sum(truth.values())
    charged = {j.job_id: json.loads(ledger.job_file(tmp_path, j.job_id).read_text())
               ["nodes"]["gpu1"] for j in jobs}
    assert sum(e["energy_j"] for e in charged.values()) == pytest.approx(gpu_j, rel=1e-9)
    for job_id, e in charged.items():
        assert e["energy_j"] == pytest.approx(truth[job_id], rel=0.05)
        assert e["shared_gpu_s"] == e["gpu_s"] == 10.0
        assert e["co2_g"] == pytest.approx(e["energy_j"] / 3.6e6 * 300.0)


def test_epilog_figures_from_a_closed_ledger(tmp_path):
    reading = GpuReading("n1", 2, 100.0, 0.0, 50.0, 0.0, 300.0, 100.0,
                         (Resident("7", 0, 50.0, "vgg16"),))
    book = ledger.Ledger(tmp_path, 40.0)          # no carbon known while it ran
    book.update([reading])
    book.update([GpuReading("n1", 2, 100.0, 3600.0, 50.0, 0.0, 300.0, 136.0,
                            reading.residents)])
    entry = ledger.close(tmp_path, "7")
    assert ledger.close(tmp_path, "7") == entry    # a second node's epilog reads the same
    book.update([GpuReading("n1", 2, 100.0, 7200.0, 50.0, 0.0, 300.0, 172.0,
                            reading.residents)])   # closed: never charged again
    assert not ledger.job_file(tmp_path, "7").exists()
    carbon = SeriesCarbon("z", (CarbonPoint(0.0, 200.0),))
    job = from_ledger("7", "n1", {**entry["nodes"]["n1"], "app": entry["app"]}, 136.0, carbon)
    assert (job.energy_j, job.gpus, job.split, job.app) == (3600.0, (2,), "exclusive", "vgg16")
    assert job.co2_g == pytest.approx(3600.0 / 3.6e6 * 200.0)
    assert job.summary() == "wb-energy:energy_j=3600;co2_g=0.2;shared_gpu_s=0;split=exclusive"
    line = job.point("u", "c", "acct", "gpu").to_line()
    assert line.startswith("job_energy,account=acct,app=vgg16,cluster=c,job_id=7,node=n1,")
    assert 'split="exclusive"' in line and 'gpu_indexes="2"' in line


def test_a_requeued_job_has_a_ledger_per_run(tmp_path):
    res = (Resident("7", 0, 50.0, "vgg16"),)
    book = ledger.Ledger(tmp_path, 40.0)

    def run(t0_s: float, e0_j: float, gained_j: float) -> dict:
        book.update([GpuReading("n1", 0, 100.0, e0_j, 50.0, 0.0, 300.0, t0_s, res)])
        book.update([GpuReading("n1", 0, 100.0, e0_j + gained_j, 50.0, 0.0, 300.0, t0_s + 60,
                                res)])
        return ledger.close(tmp_path, "7")["nodes"]["n1"]

    assert ledger.reopen(tmp_path, "7") is False          # the first run's prolog
    first = run(0.0, 0.0, 600.0)
    assert ledger.reopen(tmp_path, "7") is True           # requeued: the next run's prolog
    second = run(100.0, 700.0, 900.0)
    # the second run's own energy (the pass interval before its first reading included, the
    # collector's one-interval error), neither the first run's record again nor both summed
    assert (first["energy_j"], second["energy_j"]) == (600.0, 1000.0)
    assert (first["first_s"], second["first_s"]) == (0.0, 60.0)


def test_counter_reset_and_long_gaps_charge_nobody(tmp_path):
    res = (Resident("1", 0, 50.0),)
    book = ledger.Ledger(tmp_path, 40.0)
    for t, e in ((0.0, 1000.0), (10.0, 2000.0), (20.0, 5.0), (5000.0, 100000.0)):
        book.update([GpuReading("n", 0, 100.0, e, 50.0, 0.0, 300.0, t, res)])
    node = json.loads(ledger.job_file(tmp_path, "1").read_text())["nodes"]["n"]
    assert node["energy_j"] == 1000.0 and node["gpu_s"] == 10.0


def test_points_kept_while_influxdb_is_down_are_sent_by_a_later_pass(tmp_path):
    from slurm_plugin.errors import TelemetryError
    from slurm_plugin.node import spool
    from slurm_plugin.telemetry.lineproto import Point

    class Influx:
        def __init__(self):
            self.up, self.lines = False, []

        def write_lines(self, lines):
            if not self.up:
                raise TelemetryError("influx: connection refused")
            self.lines += lines
            return len(lines)

    point = Point("job_energy", {"job_id": "7", "node": "n1"}, {"energy_j": 5.0}, 10.0)
    spool.keep(tmp_path, "7-n1", [point])
    influx = Influx()
    assert spool.flush(tmp_path, influx) == 0 and list((tmp_path / "spool").glob("*.lp"))
    influx.up = True
    assert spool.flush(tmp_path, influx) == 1 and influx.lines == [point.to_line()]
    assert not list((tmp_path / "spool").glob("*.lp"))


def test_two_collectors_on_one_node_charge_nothing_twice(tmp_path):
    res = (Resident("1", 0, 50.0),)
    running, once = ledger.Ledger(tmp_path, 40.0), ledger.Ledger(tmp_path, 40.0)
    for book, t, e in ((running, 0.0, 0.0), (running, 10.0, 1000.0), (once, 12.0, 1200.0),
                       (running, 20.0, 2000.0)):
        book.update([GpuReading("n", 0, 100.0, e, 50.0, 0.0, 300.0, t, res)])
    node = json.loads(ledger.job_file(tmp_path, "1").read_text())["nodes"]["n"]
    assert node["energy_j"] == 2000.0 and node["gpu_s"] == 20.0
