"""NVML wrapper. GPU tests run where NVML initialises and are skipped, with the reason NVML
gave, where it does not; the error path and the MPS process scan are tested everywhere."""

from __future__ import annotations

import time
import warnings

import pytest

from slurm_plugin.errors import TelemetryError
from slurm_plugin.telemetry.nvml import Nvml, mps_daemon_running


def _nvml_failure() -> str | None:
    """Why NVML cannot be used here, or None when ``nvmlInit()`` works."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            import pynvml
    except ImportError as exc:
        return f"pynvml not importable ({exc})"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return f"nvmlInit failed ({exc})"
    try:
        if pynvml.nvmlDeviceGetCount() == 0:
            return "nvmlInit worked but sees no GPU"
    finally:
        pynvml.nvmlShutdown()
    return None


FAILURE = _nvml_failure()


@pytest.fixture()
def nvml():
    if FAILURE is not None:
        pytest.skip(f"no NVIDIA GPU/driver: {FAILURE}")
    with Nvml() as session:
        yield session


def test_readings_are_in_range(nvml):
    for i in range(nvml.count()):
        lo, hi = nvml.power_limit_range_w(i)
        assert 0 < nvml.power_w(i) < 2000
        assert 0 <= nvml.util_pct(i) <= 100
        assert 0 <= nvml.mem_used_mib(i) < 1024 * 1024
        assert lo <= nvml.power_limit_w(i) <= hi
        assert nvml.name(i)


def test_energy_counter_grows(nvml):
    import time
    before = nvml.energy_j(0)
    time.sleep(0.5)
    after = nvml.energy_j(0)
    assert after > before > 0


def test_power_limit_outside_range_is_refused(nvml):
    from slurm_plugin.errors import InputError
    lo, hi = nvml.power_limit_range_w(0)
    with pytest.raises(InputError, match="outside the GPU's range"):
        nvml.set_power_limit_w(0, hi + 100)


def test_nvml_source_reads_every_gpu(nvml):
    from slurm_plugin.node.source import NvmlSource
    readings = NvmlSource("n1", nvml).read()
    assert [r.index for r in readings] == list(range(nvml.count()))
    assert all(r.node == "n1" and r.power_w > 0 for r in readings)


def test_missing_driver_is_a_clear_error():
    if FAILURE is None:
        pytest.skip("NVML works here: the missing-driver error cannot be provoked")
    with pytest.raises(TelemetryError, match="nvml: nvmlInit failed.*NVIDIA driver"):
        Nvml()


def test_mps_daemon_is_found_by_program_name(tmp_path):
    for pid, argv in (("1", b"/sbin/init\0"), ("77", b"/usr/bin/nvidia-cuda-mps-control\0-d\0")):
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "cmdline").write_bytes(argv)
    (tmp_path / "self").mkdir()
    assert mps_daemon_running(tmp_path)
    (tmp_path / "77" / "cmdline").write_bytes(b"nvidia-cuda-mps-server\0")
    assert not mps_daemon_running(tmp_path)


# --- per-process utilisation and jobs (a scripted NVML; runs everywhere) ---------------------

class FakeNv:
    """The few pynvml calls the wrapper makes, scripted."""

    NVML_ERROR_NOT_FOUND = 6

    class NVMLError(Exception):
        def __init__(self, value):
            super().__init__(f"NVML error {value}")
            self.value = value

    def __init__(self, samples):
        self.samples = samples

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetProcessUtilization(self, handle, since_us):
        newer = [s for s in self.samples if s.timeStamp > since_us]
        if not newer:
            raise self.NVMLError(self.NVML_ERROR_NOT_FOUND)
        return newer

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        from types import SimpleNamespace
        return [SimpleNamespace(pid=p) for p in (11, 12, 13)]


def scripted_nvml(samples):
    from types import SimpleNamespace
    return Nvml(FakeNv([SimpleNamespace(pid=p, smUtil=u, timeStamp=t) for p, u, t in samples]))


def test_process_utilisation_is_averaged_per_process_with_the_newest_sample_time():
    nv = scripted_nvml([(11, 40, 100), (11, 60, 300), (12, 5, 200)])
    assert nv.process_samples(0) == ({11: 50.0, 12: 5.0}, 300)
    assert nv.process_samples(0, 250) == ({11: 60.0}, 300)          # newer samples only
    assert nv.process_samples(0, 300) == ({}, 300)                  # none newer: not an error
    assert scripted_nvml([]).process_samples(0, 7) == ({}, 7)


def test_new_calls_answer_or_say_unsupported(nvml):
    """On a real GPU: MPS clients, MIG mode and the per-process sample clock."""
    from slurm_plugin.telemetry.nvml import Unsupported
    for i in range(nvml.count()):
        try:
            assert all(p > 0 for p in nvml.mps_pids(i))
        except Unsupported:
            pass
        assert nvml.mig_enabled(i) in (True, False)
        _util, newest_us = nvml.process_samples(i, 0)
        assert newest_us == 0 or abs(newest_us / 1e6 - time.time()) < 3600


def test_job_of_pid_from_environment_or_cgroup(tmp_path):
    from slurm_plugin.telemetry.nvml import job_of_pid
    (tmp_path / "11").mkdir()
    (tmp_path / "11" / "environ").write_bytes(b"PATH=/bin\0SLURM_JOB_ID=77\0")
    (tmp_path / "12").mkdir()
    (tmp_path / "12" / "cgroup").write_text("0::/system.slice/slurmstepd.scope/job_78/step_0\n")
    assert [job_of_pid(p, tmp_path) for p in (11, 12, 13)] == ["77", "78", None]


def test_nvml_source_names_the_jobs_on_each_gpu():
    from slurm_plugin.model import Resident
    from slurm_plugin.node.source import NvmlSource

    class Gpus:
        def count(self): return 1
        def power_w(self, i): return 150.0
        def energy_j(self, i): return 1e6
        def util_pct(self, i): return 70.0
        def mem_used_mib(self, i): return 1000.0
        def power_limit_w(self, i): return 300.0
        def mig_enabled(self, i): return False
        def compute_pids(self, i): return (11, 12, 13)
        def mps_pids(self, i): return ()
        def process_samples(self, i, since_us): return {11: 30.0, 12: 20.0, 13: 15.0}, 0

    jobs = {11: "5", 12: "5", 13: None}          # 13: a process of no Slurm job
    source = NvmlSource("n1", Gpus(), clock=lambda: 100.0, job_of=jobs.get)
    (reading,) = source.read()
    assert reading.residents == (Resident("5", 0, 50.0),)
    assert source.degraded == {}
