"""The journaled steps of a resize: a batch adds ``advise`` and a queue tier adds
``set_tier``, both after the GPU count is set and before the job is released; other actions
and a resize with neither keep their steps."""

from __future__ import annotations

import pytest

from slurm_plugin.actuate import STEPS, _with_extra_steps
from slurm_plugin.model import Action


@pytest.mark.parametrize("batch,nice,extra", [
    (None, None, ()), (256, None, ("advise",)), (None, 1, ("set_tier",)),
    (256, 2, ("advise", "set_tier")), (None, 0, ("set_tier",)),
])
def test_resize_steps(batch, nice, extra):
    a = Action("resize", "7", "p", gpus=2, batch_size=batch, nice=nice)
    assert _with_extra_steps(STEPS["resize"], a) == \
        ("requeue_hold", "set_gpus", *extra, "release", "start_now")
    assert _with_extra_steps(("set_gpus",), a) == ("set_gpus", *extra)   # a pending job


def test_other_actions_keep_their_steps():
    a = Action("move_exclusive", "7", "p", nice=1)
    assert _with_extra_steps(STEPS["move_exclusive"], a) == STEPS["move_exclusive"]
    assert Action("resize", "7", "p", gpus=1, nice=1).key != Action("resize", "7", "p",
                                                                   gpus=1).key


@pytest.mark.parametrize("tres,gpus,needed", [
    ("gres:gpu:2", 2, False), ("gres:gpu:4", 2, True),
    ("gres:gpu:v100:2", 2, False),                  # typed: kept, not made untyped
    ("gres:gpu:g1:1,gres:gpu:g3:1", 2, False),      # pinned GPUs: kept
    ("gres:gpu:g1:1,gres:gpu:g3:1", 1, True),
    ("gres:shard:2", 1, True), ("gres:gpu:1,gres:shard:1", 1, True),   # shares: made whole
    ("", 1, True), ("gres:gpu:lots", 1, True),
])
def test_a_pending_jobs_gpu_count_is_set_only_where_it_differs(tres, gpus, needed):
    """A resize at the job's own count (a queue-tier move) leaves its request as the user or the
    policy typed or pinned it; any other count, or shares, is set (untyped)."""
    from slurm_plugin.actuate import JobView, _decide
    view = JobView(state="PENDING", held=False, tres_per_node=tres)
    assert _decide("set_gpus", Action("resize", "7", "p", gpus=gpus, nice=1), view, [],
                   False) is needed


def test_an_unpin_takes_whole_gpus_only_while_the_job_is_pending():
    """``unpin`` has one step, on a pending job (nothing is held or restarted); a job that
    started meanwhile started where it was pinned: nothing is left to do."""
    from slurm_plugin.actuate import Finished, JobView, _decide
    a = Action("unpin", "7", "eaco", gpus=1)
    assert STEPS["unpin"] == ("whole_gpus",)
    pending = JobView(state="PENDING", held=False, tres_per_node="gres:shard:g2:2")
    assert _decide("whole_gpus", a, pending, [], False) is True
    with pytest.raises(Finished, match="job 7 is running: it started where it was pinned"):
        _decide("whole_gpus", a, JobView(state="RUNNING", held=False, tres_per_node=""), [],
                False)
