"""NVML wrapper. GPU tests run where NVML initialises and are skipped, with the reason NVML
gave, where it does not; the error path and the MPS process scan are tested everywhere."""

from __future__ import annotations

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
