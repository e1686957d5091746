"""``Cluster.limit_use`` from Slurm's accounting: the GPU-weighted share of their time limits
that recently ended jobs used."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from slurm_plugin.model import LIMIT_USE_WINDOW_S as WINDOW_S
from slurm_plugin.slurm.limit_use import limit_use_of
from slurm_plugin.slurm.parse import AcctRecord

NOW = 1_000_000.0


def _rec(job_id, state="COMPLETED", gpus="1", elapsed_s=100.0, limit_s=1000.0,
         end_s=NOW - 60) -> AcctRecord:
    tres = {"cpu": "1"} | ({"gres/gpu": gpus} if gpus is not None else {})
    return AcctRecord(job_id=job_id, name="x", user="u", partition="p", state=state,
                      exit_code=0, signal=0, derived_exit_code=0, submit_s=0.0, start_s=0.0,
                      end_s=end_s, elapsed_s=elapsed_s, time_limit_s=limit_s, nodes=("n",),
                      alloc_tres=MappingProxyType(tres), req_tres=MappingProxyType({}),
                      comment="")


def test_share_is_weighted_by_gpus():
    # 1 GPU x 100 of 1000 s and 3 GPUs x 500 of 1000 s: (100 + 1500) / (1000 + 3000)
    got = limit_use_of([_rec("1"), _rec("2", gpus="3", elapsed_s=500.0)], NOW)
    assert got == pytest.approx(1600 / 4000)


def test_only_ended_gpu_jobs_with_a_limit_in_the_window_count():
    recs = [_rec("1"),
            _rec("run", state="RUNNING", end_s=None, elapsed_s=999.0),
            _rec("cpu", gpus=None, elapsed_s=999.0),
            _rec("old", elapsed_s=999.0, end_s=NOW - WINDOW_S - 1),
            _rec("nolimit", elapsed_s=999.0, limit_s=None),
            _rec("bad", gpus="x", elapsed_s=999.0)]
    assert limit_use_of(recs, NOW) == pytest.approx(0.1)
    assert limit_use_of(recs[1:], NOW) is None


def test_a_job_killed_at_its_limit_used_all_of_it():
    got = limit_use_of([_rec("t", state="TIMEOUT", elapsed_s=1030.0),
                        _rec("c", state="CANCELLED", elapsed_s=0.0)], NOW)
    assert got == pytest.approx(0.5)
