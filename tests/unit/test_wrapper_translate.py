"""Placement -> sbatch options: pinning, sharing, opt-outs, what cannot be changed."""

from __future__ import annotations

import time

from slurm_plugin.model import Cluster, Gpu, JobRequest, Node, Placement
from wrapper.request import GpuAsk, SbatchView
from wrapper.translate import Site, plan
from wrapper.wb_options import WbSettings

CLUSTER = Cluster(nodes=(Node("gpu1", gpus=tuple(
    Gpu("gpu1", i, gres_type=f"g{i}", memory_mib=32768, shards_total=4) for i in range(4))),))
REQ = JobRequest(name="j", gpus=1, app="bert")
ASK = GpuAsk(1, "", "gres")


def _plan(p, req=REQ, ask=ASK, view=None, site=Site(), **kw):
    return plan(p, req, view or SbatchView({"gres": "gpu:1,nvme:1"}), ask, WbSettings(), site,
                CLUSTER, **kw)


def test_shard_pinned_by_gpu_type_with_memory_cap():
    out = _plan(Placement("eaco", 1, nodes=("gpu1",), gpu_indexes=(2,), share_mode="shard",
                          shards=1))
    assert out.args == ["--nodelist=gpu1", "--gres=nvme:1,shard:g2:1",
                        "--comment=wb:policy=eaco;app=bert;share=shard:1"]
    assert out.template == "shared_gpu.sbatch.j2" and out.mem_cap_mib == 8192
    assert ("WATTBATCH_GPU_MEM_FRACTION", "0.25") in out.env


def test_untyped_share_exclusive_pin_resize_and_begin():
    untyped = _plan(Placement("p", 1, share_mode="shard", shards=2), site=Site(typed_gpus=False))
    assert "--gres=nvme:1,shard:2" in untyped.args
    pinned = _plan(Placement("p", 2, nodes=("gpu1",), gpu_indexes=(1, 3)))
    assert "--gres=nvme:1,gpu:g1:1,gpu:g3:1" in pinned.args and pinned.template == ""
    resized = _plan(Placement("p", 3), req=JobRequest(gpus=1, gpu_model="V100-SXM2-32GB", gpu_type="v100"))
    assert "--gres=nvme:1,gpu:v100:3" in resized.args
    begin = time.mktime((2030, 1, 2, 3, 4, 5, 0, 0, -1))
    assert "--begin=2030-01-02T03:04:05" in _plan(Placement("p", 1, begin_s=begin)).args


def test_user_comment_kept():
    out = _plan(Placement("p", 1), view=SbatchView({"comment": "my run"}))
    assert out.args == ["--comment=my run wb:policy=p;app=bert"]


def test_a_power_cap_is_in_the_tag_for_job_submit_lua_to_record():
    out = _plan(Placement("greenflow", 1, power_cap_w=187.6))
    assert out.args == ["--comment=wb:policy=greenflow;app=bert;cap=188"]


def test_a_deferrable_job_carries_its_slack_for_reconcile_to_read():
    from slurm_plugin.record import replace
    out = _plan(Placement("greenflow", 1), req=replace(REQ, slack_s=6 * 3600.0))
    assert out.args == ["--comment=wb:policy=greenflow;app=bert;slack=21600"]


def test_opt_outs_win_over_the_policy():
    p = Placement("p", 2, nodes=("gpu1",), gpu_indexes=(0,), share_mode="shard", shards=1,
                  begin_s=5.0, power_cap_w=200.0, batch_size=64)
    out = _plan(p, req=JobRequest(gpus=1, opt_out=frozenset(
        {"share", "defer", "resize", "place", "power", "batch"})))
    assert out.args == ["--comment=wb:policy=p"] and out.template == ""
    assert len(out.notes) == 6


def test_an_arrays_tasks_are_not_pinned_to_one_jobs_place():
    """A shard pinned for one job would stack every task of an array on that GPU: for an array
    the node list, GPU pins and sharing are dropped; a start time, a cap and a size stay."""
    p = Placement("p", 2, nodes=("gpu1",), gpu_indexes=(2,), share_mode="shard", shards=1,
                  begin_s=5.0, power_cap_w=200.0, gpu_memory_cap_mib=8192)
    out = _plan(p, req=JobRequest(name="j", gpus=1, app="bert", array_tasks=4))
    assert not any(a.startswith(("--nodelist", "--gres=nvme:1,shard")) for a in out.args)
    assert "--gres=nvme:1,gpu:2" in out.args and out.template != "shared_gpu.sbatch.j2"
    assert out.mem_cap_mib is None
    assert any(a.startswith("--begin=") for a in out.args)
    assert out.notes == ["array of 4 tasks: placement dropped (nodes, GPUs, sharing are chosen "
                         "for one job; Slurm places each task)"]
    one = _plan(p, req=JobRequest(name="j", gpus=1, app="bert", array_tasks=1))
    assert "--nodelist=gpu1" in one.args and not one.notes


def test_array_task_counts():
    from wrapper.request import array_task_count
    for spec, n in (("0-15", 16), ("1,3,5-7", 5), ("0-15:4", 4), ("1-8%2", 8), ("7", 1),
                    ("0-9:3,20", 5), ("x", 2), ("5-1", 2), ("1-4:0", 2), ("", 2)):
        assert array_task_count(spec) == n, spec


def test_gpu_changes_that_sbatch_cannot_take_back_are_dropped():
    share = Placement("p", 1, share_mode="shard", shards=1)
    out = _plan(share, ask=GpuAsk(1, "", "gpus-per-node"))
    assert not any(a.startswith("--gres") for a in out.args) and "--gpus-per-node" in out.notes[0]
    assert not any(a.startswith("--gres") for a in _plan(share, ask=GpuAsk(0, "", "gres", True)).args)
    mps = _plan(Placement("p", 1, share_mode="mps", shards=25))
    assert "not mps" in mps.notes[0]


def test_a_gpus_option_beside_gres_gpu_drops_the_gpu_change_too():
    share = Placement("p", 1, nodes=("gpu1",), gpu_indexes=(2,), share_mode="shard", shards=1)
    for field, option in (("gpus", "gpus"), ("gpus_per_node", "gpus-per-node"),
                          ("tres_per_task", "tres-per-task")):
        view = SbatchView({"gres": "gpu:1", field: "gres/gpu:1" if option[0] == "t" else "1"})
        out = _plan(share, view=view)           # the ask is read from --gres: source "gres"
        assert out.args == ["--nodelist=gpu1", "--comment=wb:policy=p;app=bert"], view
        assert out.notes == [f"GPU change dropped: GPUs asked with --{option}; use --gres=gpu:N "
                             "to let wattbatch place them"]
        assert out.share_mode == "exclusive" and out.gpus_kept and out.template == ""
        assert not any(k.startswith("WATTBATCH_SHARE") for k, _ in out.env)


def test_environment_block_only_when_needed_and_only_for_shell_scripts():
    capped = _plan(Placement("p", 1, power_cap_w=150.0))
    assert capped.template == "base.sbatch.j2" and ("WATTBATCH_POWER_CAP_W", "150") in capped.env
    python = _plan(Placement("p", 1, power_cap_w=150.0), shell_script=False)
    assert python.template == "" and "not a shell script" in python.notes[0]
    elastic = _plan(Placement("p", 1), req=JobRequest(gpus=1, min_gpus=1, max_gpus=4))
    assert elastic.template == "elastic.sbatch.j2"


def test_a_queue_tier_adds_to_the_jobs_own_nice():
    tiered = Placement("elastic", 1, nice=2)
    assert "--nice=200" in _plan(tiered).args
    assert "--nice=700" in _plan(tiered, view=SbatchView({"nice": "500"})).args
    assert "--nice=300" in _plan(tiered, view=SbatchView({"nice": None})).args     # bare --nice
    odd = _plan(tiered, view=SbatchView({"nice": "lots"})).args     # sbatch judges it alone
    assert not [a for a in odd if a.startswith("--nice")]
    assert not [a for a in _plan(Placement("elastic", 1)).args if a.startswith("--nice")]


def test_the_jobs_own_nice_is_recorded_in_the_tag_for_a_later_tier_change():
    """reconcile may move a waiting job to another tier; the tag keeps the job's own --nice
    (``nice=OWN``) so the new Nice adds to it too. Nothing recorded without a tier or an own
    value, or with a value sbatch alone judges."""
    from slurm_plugin.formats.admin_comment import recorded_nice
    tiered = Placement("elastic", 1, nice=2)

    def tag(**kw) -> str:
        return next(a for a in _plan(tiered, **kw).args if a.startswith("--comment="))
    assert tag(view=SbatchView({"nice": "7"})).endswith(";nice=7")
    assert recorded_nice("", tag(view=SbatchView({"nice": None}))[len("--comment="):]) == 100
    assert ";nice=" not in tag() and ";nice=" not in tag(view=SbatchView({"nice": "lots"}))
    untiered = _plan(Placement("elastic", 1), view=SbatchView({"nice": "7"})).args
    assert not [a for a in untiered if ";nice=" in a]


def test_mig_instance_asks_for_its_profile():
    """A MIG placement asks for one GPU of its profile's type on its node (MIG devices are
    typed by profile: the GPU index is not pinned), whatever GRES the site time-slices by."""
    mig = Placement("eaco", 1, nodes=("gpu1",), gpu_indexes=(2,), share_mode="mig",
                    mig_profile="3g.40gb")
    for site in (Site(), Site(share_gres="mps")):
        out = _plan(mig, site=site)
        assert out.args == ["--nodelist=gpu1", "--gres=nvme:1,gpu:3g.40gb:1",
                            "--comment=wb:policy=eaco;app=bert;share=mig:3g.40gb"]
        assert out.template == "shared_gpu.sbatch.j2" and out.mem_cap_mib is None
        assert out.env == [("WATTBATCH_JOB_POLICY", "eaco"), ("WATTBATCH_JOB_APP", "bert"),
                           ("WATTBATCH_SHARE_MODE", "mig"), ("WATTBATCH_MIG_PROFILE", "3g.40gb")]
        assert not out.notes
    refused = _plan(mig, req=JobRequest(name="j", gpus=1, app="bert",
                                        opt_out=frozenset({"share"})))
    assert not any("3g.40gb" in a for a in refused.args)
    assert refused.notes == ["opt-out share: shared GPU dropped"]
