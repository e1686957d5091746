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
    env.pop("WATTBATCH_TEST_TIER", None)    # the script as a user runs it, not one tier of it
    # A short test of the real-cluster tier: the script brings the cluster "up" (already up)
    # and must leave it so.
    done = subprocess.run(["bash", "scripts/test.sh", "-q", "tests/cluster/test_bad_input_live.py"
                           "::test_sacct_rows_with_the_delimiter_in_name_and_comment"],
                          cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "[slurm system] test: local cluster left up" in done.stdout
    assert status(localcluster.spec)["up"], "scripts/test.sh stopped a cluster it did not start"
