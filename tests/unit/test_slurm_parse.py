"""Slurm parser pieces, the command runner and the actions (golden files: test_slurm_golden)."""

from __future__ import annotations

import json
import stat

import pytest

from slurm_plugin import config
from slurm_plugin.errors import CommandError, InputError
from slurm_plugin.slurm import actions
from slurm_plugin.slurm.cli import slurm, slurm_document, slurm_json
from slurm_plugin.holders import attach_jobs
from slurm_plugin.slurm.parse import (GresItem, app_from_comment, array_task_count,
                                      expand_hostlist, parse_gres, parse_index_list, parse_jobs,
                                      parse_nodes, parse_sacct, plain)
from slurm_plugin.slurm.snapshot import build_cluster
from slurm_plugin.slurm.synthetic import META_22_05, documents, sinfo_json, squeue_json


@pytest.fixture(scope="module", params=("22.05", "24.11", "26.05"))
def golden(request, golden_dir):
    d = golden_dir / "slurm" / request.param
    return {"dir": d, "nodes": json.loads((d / "nodes.json").read_text()),
            "squeue": json.loads((d / "squeue.json").read_text())}


# --- pieces ----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, items", [
    ("gpu:g0:1(IDX:0),gpu:g1:0(IDX:)", (GresItem("gpu", "g0", 1, (0,)),
                                        GresItem("gpu", "g1", 0, ()))),
    ("gres:gpu:2", (GresItem("gpu", "", 2),)),
    ("gpu:3(IDX:0-1,3)", (GresItem("gpu", "", 3, (0, 1, 3)),)),
    ("gpu:a100:4(S:0-1),shard:16", (GresItem("gpu", "a100", 4), GresItem("shard", "", 16))),
    ("gpu:2080:1", (GresItem("gpu", "2080", 1),)),
    ("mps:g1:50(IDX:1)", (GresItem("mps", "g1", 50, (1,)),)),
    ("(null)", ()),
    ("", ()),
])
def test_parse_gres(text, items):
    assert parse_gres(text) == items


def test_index_list_and_errors():
    assert parse_index_list("0-2,5") == (0, 1, 2, 5)
    assert parse_index_list("N/A") == ()
    with pytest.raises(InputError, match="'x'"):
        parse_index_list("0,x")


def test_expand_hostlist():
    assert expand_hostlist("gpu[1-3,5],cpu01") == ("gpu1", "gpu2", "gpu3", "gpu5", "cpu01")
    assert expand_hostlist("n[08-10]") == ("n08", "n09", "n10")
    assert expand_hostlist("") == ()


def test_app_from_comment():
    assert app_from_comment("app=bert") == "bert"
    assert app_from_comment("x=1,app=gpt2 y") == "gpt2"
    assert app_from_comment("myapp=no") == ""


def test_untyped_gpus_and_shards_spread_by_position():
    nodes = parse_nodes({"meta": META_22_05, "nodes": [{"name": "a", "state": "idle", "state_flags": ["DRAIN"],
                                    "gres": "gpu:a100:2(S:0),shard:5"}]})
    assert nodes[0].state == "idle+drain" and not nodes[0].available
    assert [(g.index, g.model, g.gres_type, g.shards_total) for g in nodes[0].gpus] == \
        [(0, "A100-SXM4-80GB", "", 3), (1, "A100-SXM4-80GB", "", 2)]


@pytest.mark.parametrize("gres, want", [
    ("gpu:g0:1,gpu:g1:1", [(0, "V100", "g0"), (1, "V100", "g1")]),          # the site's model
    ("gpu:h100_g1:1,gpu:h100_g0:1", [(0, "H100-80GB-HBM3", "h100_g0"),
                                     (1, "H100-80GB-HBM3", "h100_g1")]),
    ("gpu:nvidia_a100-sxm4-40gb:2", [(0, "A100-SXM4-40GB", ""), (1, "A100-SXM4-40GB", "")]),
    ("gpu:tpu9_g0:1", [(0, "tpu9", "tpu9_g0")]),              # not catalogued: the name as is
    ("gpu:2", [(0, "V100", ""), (1, "V100", "")]),
])
def test_a_gpus_model_is_read_from_its_gres_type(gres, want):
    (node,) = parse_nodes({"meta": META_22_05, "nodes": [{"name": "a", "state": "idle",
                                                          "gres": gres}]})
    assert [(g.index, g.model, g.gres_type) for g in node.gpus] == want


def test_sacct_without_fields_is_rejected():
    with pytest.raises(InputError, match="ExitCode"):
        parse_sacct("JobID|State\n1|FAILED\n")


def test_synthetic_documents_of_each_release_give_one_model():
    models = {r: plain(build_cluster(*documents(r, 20, 8, 300), "s", 0.0))
              for r in ("22.05", "24.11", "26.05")}
    assert models["22.05"]["jobs"] and models["22.05"] == models["24.11"] == models["26.05"]
    assert documents("24.11", 2, 8, 10)[1]["meta"]["plugin"]["data_parser"].endswith("v0.0.42")


def test_synthetic_snapshot_is_consistent():
    cluster = build_cluster(sinfo_json(20, 8), squeue_json(20, 8, 300), "s", 0.0)
    assert len(cluster.nodes) == 20 and cluster.gpu_count == 160
    held = {}
    for job in cluster.jobs.values():
        for use in job.uses:
            assert use.index < 8
            held.setdefault((use.node, use.index), []).append(use.shards)
    for uses in held.values():   # a GPU is held whole by one job or shared by shard jobs
        assert uses == [0] or (0 not in uses and sum(uses) <= 4)


# --- the command runner and actions (fake Slurm binaries) ----------------------------------

@pytest.fixture()
def fake_bin(tmp_path):
    """A bin dir whose squeue/sbatch print their argv and SLURM_CONF (or fail like Slurm)."""
    def make(name: str, body: str) -> None:
        path = tmp_path / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    make("squeue", 'echo "{\\"errors\\": [{\\"source\\": \\"slurm_load_jobs\\", '
                   '\\"description\\": \\"Failed while looking for jobs\\"}], \\"jobs\\": []}"\n')
    make("sbatch", 'cat >/dev/null; echo "42;wattbatch"\n')
    make("scontrol", 'echo "slurm_update error: Unable to contact slurm controller '
                     '(connect failure) $*" >&2; exit 1\n')
    make("sinfo", 'echo "$SLURM_CONF $*"\n')
    make("sacct", 'echo "sacct: error: slurm_persist_conn_open_without_init: failed to open '
                  'persistent connection to host:localhost:6819: Connection refused" >&2; '
                  'echo "sacct: error: Problem talking to the database: Connection refused" >&2; '
                  'exit 1\n')
    return tmp_path


@pytest.fixture()
def cfg(fake_bin, monkeypatch):
    monkeypatch.delenv("SLURM_CONF", raising=False)
    return config.load(environ={}).with_overrides(
        {"slurm.bin_dir": str(fake_bin), "slurm.conf": "/etc/x/slurm.conf"})


def test_runner_applies_bin_dir_and_slurm_conf(cfg, monkeypatch):
    assert slurm("sinfo", ["-h"], cfg).stdout.strip() == "/etc/x/slurm.conf -h"
    monkeypatch.setenv("SLURM_CONF", "/home/me/slurm.conf")      # the user's own wins
    assert slurm("sinfo", ["-h"], cfg).stdout.strip() == "/home/me/slurm.conf -h"


@pytest.mark.parametrize("read", [slurm_json, slurm_document])
def test_json_errors_are_errors_not_empty_data(cfg, read):
    with pytest.raises(CommandError, match="controller is not reachable") as err:
        read("squeue", [], cfg)
    assert "Failed while looking for jobs" in str(err.value)
    with pytest.raises(CommandError, match=r"sinfo --json\n.*printed invalid JSON"):
        read("sinfo", [], cfg)          # prints "$SLURM_CONF --json"


def test_unreachable_controller_message_names_config(cfg):
    with pytest.raises(CommandError) as err:
        actions.release("7", cfg)
    assert "/etc/x/slurm.conf" in str(err.value) and "scontrol release 7" in str(err.value)


def test_unreachable_database_names_slurmdbd_not_the_controller(cfg):
    with pytest.raises(CommandError) as err:
        slurm("sacct", ["-X"], cfg)
    assert "slurmdbd is not reachable" in str(err.value)
    assert "controller is not reachable" not in str(err.value)


def test_submit_returns_id_from_parsable(cfg):
    assert actions.submit(["-J", "x"], "#!/bin/sh\ntrue\n", cfg) == "42"


def test_actions_reject_bad_input(cfg):
    with pytest.raises(InputError, match="GPU count"):
        actions.set_gpu_count("7", 0, cfg)
    with pytest.raises(InputError, match="not a Slurm job id"):
        actions.cancel("7; rm", cfg)


def test_slurm_time_is_local(utc):
    assert actions.slurm_time(0) == "1970-01-01T00:00:00"


def test_whole_gpu_tres_asks_for_every_shard_of_the_same_gpus():
    from slurm_plugin.slurm.actions import whole_gpu_tres
    assert whole_gpu_tres("gres:shard:g2:2", "shard", 4) == ("gres:shard:g2:4", True)
    assert whole_gpu_tres("gres:shard:1", "shard", 4) == ("gres:shard:4", False)
    assert whole_gpu_tres("gres:shard:g0:1,gres:shard:g3:2", "shard", 4) == \
        ("gres:shard:g0:4,gres:shard:g3:4", True)
    assert whole_gpu_tres("gres:gpu:2", "shard", 4) == ("gres:gpu:2", False)
    assert whole_gpu_tres("gres:mps:25", "mps", 100) == ("gres:mps:100", False)
    assert whole_gpu_tres("", "shard", 4) == ("", False)
    # Slurm 24.11+ prints TresPerNode=gres/shard:2; update takes the gres: spelling
    assert whole_gpu_tres("gres/shard:2", "shard", 4) == ("gres:shard:4", False)
    assert whole_gpu_tres("gres/shard:g1:1,gres/gpu:1", "shard", 4) == \
        ("gres:shard:g1:4,gres/gpu:1", True)


def test_exclusive_gpu_tres_turns_shares_into_whole_gpus():
    from slurm_plugin.slurm.actions import exclusive_gpu_tres
    assert exclusive_gpu_tres("gres/shard:g1:2", "shard") == "gres:gpu:1"
    assert exclusive_gpu_tres("gres:shard:3", "shard") == "gres:gpu:1"
    assert exclusive_gpu_tres("gres/shard:g0:1,gres/shard:g2:1", "shard") == "gres:gpu:2"
    assert exclusive_gpu_tres("gres/mps:50,gres/gpu:1", "mps") == "gres:gpu:2"
    assert exclusive_gpu_tres("gres/gpu:2", "shard") == "gres:gpu:2"
    assert exclusive_gpu_tres("", "shard") == ""


def test_pending_job_pinned_to_a_typed_gpu_holds_it_in_the_snapshot(golden):
    squeue = json.loads(json.dumps(golden["squeue"]))
    base = next(j for j in squeue["jobs"] if j["job_state"] in ("PENDING", ["PENDING"]))
    pinned = dict(base, job_id=901, required_nodes="gpu3", tres_per_node="gres:shard:g2:3")
    whole = dict(base, job_id=902, required_nodes="gpu4", tres_per_node="gres:gpu:g0:1")
    loose = dict(base, job_id=903, required_nodes="gpu[3-4]", tres_per_node="gres:shard:g1:1")
    squeue["jobs"] = [pinned, whole, loose]
    cluster = build_cluster(golden["nodes"], squeue, "test", 0.0)
    assert cluster.jobs["901"].pinned == (("gpu3", "g2", 3),)
    assert cluster.jobs["903"].pinned == ()                       # two nodes: no single GPU
    g = cluster.node("gpu3").gpus[2]
    assert g.shard_jobs == ("901",) and g.shards_used == 3 and not g.is_free
    assert cluster.node("gpu4").gpus[0].exclusive_job == "902"
    assert sum(1 for n in cluster.nodes for g in n.gpus if not g.is_free) == 2


def test_types_shared_by_several_gpus_of_a_node_pin_nothing():
    from slurm_plugin.model import Gpu, Job, Node
    node = Node("n1", gpus=tuple(Gpu("n1", i, gres_type="v100") for i in range(2)))
    job = Job("5", "PENDING", pinned=(("n1", "v100", 0),))
    assert attach_jobs([node], [job])[0].gpus == node.gpus


@pytest.mark.parametrize("text, count", [
    ("", 1), ("4-9", 6), ("1,3,5-7", 5), ("0-10:2", 6), ("0-99%4", 100), ("7", 1),
    ("1-x", 2), ("0-4:0", 2)])
def test_array_task_count(text, count):
    assert array_task_count(text) == count


def test_a_pending_array_record_stands_for_its_tasks_and_keeps_no_elastic_or_batch_range(golden):
    """squeue lists an array's tasks that have not started as one record (``1_[4-9]``, as the
    real 22.05 cluster shows it: array_task_string "4-9"). A resize of that record would resize
    every one of them, so nothing may be resized there; a task, once started, is its own job."""
    doc = golden["squeue"]
    base = next(j for j in doc["jobs"] if j["job_state"] in ("PENDING", ["PENDING"]))
    tag = "wb:app=resnet18;elastic=1-4;batch=64-512"
    rec = dict(base, job_id=910, array_task_string="4-9", admin_comment=tag)
    one = dict(base, job_id=911, array_task_string="", admin_comment=tag)
    pending, task = parse_jobs(dict(doc, jobs=[rec, one]))
    assert (pending.array_tasks, pending.min_gpus, pending.max_batch_size) == (6, None, None)
    assert (task.array_tasks, task.min_gpus, task.max_gpus, task.max_batch_size) == (1, 1, 4, 512)


def test_sbatch_deadline_is_the_jobs_deadline(golden):
    doc = golden["squeue"]
    legacy = "Slurm" in doc["meta"]
    def when(epoch):
        return epoch if legacy else {"set": bool(epoch), "infinite": False, "number": epoch}
    raw = dict(doc["jobs"][0], deadline=when(1795260000))
    assert parse_jobs(dict(doc, jobs=[raw]))[0].deadline_s == 1795260000.0
    assert parse_jobs(dict(doc, jobs=[dict(raw, deadline=when(0))]))[0].deadline_s is None


def test_sacct_rows_with_bars_in_name_and_comment_are_read(golden_dir, utc):
    text = (golden_dir / "slurm" / "24.11" / "sacct.txt").read_text().splitlines()
    header, row = text[0], text[1].split("|")
    row[1], row[-1] = "a|b||c", "app=bert|x"
    recs = parse_sacct("\n".join([header, "|".join(row)]))
    assert (recs[0].name, recs[0].comment) == ("a|b||c", "app=bert|x")
    assert recs[0].elapsed_s == float(text[1].split("|")[10])
    with pytest.raises(InputError, match="line 2: cannot read the row"):
        parse_sacct("\n".join([header, "|".join(row[:5] + ["x|y"] + row[5:])]))
