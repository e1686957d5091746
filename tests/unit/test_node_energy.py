"""Collector points and the prolog/epilog job-energy bookkeeping, with a scripted GPU source."""

from __future__ import annotations

import pytest

from slurm_plugin.errors import InputError, TelemetryError
from slurm_plugin.model import GpuReading
from slurm_plugin.node.collector import gpu_point, run_loop
from slurm_plugin.node.jobenergy import finish, forget, job_gpus, record_start, state_path
from slurm_plugin.formats.carbon_series import SeriesCarbon
from slurm_plugin.formats.carbon_csv import CarbonPoint


class ScriptedSource:
    """GPU energy counters that grow by ``step_j`` per read."""

    def __init__(self, gpus=2, step_j=1000.0):
        self.gpus, self.step_j, self.reads = gpus, step_j, 0

    def read(self):
        self.reads += 1
        return [GpuReading("n1", i, 100.0 + i, self.reads * self.step_j * (i + 1), 50.0, 1024.0,
                           300.0, float(self.reads)) for i in range(self.gpus)]


class Recorder:
    def __init__(self, fail_first=0):
        self.points, self.fail_first = [], fail_first

    def write(self, points):
        if self.fail_first:
            self.fail_first -= 1
            raise TelemetryError("influx: down")
        self.points.extend(points)
        return len(self.points)


def test_gpu_point_has_float_fields_and_tags():
    r = GpuReading("n1", 3, 250, 10, 99, 2048, 300, 5.0)
    assert gpu_point(r, "c1").to_line() == (
        "gpu,cluster=c1,gpu=3,node=n1 energy_j=10.0,mem_used_mib=2048.0,power_limit_w=300.0,"
        "power_w=250.0,util_pct=99.0 5000000000")


def test_run_loop_survives_failures_and_keeps_the_grid():
    source, sink, sleeps = ScriptedSource(), Recorder(fail_first=1), []
    failures = run_loop(source, sink, "c", 2.0, iterations=3, sleep=sleeps.append,
                        clock=lambda: 100.0)
    assert failures == 1 and source.reads == 3 and len(sink.points) == 4
    assert sleeps == [2.0, 4.0]


@pytest.mark.parametrize("raw, gpus", [("", ()), ("2,0", (0, 2)), ("1", (1,))])
def test_job_gpus(raw, gpus):
    assert job_gpus({"SLURM_JOB_GPUS": raw}) == gpus


def test_job_gpus_rejects_garbage():
    with pytest.raises(InputError, match="SLURM_JOB_GPUS = 'gpu0'"):
        job_gpus({"SLURM_JOB_GPUS": "gpu0"})


def test_prolog_epilog_energy_and_co2(tmp_path):
    source = ScriptedSource(gpus=2, step_j=3.6e6)  # GPU i gains (i + 1) * 1 kWh per read
    record_start(source, "42", (1,), tmp_path, now_s=0.0)
    carbon = SeriesCarbon("GB", (CarbonPoint(0.0, 100.0), CarbonPoint(3600.0, 300.0)))
    result = finish(source, "n1", "42", tmp_path, now_s=3600.0, carbon=carbon)
    assert result.energy_j == pytest.approx(2 * 3.6e6)        # only GPU 1, one read later
    assert result.gco2_per_kwh == pytest.approx(200.0)
    assert result.co2_g == pytest.approx(400.0)
    line = result.point("alice", "c").to_line()
    assert line.startswith("job_energy,cluster=c,job_id=42,node=n1,user=alice co2_g=400.0,")
    forget(tmp_path, "42")
    assert not state_path(tmp_path, "42").exists()


def test_epilog_without_prolog_record_is_clear(tmp_path):
    with pytest.raises(InputError, match="did the prolog run"):
        finish(ScriptedSource(), "n1", "7", tmp_path, now_s=1.0)


def test_prolog_rejects_gpu_the_source_lacks(tmp_path):
    with pytest.raises(InputError, match="names GPU 5"):
        record_start(ScriptedSource(gpus=2), "8", (5,), tmp_path, now_s=0.0)


def test_prolog_and_epilog_never_fail_the_job(monkeypatch, capsys):
    from slurm_plugin.node import epilog, prolog
    monkeypatch.delenv("WATTBATCH_SITE_CONFIG", raising=False)   # the packaged defaults only
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_JOB_GPUS", "zero")         # unparseable: an InputError inside
    assert prolog.main() == 0
    monkeypatch.setenv("SLURM_JOB_ID", "42; rm -rf /")    # not a job id: an InputError inside
    assert epilog.main() == 0
    err = capsys.readouterr().err.splitlines()
    assert [line.split(":")[0] for line in err] == ["wattbatch prolog", "wattbatch epilog"]
    assert "SLURM_JOB_GPUS = 'zero'" in err[0] and "'42; rm -rf /'" in err[1]


class FlakySource(ScriptedSource):
    """Fails its first reads with errors no GPU source promises: bad Slurm output, a bug."""

    def __init__(self, errors):
        super().__init__()
        self.errors = list(errors)

    def read(self):
        if self.errors:
            raise self.errors.pop(0)
        return super().read()


def test_run_loop_survives_any_single_failure(capsys):
    source = FlakySource([UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
                          KeyError("jobs"), ValueError("odd hostlist")])
    failures = run_loop(source, Recorder(), "c", 1.0, iterations=4, sleep=lambda s: None,
                        clock=lambda: 0.0)
    assert failures == 3 and source.reads == 1
    err = capsys.readouterr().err
    assert "UnicodeDecodeError" in err and "KeyError" in err and "sample 3 failed" in err
