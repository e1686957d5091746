"""The live path of an elastic job: its range recorded through the comment tag, a new node
count rendered and set, a pending job resized without a requeue, the emulated job's speed."""

from __future__ import annotations

from slurm_plugin.actuate import JobView
from slurm_plugin.emulated_train import job_gpus
from slurm_plugin.model import Action, Placement
from slurm_plugin.record import replace
from slurm_plugin.formats.admin_comment import recorded_batch, recorded_elastic

from test_reconcile import Fixed, Recorder, run
from test_wrapper_translate import ASK, REQ, _plan

ELASTIC = replace(REQ, min_gpus=1, max_gpus=8)


def test_the_range_goes_into_the_tag_and_back_out_of_admin_comment():
    out = _plan(Placement("elastic", 1), req=ELASTIC)
    assert out.args[-1] == "--comment=wb:policy=elastic;app=bert;elastic=1-8"
    assert out.template == "elastic.sbatch.j2"
    recorded = "wb:uid=1000;declared_app=bert;tagged=1;policy=elastic;elastic=1-8"
    assert recorded_elastic(recorded) == (1, 8)
    assert recorded_elastic("wb:uid=1;policy=elastic") is None
    for bad in ("wb:uid=1;elastic=4-2", "wb:uid=1;elastic=0-2", "wb:uid=1;elastic=1-x",
                "wb:uid=1;elastic=1-2x", "user text elastic=1-4"):
        assert recorded_elastic(bad) is None, bad


def test_a_new_node_count_is_rendered_as_nodes():
    out = _plan(Placement("elastic", 4, num_nodes=2), req=ELASTIC, ask=ASK)
    assert "--nodes=2" in out.args and "--gres=nvme:1,gpu:4" in out.args
    same = _plan(Placement("elastic", 2), req=ELASTIC)
    assert not any(a.startswith("--nodes") for a in same.args)


class NodesRecorder(Recorder):
    """The fake Slurm of test_reconcile, with the job's node count."""

    def set_gpus(self, job_id, gpus, num_nodes=None):
        self._check("set_gpus")
        nodes = self.job.num_nodes if num_nodes is None else num_nodes
        self.job = replace(self.job, tres_per_node=f"gres:gpu:{gpus}", num_nodes=nodes)
        self._done("set_gpus", job_id, gpus, num_nodes)


def test_a_resize_across_nodes_sets_the_node_count_once(tmp_path):
    act = NodesRecorder(tres="gres:gpu:4")
    grow = Action("resize", "7", "fixed", gpus=4, num_nodes=2, why="grow")
    res = run(tmp_path, Fixed(grow), act)
    assert [o.status for o in res.outcomes] == ["done"]
    assert ("set_gpus", "7", 4, 2) in act.calls      # per node unchanged, the nodes are not
    assert act.job.num_nodes == 2


def test_a_pending_job_is_resized_without_requeue_hold_or_start_now(tmp_path):
    act = NodesRecorder(state="PENDING")
    res = run(tmp_path, Fixed(Action("resize", "7", "fixed", gpus=2, why="admit")), act)
    assert [o.status for o in res.outcomes] == ["done"]
    assert [c[0] for c in act.calls] == ["set_gpus"]
    assert act.job == JobView("PENDING", False, "gres:gpu:2")


def test_a_job_held_by_a_crashed_resize_still_goes_the_whole_way(tmp_path):
    act = NodesRecorder(state="PENDING", held=True)           # the hold took effect, unjournaled
    res = run(tmp_path, Fixed(Action("resize", "7", "fixed", gpus=2, why="x")), act)
    assert [o.status for o in res.outcomes] == ["done"]
    assert [c[0] for c in act.calls] == ["set_gpus", "release", "start_now"]


def test_emulated_job_counts_its_gpus():
    assert job_gpus({}) == 1
    assert job_gpus({"SLURM_GPUS_ON_NODE": "4"}) == 4
    assert job_gpus({"CUDA_VISIBLE_DEVICES": "0,2", "SLURM_JOB_NUM_NODES": "2"}) == 4
    assert job_gpus({"SLURM_GPUS_ON_NODE": "0"}) == 1


def test_site_defaults_are_the_policy_defaults_and_parse_with_the_policy_keys():
    from slurm_plugin import config
    from slurm_plugin.policy.elastic.settings import ElasticSettings, parse_settings

    cfg = config.load(site_file=None, environ={})
    assert parse_settings(config.policy_settings(cfg, "elastic")) == ElasticSettings()
    tuned = config.load(site_file=None, environ={"WATTBATCH_ELASTIC_MIN_INTERVAL_S": "5"})
    assert parse_settings(config.policy_settings(tuned, "elastic")).min_interval_s == 5.0


def test_the_same_count_on_a_later_run_is_another_action(tmp_path):
    """Grown 2->3, then 3->4, a job shrunk back to 3 is not skipped as done before."""
    act = NodesRecorder(tres="gres:gpu:2")
    assert run(tmp_path, Fixed(Action("resize", "7", "fixed", gpus=3, why="grow", run=1)),
               act).outcomes[0].status == "done"
    act.job = replace(act.job, tres_per_node="gres:gpu:4")
    again = run(tmp_path, Fixed(Action("resize", "7", "fixed", gpus=3, why="shrink", run=3)), act)
    assert again.outcomes[0].status == "done", again.outcomes[0].detail
    same = run(tmp_path, Fixed(Action("resize", "7", "fixed", gpus=3, why="shrink", run=3)), act)
    assert same.outcomes[0].status == "skipped"


def test_a_batch_range_and_rule_are_read_back_from_admin_comment():
    assert recorded_batch("wb:uid=1;policy=ones;batch=64-1024;lr=sqrt") == ((64, 1024), "sqrt")
    assert recorded_batch("wb:uid=1;policy=ones;batch=64-1024") == ((64, 1024), "")
    assert recorded_batch("wb:uid=1;batch=1024-64;lr=cubic") == (None, "")
    assert recorded_batch("") == (None, "")
