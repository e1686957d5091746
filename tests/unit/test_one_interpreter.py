"""One interpreter of reconcile actions for the live reconciler and the simulator: on the same
job, ``actuate.interpret`` (the simulator's, no journal) and ``actuate.execute`` (live,
journaled) make the same calls on their port, in the same order, for every action kind, on
a running job and on a pending one."""

from __future__ import annotations

import pytest

from slurm_plugin.actuate import JobView, execute, interpret
from slurm_plugin.journal import Journal
from slurm_plugin.model import Action


class Recording:
    """A job as Slurm shows it, changed by each step as Slurm would; every call recorded."""

    def __init__(self, state: str) -> None:
        self.state, self.held, self.tres_per_node, self.num_nodes = state, False, "gres:gpu:1", 1
        self.calls: list[tuple] = []

    def observe(self, job_id):
        self.calls.append(("observe", job_id))
        return JobView(self.state, self.held, self.tres_per_node, self.num_nodes)

    def requeue_hold(self, job_id):
        self.calls.append(("requeue_hold", job_id))
        self.state, self.held = "PENDING", True

    def set_gpus(self, job_id, gpus, num_nodes=None):
        self.calls.append(("set_gpus", job_id, gpus, num_nodes))
        self.tres_per_node = f"gres:gpu:{gpus}"
        self.num_nodes = num_nodes or self.num_nodes

    def whole_gpus(self, job_id):
        self.calls.append(("whole_gpus", job_id))

    def set_tier(self, job_id, tier):
        self.calls.append(("set_tier", job_id, tier))

    def release(self, job_id):
        self.calls.append(("release", job_id))
        self.held = False

    def start_now(self, job_id):
        self.calls.append(("start_now", job_id))

    def defer(self, job_id, begin_s):
        self.calls.append(("defer", job_id, begin_s))

    def cancel(self, job_id):
        self.calls.append(("cancel", job_id))
        self.state = "CANCELLED"

    def set_power_cap(self, job_id, power_cap_w):
        self.calls.append(("set_power_cap", job_id, power_cap_w))

    def set_time_limit(self, job_id, time_limit_s):
        self.calls.append(("set_time_limit", job_id, time_limit_s))

    def advise(self, job_id, batch_size, lr_scale, from_batch_size, why):
        self.calls.append(("advise", job_id, batch_size, lr_scale, from_batch_size, why))

    def steps(self) -> list[str]:
        return [c[0] for c in self.calls if c[0] != "observe"]


ACTIONS = {
    "resize": Action("resize", "7", "p", gpus=2, why="t"),
    "resize+batch+tier": Action("resize", "7", "p", gpus=2, num_nodes=1, batch_size=256,
                                lr_scale=2.0, nice=1, why="t"),
    "move_exclusive": Action("move_exclusive", "7", "p", gpus=1, why="t"),
    "unpin": Action("unpin", "7", "p", gpus=1, why="t"),
    "defer": Action("defer", "7", "p", begin_s=4e9, why="t"),
    "cancel": Action("cancel", "7", "p", why="t"),
    "power_cap": Action("power_cap", "7", "p", power_cap_w=200.0, why="t"),
    "power_cap+limit": Action("power_cap", "7", "p", power_cap_w=200.0, time_limit_s=7200.0,
                              why="t"),
    "batch": Action("batch", "7", "p", batch_size=128, lr_scale=1.5, why="t",
                    predicted={"from_batch_size": 64.0}),
    "observe": Action("observe", "7", "p", predicted={"k": 1.0}),
    "note": Action("note", "7", "p", why="t"),
}

# The steps each runs (the test's own record of them: both paths must give these)
EXPECTED = {
    ("resize", "RUNNING"): ["requeue_hold", "set_gpus", "release", "start_now"],
    ("resize", "PENDING"): ["set_gpus"],
    ("resize+batch+tier", "RUNNING"): ["requeue_hold", "set_gpus", "advise", "set_tier",
                                       "release", "start_now"],
    ("resize+batch+tier", "PENDING"): ["set_gpus", "advise", "set_tier"],
    ("move_exclusive", "RUNNING"): ["requeue_hold", "whole_gpus", "release", "start_now"],
    ("move_exclusive", "PENDING"): [],          # not held by us: nothing to move
    ("unpin", "RUNNING"): [],                   # it started where it was pinned
    ("unpin", "PENDING"): ["whole_gpus"],
    ("defer", "RUNNING"): [],
    ("defer", "PENDING"): ["defer"],
    ("cancel", "RUNNING"): ["cancel"],
    ("cancel", "PENDING"): ["cancel"],
    ("power_cap", "RUNNING"): ["set_power_cap"],
    ("power_cap", "PENDING"): ["set_power_cap"],
    ("power_cap+limit", "RUNNING"): ["set_time_limit", "set_power_cap"],
    ("power_cap+limit", "PENDING"): ["set_time_limit", "set_power_cap"],
    ("batch", "RUNNING"): ["advise"],
    ("batch", "PENDING"): ["advise"],
    ("observe", "RUNNING"): [],
    ("observe", "PENDING"): [],
    ("note", "RUNNING"): [],
    ("note", "PENDING"): [],
}


@pytest.mark.parametrize("name,state", sorted(EXPECTED))
def test_live_and_simulated_actions_make_the_same_calls(tmp_path, name, state):
    action = ACTIONS[name]
    simulated, live = Recording(state), Recording(state)
    interpret(simulated, action)
    outcome = execute(Journal(tmp_path / "journal.jsonl"), live, "a1", action, [], False)
    assert simulated.calls == live.calls     # the steps, their arguments and every read
    assert live.steps() == EXPECTED[name, state]
    # an action whose job needs none of its steps ends skipped; one without steps is done
    skipped = not EXPECTED[name, state] and action.kind not in ("observe", "note")
    assert outcome.status == ("skipped" if skipped else "done")


def test_a_step_the_job_no_longer_needs_is_left_out_by_both(tmp_path):
    """A job shown held already (live: a hold that took effect before a crash) is not held
    again, nor its GPU count, already the one asked, set again: both only release it."""
    simulated, live = Recording("PENDING"), Recording("PENDING")
    for port in (simulated, live):
        port.held, port.tres_per_node = True, "gres:gpu:2"
    interpret(simulated, ACTIONS["resize"])
    execute(Journal(tmp_path / "journal.jsonl"), live, "a1", ACTIONS["resize"], [], False)
    assert simulated.calls == live.calls
    assert live.steps() == ["release", "start_now"]
