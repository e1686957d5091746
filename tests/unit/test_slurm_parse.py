"""Slurm parsers on golden output recorded from the local cluster (tests/golden/slurm/)."""

from __future__ import annotations

import json
import stat
import time

import pytest

from slurm_plugin import config
from slurm_plugin.errors import CommandError, InputError
from slurm_plugin.model import GpuUse
from slurm_plugin.slurm import actions
from slurm_plugin.slurm.cli import slurm, slurm_json
from slurm_plugin.slurm.parse import (GresItem, app_from_comment, attach_jobs, expand_hostlist,
                                      parse_gres, parse_index_list, parse_jobs, parse_nodes,
                                      parse_sacct, parse_scontrol_record, plain)
from slurm_plugin.slurm.snapshot import build_cluster
from slurm_plugin.slurm.synthetic import META_22_05, sinfo_json, squeue_json


@pytest.fixture(scope="module")
def golden(golden_dir):
    d = golden_dir / "slurm"
    ids = json.loads((d / "COMMANDS.txt").read_text().splitlines()[1].split(": ", 1)[1])
    return {"dir": d, "ids": ids,
            "sinfo": json.loads((d / "sinfo.json").read_text()),
            "squeue": json.loads((d / "squeue.json").read_text())}


def expected(golden, name):
    return json.loads((golden["dir"] / name).read_text())


@pytest.fixture()
def utc(monkeypatch):
    """sacct prints local time; the golden file was recorded in UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


# --- golden files --------------------------------------------------------------------------

def test_jobs_match_golden(golden):
    assert plain(parse_jobs(golden["squeue"])) == expected(golden, "expected_jobs.json")


def test_nodes_match_golden(golden):
    nodes = attach_jobs(parse_nodes(golden["sinfo"]), parse_jobs(golden["squeue"]))
    assert plain(nodes) == expected(golden, "expected_nodes.json")


def test_sacct_matches_golden(golden, utc):
    text = (golden["dir"] / "sacct.txt").read_text()
    assert plain(parse_sacct(text)) == expected(golden, "expected_sacct.json")


def test_scontrol_matches_golden(golden):
    text = (golden["dir"] / "scontrol_job.txt").read_text()
    assert plain(parse_scontrol_record(text)) == expected(golden, "expected_scontrol_job.json")


# --- what the golden workload must show ----------------------------------------------------

def test_golden_jobs_have_gpu_indexes_and_requests(golden):
    ids = golden["ids"]
    jobs = {j.job_id: j for j in parse_jobs(golden["squeue"])}
    multi = jobs[ids["multi2"]]
    assert multi.running and multi.gpus == 2 and multi.app == "resnet50"
    assert multi.uses == (GpuUse("gpu1", 0), GpuUse("gpu1", 1))
    assert multi.time_limit_s == 3600
    a, b = jobs[ids["shardA"]], jobs[ids["shardB"]]
    assert (a.shards, b.shards) == (2, 1) and a.gpus == b.gpus == 0
    assert a.uses == (GpuUse("gpu2", 1, 2),) and b.uses == (GpuUse("gpu2", 1, 1),)
    assert jobs[ids["shard3"]].uses == (GpuUse("gpu3", 0, 3),)
    two = jobs[ids["twonode"]]
    assert two.num_nodes == 2 and two.nodes == ("gpu3", "gpu4")
    assert two.uses == (GpuUse("gpu3", 3), GpuUse("gpu4", 3))
    resized = jobs[ids["resized"]]
    assert resized.restart_count == 1 and resized.gpus == 2 and len(resized.uses) == 2
    assert jobs[ids["big"]].pending and jobs[ids["big"]].reason == "Resources"
    assert jobs[ids["held"]].reason == "JobHeldUser" and jobs[ids["held"]].start_s is None
    later = jobs[ids["later"]]
    assert later.reason == "BeginTime" and later.start_s > later.submit_s + 3500
    assert jobs[ids["fail3"]].state == "FAILED" and jobs[ids["fail3"]].exit_code == 3
    assert jobs[ids["ok"]].exit_code == 0 and jobs[ids["ok"]].end_s is not None
    assert jobs[ids["cpuonly"]].gpus == 0 and not jobs[ids["cpuonly"]].uses


def test_golden_cluster_gpu_holders(golden):
    ids = golden["ids"]
    cluster = build_cluster(golden["sinfo"], golden["squeue"], "wattbatch", 1.0)
    assert ids["fail3"] not in cluster.jobs and ids["held"] in cluster.jobs
    gpu1 = cluster.node("gpu1")
    assert [g.exclusive_job for g in gpu1.gpus] == [ids["multi2"], ids["multi2"],
                                                   ids["resized"], ids["resized"]]
    shared = cluster.node("gpu2").gpus[1]
    assert shared.shard_jobs == (ids["shardA"], ids["shardB"]) and shared.shards_used == 3
    assert shared.shards_total == 4 and shared.exclusive_job is None
    assert [g.is_free for g in cluster.node("gpu4").gpus] == [True, True, True, False]
    assert all(g.model == "V100" and g.gres_type == f"g{g.index}"
               for n in cluster.nodes for g in n.gpus)


def test_golden_sacct_exit_codes(golden, utc):
    recs = {r.job_id: r for r in parse_sacct((golden["dir"] / "sacct.txt").read_text())}
    fail = recs[golden["ids"]["fail3"]]
    assert fail.state == "FAILED" and fail.exit_code == 3 and fail.signal == 0
    assert recs[golden["ids"]["multi2"]].alloc_tres["gres/gpu"] == "2"
    assert all(not r.state.endswith("by 0") for r in recs.values())
    assert recs[golden["ids"]["big"]].nodes == () and recs[golden["ids"]["big"]].start_s is None


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
        [(0, "a100", "", 3), (1, "a100", "", 2)]


def test_sacct_without_fields_is_rejected():
    with pytest.raises(InputError, match="ExitCode"):
        parse_sacct("JobID|State\n1|FAILED\n")


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
    return tmp_path


@pytest.fixture()
def cfg(fake_bin):
    return config.load(environ={}).with_overrides(
        {"slurm.bin_dir": str(fake_bin), "slurm.conf": "/etc/x/slurm.conf"})


def test_runner_applies_bin_dir_and_slurm_conf(cfg):
    assert slurm("sinfo", ["-h"], cfg).stdout.strip() == "/etc/x/slurm.conf -h"


def test_json_errors_are_errors_not_empty_data(cfg):
    with pytest.raises(CommandError, match="controller is not reachable") as err:
        slurm_json("squeue", [], cfg)
    assert "Failed while looking for jobs" in str(err.value)


def test_unreachable_controller_message_names_config(cfg):
    with pytest.raises(CommandError) as err:
        actions.release("7", cfg)
    assert "/etc/x/slurm.conf" in str(err.value) and "scontrol release 7" in str(err.value)


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


def test_pending_job_pinned_to_a_typed_gpu_holds_it_in_the_snapshot(golden):
    squeue = json.loads(json.dumps(golden["squeue"]))
    base = next(j for j in squeue["jobs"] if j["job_state"] == "PENDING")
    pinned = dict(base, job_id=901, required_nodes="gpu3", tres_per_node="gres:shard:g2:3")
    whole = dict(base, job_id=902, required_nodes="gpu4", tres_per_node="gres:gpu:g0:1")
    loose = dict(base, job_id=903, required_nodes="gpu[3-4]", tres_per_node="gres:shard:g1:1")
    squeue["jobs"] = [pinned, whole, loose]
    cluster = build_cluster(golden["sinfo"], squeue, "test", 0.0)
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


def test_sbatch_deadline_is_the_jobs_deadline(golden):
    raw = dict(golden["squeue"]["jobs"][0], deadline=1795260000)
    doc = golden["squeue"]
    assert parse_jobs(dict(doc, jobs=[raw]))[0].deadline_s == 1795260000.0
    assert parse_jobs(dict(doc, jobs=[dict(raw, deadline=0)]))[0].deadline_s is None
