"""EaCO's stale-pin repair (``policy/eaco/pins.py``) as a pure function of the snapshot."""

from __future__ import annotations

import pytest

from slurm_plugin.model import Cluster, Job
from slurm_plugin.policy.eaco.pins import stale_pins
from slurm_plugin.policy.eaco.settings import EacoSettings

S = EacoSettings(pin_wait_s=600.0)


def _cluster(*jobs: Job, kept: bool = False) -> Cluster:
    running = Job("1", "RUNNING", gpus=1, nodes=("n1",), submit_s=0.0, start_s=0.0)
    by_id = {j.job_id: j for j in (running, *jobs)}
    pinned = tuple(j for j in jobs if j.pending and j.pinned) if kept else None
    return Cluster(nodes=(), jobs=by_id, pending_pinned=pinned)


def _pinned(job_id: str, **kw) -> Job:
    return Job(job_id, "PENDING", shards=2, pinned=(("n1", "g0", 2),), **{"submit_s": 100.0, **kw})


@pytest.mark.parametrize("kept", [False, True])      # found in jobs (live), or kept (simulator)
def test_a_pinned_job_waiting_pin_wait_s_is_unpinned_and_no_other(kept):
    jobs = (_pinned("10"), _pinned("9"), _pinned("11", submit_s=200.0),
            _pinned("12", reason="JobHeldUser"), _pinned("13", begin_s=400.0),
            Job("14", "PENDING", gpus=1, submit_s=0.0))
    out = stale_pins(_cluster(*jobs, kept=kept), 700.0, S, "eaco")
    assert [(a.kind, a.job_id, a.gpus) for a in out] == [("unpin", "9", 1), ("unpin", "10", 1)]
    assert "pinned to 2 shares of GPU g0 on n1, waited 600 s (pin_wait_s 600)" in out[0].why


def test_nothing_is_unpinned_when_the_site_turns_it_off_or_the_pass_acted_on_the_job():
    cluster = _cluster(_pinned("9"))
    assert stale_pins(cluster, 700.0, EacoSettings(pin_wait_s=0.0), "eaco") == ()
    assert stale_pins(cluster, 700.0, S, "eaco", {"9"}) == ()
    assert len(stale_pins(cluster, 700.0, S, "eaco")) == 1
