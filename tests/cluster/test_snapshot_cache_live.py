"""The warm server's snapshot cache on the local cluster: a burst of co-location submissions
through the server decides on cached snapshots, and places every job exactly where
submissions that each read Slurm themselves place them (the jobs the burst placed since the
cached snapshot was taken count as the GPUs' holders)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]
ENTRY = "import sys; from wrapper.server_client import main; sys.argv[0] = 'wattbatch'; main()"
BURST = 8          # two GPUs' worth at EaCO's default of 4 jobs per GPU


def _burst(env: dict[str, str]) -> list[tuple[str, float]]:
    """(sbatch options added, snapshot age in s) per submission, in order."""
    out = []
    for _ in range(BURST):
        done = subprocess.run(
            [sys.executable, "-c", ENTRY, "--hold", "--parsable", "--job-name=burst",
             "--output=/dev/null", "--gres=gpu:1", "--wb-policy=eaco", "--wb-share",
             "--wb-app=resnet18", "--wb-explain", "--wrap=sleep 60"],
            env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        lines = [line.removeprefix("wattbatch: explain: ") for line in done.stderr.splitlines()]
        added = next(s for s in lines if s.startswith("sbatch options added: "))
        age = next(s for s in lines if s.startswith("Slurm snapshot taken "))
        out.append((" ".join(w for w in added.split()[3:] if not w.startswith("--comment=")),
                    float(age.split()[3])))
    return out


@pytest.fixture()
def server_env(localcluster, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    env = {**os.environ, **localcluster.env, "XDG_RUNTIME_DIR": str(run_dir),
           "PYTHONPATH": str(REPO), "WATTBATCH_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("WATTBATCH_SERVER", None)
    yield env
    sockets = list((run_dir / "wattbatch").glob("*.sock")) if (run_dir / "wattbatch").exists() \
        else []
    for sock in sockets:
        pids = subprocess.run(["pgrep", "-f", str(sock)], capture_output=True, text=True).stdout
        for pid in pids.split():
            os.kill(int(pid), 15)


def test_a_burst_through_the_server_places_jobs_as_live_snapshots_do(localcluster, server_env):
    cached = _burst(server_env)
    localcluster.cancel_all_jobs()
    live = _burst({**server_env, "WATTBATCH_SERVER": "0"})
    assert [a for a, _ in cached] == [a for a, _ in live]
    assert all(age == 0.0 for _, age in live)           # read at the decision, every time
    # a burst is seen from its third call on; a snapshot read after one call serves the calls
    # that come once it is in (how soon depends on the machine's load)
    assert sum(age > 0.0 for _, age in cached) >= 2, cached
    per_gpu: dict[str, int] = {}
    for added, _ in cached:
        per_gpu[added] = per_gpu.get(added, 0) + 1
    assert max(per_gpu.values()) <= 4, per_gpu             # EaCO's max_jobs_per_gpu
