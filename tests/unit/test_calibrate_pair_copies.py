"""The real GPU's co-located pair (node/calibrate_pair.py ``run_copies``) without a GPU: real
copy processes over a stand-in ``torch`` module, and a stand-in ``nvidia-cuda-mps-control``:
the copies start together, their times come back, the job's own MPS daemon gets private
directories and is stopped, and a copy or daemon that fails is a note's reason, not a crash.
(Whether MPS and CUDA behave so on hardware is not tested here.)"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from slurm_plugin.node.calibrate_pair import PairUnavailable, run_copies

FAKE_TORCH = '''
import os, time
float16 = "float16"
class _T:
    def __matmul__(self, other):
        time.sleep(0.002)
        return self
    def __mul__(self, k):
        return self
def device(name):
    return name
def randn(*shape, **kw):
    if os.environ.get("FAKE_TORCH_FAIL"):
        raise RuntimeError("CUDA error: no CUDA-capable device is detected")
    with open(os.environ["FAKE_TORCH_LOG"], "a") as fh:
        fh.write(os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "-") + "\\n")
    return _T()
class cuda:
    @staticmethod
    def synchronize():
        pass
'''

FAKE_MPS = '''#!/bin/sh
if [ "$1" = "-d" ]; then
  echo "start $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY" >> "$FAKE_MPS_LOG"
  exit "${FAKE_MPS_EXIT:-0}"
fi
read line
echo "$line $CUDA_MPS_PIPE_DIRECTORY" >> "$FAKE_MPS_LOG"
'''


@pytest.fixture()
def fakes(tmp_path, monkeypatch):
    lib, bin_ = tmp_path / "lib" / "torch", tmp_path / "bin"
    lib.mkdir(parents=True)
    bin_.mkdir()
    (lib / "__init__.py").write_text(FAKE_TORCH)
    mps = bin_ / "nvidia-cuda-mps-control"
    mps.write_text(FAKE_MPS)
    mps.chmod(mps.stat().st_mode | stat.S_IXUSR)
    repo = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(lib.parent), str(repo)]))
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_TORCH_LOG", str(tmp_path / "torch.log"))
    monkeypatch.setenv("FAKE_MPS_LOG", str(tmp_path / "mps.log"))
    jobtmp = tmp_path / "jobtmp"
    jobtmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(jobtmp))
    return tmp_path


def _log(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_two_copies_start_together_and_their_mean_time_comes_back(fakes):
    ticks = []
    got = run_copies(2, 50, 64, None, 1.0, lambda: ticks.append(1), 0.02)
    assert 0.1 <= got < 2.0                        # 50 matmuls of 2 ms each, and overhead
    assert _log(fakes / "torch.log") == ["-"] * 4 and ticks      # two tensors a copy
    assert list((fakes / "jobtmp").iterdir()) == []             # its folder is removed


def test_under_mps_the_job_starts_its_own_daemon_and_stops_it(fakes):
    run_copies(2, 5, 64, "mps", 1.0, lambda: None, 0.02)
    start, quit_ = _log(fakes / "mps.log")
    _, pipe, logs = start.split()
    assert Path(pipe).parent.parent == fakes / "jobtmp" and pipe.endswith("mps-pipe")
    assert logs.endswith("mps-log") and quit_ == f"quit {pipe}"
    assert _log(fakes / "torch.log") == [pipe] * 4       # the copies reach that daemon


def test_a_copy_or_a_daemon_that_fails_is_a_reason(fakes, monkeypatch):
    monkeypatch.setenv("FAKE_MPS_EXIT", "3")
    with pytest.raises(PairUnavailable, match=r"nvidia-cuda-mps-control -d exited 3"):
        run_copies(2, 5, 64, "mps", 1.0, lambda: None, 0.02)
    path = os.environ["PATH"]
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(PairUnavailable, match="MPS is not available here"):
        run_copies(2, 5, 64, "mps", 1.0, lambda: None, 0.02)
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("FAKE_TORCH_FAIL", "1")
    with pytest.raises(PairUnavailable, match=r"copy \d exited 1: RuntimeError: CUDA error"):
        run_copies(1, 5, 64, None, 1.0, lambda: None, 0.02)
