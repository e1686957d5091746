"""Which jobs use a GPU read through NVML (``node/nvml_attribution.py``) and the cached Slurm
job list behind their classes and shares (``node/job_lookup.py``). Pure: no NVML."""

from __future__ import annotations

import pytest

from slurm_plugin.errors import CommandError
from slurm_plugin.model import GpuUse, Job, Resident
from slurm_plugin.node.job_lookup import NEW_JOB_REFRESH_S, CachedJobs
from slurm_plugin.node.nvml_attribution import (GpuProcesses, mig_residents, mps_estimate,
                                                process_residents)
from slurm_plugin.physics import group_slowdowns, job_class

JOBS = {11: "5", 12: "5", 21: "6", 31: "7", 900: None, 3000: None}.get


def test_time_sliced_jobs_sum_their_processes_and_leave_out_others():
    procs = GpuProcesses((11, 12, 21, 900), (), {11: 30.0, 12: 20.0, 21: 15.0, 900: 1.0}, 70.0)
    assert process_residents(procs, JOBS, {"5": 2, "6": 1}, {"5": "vgg16"}) == (
        Resident("5", 2, 50.0, "vgg16"), Resident("6", 1, 15.0, ""))


def test_a_job_with_a_context_but_no_sample_used_nothing_and_one_with_samples_only_counts():
    # 31 has left the process list but its samples are newer than the last pass
    procs = GpuProcesses((11, 21), (), {11: 40.0, 31: 10.0}, 50.0)
    got = process_residents(procs, JOBS, {}, {})
    assert got == (Resident("5", 0, 40.0), Resident("6", 0, 0.0), Resident("7", 0, 10.0))


def test_without_per_process_utilisation_the_jobs_carry_none():
    procs = GpuProcesses((11, 21), (), None, 50.0)
    assert [r.util_pct for r in process_residents(procs, JOBS, {}, {})] == [None, None]


def test_mps_clients_are_their_jobs_and_the_server_is_no_ones():
    # the server (3000) holds every sample, as NVML reports MPS; here it even maps to job 5
    procs = GpuProcesses((3000,), (21, 31), {3000: 60.0}, 80.0)
    job_of = {21: "6", 31: "7", 3000: "5"}.get
    got = process_residents(procs, job_of, {"6": 50, "7": 50}, {"6": "vgg16", "7": "alexnet"})
    assert [(r.job_id, r.shares, r.app) for r in got] == [("6", 50, "vgg16"),
                                                          ("7", 50, "alexnet")]
    assert sum(r.util_pct for r in got) == pytest.approx(60.0)       # the server's samples
    assert got[0].util_pct > got[1].util_pct          # vgg16 works the GPU harder than alexnet


def test_mps_pool_is_divided_by_shares_times_the_classes_group_utilisation():
    got = mps_estimate(["a", "b"], 90.0, {"a": 25, "b": 75}, {"a": "lstm", "b": "resnet18"})
    slow = group_slowdowns(["lstm", "resnet18"])
    wa = 25 * job_class("lstm").util_at(1) / slow[0]
    wb = 75 * job_class("resnet18").util_at(1) / slow[1]
    assert got == pytest.approx({"a": 90 * wa / (wa + wb), "b": 90 * wb / (wa + wb)})
    # nothing known of the jobs: an even division (the default class, one share each)
    assert mps_estimate(["a", "b"], 40.0, {}, {}) == pytest.approx({"a": 20.0, "b": 20.0})


def test_mps_uses_the_clients_own_samples_when_every_job_has_some():
    procs = GpuProcesses((3000,), (21, 31), {21: 35.0, 31: 5.0, 3000: 99.0}, 80.0)
    got = process_residents(procs, JOBS, {}, {})
    assert [r.util_pct for r in got] == [35.0, 5.0]


def test_mps_without_samples_divides_the_gpus_utilisation_and_without_it_knows_none():
    procs = GpuProcesses((3000,), (21, 31), {}, 80.0)
    assert sum(r.util_pct for r in process_residents(procs, JOBS, {}, {})) == pytest.approx(80)
    procs = GpuProcesses((3000,), (21, 31), None, None)
    assert [r.util_pct for r in process_residents(procs, JOBS, {}, {})] == [None, None]


def test_mps_call_failed_leaves_the_clients_unseen_and_the_server_no_ones():
    procs = GpuProcesses((3000,), None, {3000: 50.0}, 60.0)
    assert process_residents(procs, JOBS, {"6": 40, "7": 60}, {"6": "vgg16"}) == ()


def test_mig_jobs_hold_the_slices_of_their_devices():
    devices = [(0, 3, (11,)), (1, 2, (21,)), (2, 1, (12,)), (3, 1, ())]
    got = mig_residents(devices, JOBS, {"6": "alexnet"})
    assert [(r.job_id, r.shares, r.app) for r in got] == [("5", 4, ""), ("6", 2, "alexnet")]
    # no utilisation per instance: the class's solo one on its share of the 7 slices
    assert [r.util_pct for r in got] == pytest.approx(
        [4 / 7 * job_class("resnet18").util_at(1), 2 / 7 * job_class("alexnet").util_at(1)])


# --- the Slurm job list, cached -------------------------------------------------------------
class Squeue:
    def __init__(self):
        self.calls, self.fail = 0, False

    def __call__(self):
        self.calls += 1
        if self.fail:
            raise CommandError(["squeue"], 1, "slurm_load_jobs error: Unable to contact "
                                              "slurm controller")
        return (Job("5", "RUNNING", app="vgg16", uses=(GpuUse("n1", 0, 2),)),)


def test_jobs_are_asked_once_per_refresh_and_sooner_for_a_job_not_listed():
    now, squeue = [0.0], Squeue()
    jobs = CachedJobs(squeue, 60.0, clock=lambda: now[0])
    assert [j.job_id for j in jobs()] == ["5"] and squeue.calls == 1
    now[0] = 5.0
    jobs({"5"}), jobs({"9"})
    assert squeue.calls == 1                  # job 9 unknown, but the answer is only 5 s old
    now[0] = NEW_JOB_REFRESH_S
    jobs({"5"})
    assert squeue.calls == 1                  # every job known: wait for the refresh
    jobs({"9"})
    assert squeue.calls == 2
    now[0] += 60.0
    jobs()
    assert squeue.calls == 3


def test_a_failed_ask_is_raised_until_the_next_one_is_due_then_recovers():
    now, squeue = [0.0], Squeue()
    jobs = CachedJobs(squeue, 60.0, clock=lambda: now[0])
    squeue.fail = True
    for t in (0.0, 1.0, 30.0):
        now[0] = t
        with pytest.raises(CommandError, match="Unable to contact"):
            jobs()
    assert squeue.calls == 1                  # one attempt per interval, not one per caller
    squeue.fail, now[0] = False, 60.0
    assert [j.app for j in jobs()] == ["vgg16"] and squeue.calls == 2


def test_refresh_zero_never_asks():
    squeue = Squeue()
    assert CachedJobs(squeue, 0.0)({"5"}) == () and squeue.calls == 0
