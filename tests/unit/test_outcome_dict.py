"""`wattctl reconcile --json`: an action says what it sets, a power cap included."""

from __future__ import annotations

from slurm_plugin.model import Action
from slurm_plugin.reconcile import Outcome


def test_power_cap_action_names_its_cap_and_raised_limit():
    d = Outcome(Action("power_cap", "7", "greenflow", power_cap_w=150.0, time_limit_s=360.0,
                       why="carbon weight 1.0 this hour"), "done").as_dict()
    assert (d["power_cap_w"], d["time_limit_s"]) == (150.0, 360.0)
    removed = Outcome(Action("power_cap", "8", "greenflow", power_cap_w=None), "done").as_dict()
    assert "power_cap_w" in removed and removed["power_cap_w"] is None


def test_resize_action_names_its_nodes():
    d = Outcome(Action("resize", "9", "elastic", gpus=8, nodes=("gpu1", "gpu2"), num_nodes=2),
                "done").as_dict()
    assert (d["gpus"], d["nodes"], d["num_nodes"]) == (8, ["gpu1", "gpu2"], 2)
