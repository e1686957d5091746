"""Reconcile outcomes -> reconcile_action points (the dashboard's contract)."""

from __future__ import annotations

from slurm_plugin.model import Action
from slurm_plugin.reconcile import Outcome
from slurm_plugin.telemetry.actions import outcome_points


def test_points_of_a_pass():
    outcomes = [Outcome(Action("resize", "7", "eaco", gpus=2, why="grow"), "done"),
                Outcome(Action("resize", "8", "eaco", gpus=2, why='say "hi"'), "done"),
                Outcome(Action("defer", "9", "greenflow", begin_s=5.0), "failed", "defer: x")]
    points = outcome_points([o.as_dict() for o in outcomes], "c1", 1000.0)
    lines = [p.to_line() for p in points]
    assert lines[0] == ('reconcile_action,cluster=c1,kind=resize,policy=eaco,status=done '
                        'count=1i,detail="",gpus=2i,job_id="7",why="grow" 1000000000000')
    assert lines[1].endswith('why="say \\"hi\\"" 1000000001000')    # same tags: 1 us later
    assert "status=failed" in lines[2] and 'detail="defer: x"' in lines[2] and "gpus=0i" in lines[2]
