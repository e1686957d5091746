"""The demo's closing report: what each stage did, and the twin of its jobs for the simulator."""

from __future__ import annotations

from slurm_plugin import demo
from slurm_plugin.sim.trace import read_trace

STACK = "pal+eaco+greenflow+elastic"


def test_each_stage_gets_its_own_lines_with_the_jobs_that_got_them():
    explained = {
        "a": ["wattbatch: explain: policy " + STACK,
              "wattbatch: explain: sizing (elastic): not elastic: unchanged",
              "wattbatch: explain: timing (greenflow): start +0 s, cap 125.0",
              "wattbatch: explain: sharing (eaco): exclusive GPUs"],
        "b": ["wattbatch: explain: sizing (elastic): not elastic: unchanged",
              "wattbatch: explain: placement (pal): gpu1:0 x1.000"],
    }
    actions = [{"kind": "resize", "job_id": "7", "policy": "elastic", "status": "done",
                "why": "grows to 2"},
               {"kind": "note", "job_id": "8", "policy": "pal", "status": "done", "why": "x"},
               {"kind": "observe", "job_id": "", "policy": "greenflow", "status": "done"}]
    got = demo.stage_report(STACK, explained, actions)
    assert list(got) == ["sizing (elastic)", "timing (greenflow)", "sharing (eaco)",
                         "placement (pal)"]
    assert got["sizing (elastic)"] == ["a, b: not elastic: unchanged",
                                       "reconcile: resize job 7 (done): grows to 2"]
    assert got["timing (greenflow)"] == ["a: start +0 s, cap 125.0"]
    assert got["placement (pal)"] == ["b: gpu1:0 x1.000"]


def test_a_single_policy_is_one_stage():
    got = demo.stage_report("eaco", {"a": ["wattbatch: explain: eaco (eaco): x"]}, [])
    assert list(got) == ["eaco"]


def test_the_twin_holds_the_gpu_jobs_with_their_run_times_and_later_begins(tmp_path):
    path = demo.twin_jobs(tmp_path)
    jobs = read_trace(path, "canonical", None)
    gpu_jobs = [w for w in demo.WORKLOAD if any(o.startswith("--gres=gpu:") for o in w[1])]
    assert len(jobs) == len(gpu_jobs) == 5
    by_app = {(j.app, j.num_gpus): j for j in jobs}
    assert by_app[("transformer", 2)].duration_s == 80 * 0.25
    later = by_app[("wavenet", 1)]
    assert later.submit_s - min(j.submit_s for j in jobs) == 30
