"""scripts/test.sh stops only the clusters it started: a cluster that was up before it (the
demo's, a developer's) is still up after it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from slurm_plugin.localcluster import status

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]


def test_a_cluster_that_was_up_before_is_left_up(localcluster):
    assert status(localcluster.spec)["up"]
    env = dict(os.environ, WATTBATCH_TEST_SLURM="system", WATTBATCH_KEEP_CLUSTER="0")
    done = subprocess.run(["bash", "scripts/test.sh", "-q", "-m", "not cluster",
                           "tests/unit/test_history.py"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "test: local cluster left up" in done.stderr
    assert status(localcluster.spec)["up"], "scripts/test.sh stopped a cluster it did not start"
