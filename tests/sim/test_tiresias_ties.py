"""Jobs submitted at the same second that only their names order: tiresias must not preempt
one for another (the simulator, like Slurm, breaks the tie by submission order, not by name,
and would restart the preempted job first). With a restart longer than a reconcile pass,
such a preemption repeated every pass kept every job from progressing, and the run never
ended."""

from __future__ import annotations

from pathlib import Path

from slurm_plugin.policy import get_policy
from slurm_plugin.sim.carbon import load_carbon
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.trace import read_trace

# Pollux format: the names sort otherwise than the lines (yolov3-0 is first in the file)
TRACE = """name,time,application,num_replicas,batch_size
yolov3-0,600,yolov3,4,64
bert-1,600,bert,3,12
deepspeech2-2,600,deepspeech2,4,80
cifar10-3,600,cifar10,4,4096
deepspeech2-4,1200,deepspeech2,4,80
bert-5,1205,bert,4,32
bert-6,1265,bert,4,16
deepspeech2-7,1265,deepspeech2,2,160
"""


class Thrashing(BaseException):
    """Out of the simulator's fail-open (it catches Exception): the test fails, not hangs."""


def test_simultaneous_jobs_ordered_only_by_name_finish_without_thrashing(tmp_path: Path):
    path = tmp_path / "ties.csv"
    path.write_text(TRACE)
    jobs = read_trace(path, "pollux")
    spec = ClusterSpec(nodes=1, gpus_per_node=4, shards_per_gpu=0, reconcile_interval_s=30.0,
                       restart_cost_s=90.0)
    policy = get_policy("tiresias")
    reconcile, stops = policy.reconcile, []

    def counted(ctx):
        actions = reconcile(ctx)
        stops.extend(a.job_id for a in actions if a.kind == "resize")
        if len(stops) > 100:
            raise Thrashing(f"{len(stops)} preemptions of {len(jobs)} jobs: {stops[-6:]}")
        return actions

    policy.reconcile = counted
    r = Simulator(jobs, spec, policy, seed=1,
                  carbon=load_carbon(None, "GB", jobs[0].submit_s)).run()
    assert r["jobs_finished"] == len(jobs) and r["policy_fallbacks"] == 0
    # each preemption moves a job to a lower queue (two thresholds): a few per job at most
    assert len(stops) <= 2 * len(jobs), stops
