"""The Slurm parsers on output recorded from real 22.05, 24.11 and 26.05 clusters.

tests/golden/slurm/<release>/ holds what ``record.py`` recorded there from one workload (a job
in every state the parsers read) and the model each must give. Besides the golden equality,
every release must give the *same* model of that workload: the normalisation is the point.
"""

from __future__ import annotations

import json

import pytest

from slurm_plugin.errors import InputError
from slurm_plugin.model import GpuUse
from slurm_plugin.slurm.formats import FormatError, detect
from slurm_plugin.holders import attach_jobs
from slurm_plugin.slurm.parse import (parse_jobs, parse_nodes, parse_sacct, parse_scontrol_record,
                                      plain)
from slurm_plugin.slurm.snapshot import build_cluster, describe

RELEASES = ("22.05", "24.11", "26.05")
# 26.05 also serves the data_parser versions of 24.11 to 25.11 on request (--json=v0.0.4x)
SERVED = ("26.05/v0.0.42", "26.05/v0.0.43", "26.05/v0.0.44")


class Recording:
    def __init__(self, d):
        self.dir = d
        lines = (d / "COMMANDS.txt").read_text().splitlines()
        self.ids = json.loads(lines[1].split(": ", 1)[1])
        self.squeue = json.loads((d / "squeue.json").read_text())
        self.nodes = json.loads((d / "nodes.json").read_text())

    def expected(self, name):
        return json.loads((self.dir / name).read_text())

    def jobs_by_name(self):
        by_id = {j.job_id: j for j in parse_jobs(self.squeue)}
        return {name: by_id[i] for name, i in self.ids.items()}


@pytest.fixture(scope="module", params=RELEASES)
def rec(request, golden_dir):
    return Recording(golden_dir / "slurm" / request.param)


# --- golden equality ------------------------------------------------------------------------

def test_jobs_match_golden(rec):
    assert plain(parse_jobs(rec.squeue)) == rec.expected("expected_jobs.json")


def test_nodes_match_golden(rec):
    jobs = parse_jobs(rec.squeue, active_only=True)
    assert plain(attach_jobs(parse_nodes(rec.nodes), jobs)) == rec.expected("expected_nodes.json")


def test_sacct_matches_golden(rec, utc):
    text = (rec.dir / "sacct.txt").read_text()
    assert plain(parse_sacct(text)) == rec.expected("expected_sacct.json")


def test_scontrol_matches_golden(rec):
    lines = (rec.dir / "scontrol_jobs.txt").read_text().splitlines()
    assert plain([parse_scontrol_record(s) for s in lines]) == \
        rec.expected("expected_scontrol.json")


@pytest.mark.parametrize("served", SERVED)
def test_older_data_parser_versions_give_the_same_model(golden_dir, served):
    native = Recording(golden_dir / "slurm" / "26.05")
    d = golden_dir / "slurm" / served
    squeue, nodes = (json.loads((d / f).read_text()) for f in ("squeue.json", "nodes.json"))
    assert detect(squeue, "squeue").data_parser == served.split("/")[1]
    assert plain(parse_jobs(squeue)) == native.expected("expected_jobs.json")
    assert plain(parse_nodes(nodes)) == plain(parse_nodes(native.nodes))


# --- one model whatever the release ---------------------------------------------------------

def test_every_release_reads_the_workload_the_same(rec):
    j = rec.jobs_by_name()
    big = j["big"]
    assert big.running and big.gpus == 4 and big.time_limit_s == 7200
    assert big.uses == tuple(GpuUse("gpu1", i) for i in range(4))
    multi = j["multi2"]
    assert multi.running and multi.app == "resnet50" and multi.time_limit_s == 3600
    assert multi.uses == (GpuUse("gpu2", 0), GpuUse("gpu2", 1))
    assert j["shardA"].uses == (GpuUse("gpu2", 3, 2),) and j["shardA"].shards == 2
    assert j["shardB"].uses == (GpuUse("gpu2", 3, 1),) and j["shardB"].gpus == 0
    (u,) = j["shard3"].uses
    assert u.node == "gpu3" and u.shards == 3
    assert j["shard6"].pending and j["shard6"].shards == 6 and j["shard6"].reason == "Resources"
    two = j["twonode"]
    assert two.num_nodes == 2 and two.nodes == ("gpu3", "gpu4") and two.gpus == 1
    assert two.uses == (GpuUse("gpu3", 3), GpuUse("gpu4", 3))
    s2 = j["shard2node"]
    assert s2.num_nodes == 2 and s2.shards == 1
    assert [(x.node, x.shards) for x in s2.uses] == [("gpu3", 1), ("gpu4", 1)]
    assert j["cpuonly"].running and j["cpuonly"].gpus == 0 and not j["cpuonly"].uses
    resized = j["resized"]
    assert resized.running and resized.restart_count == 1 and resized.gpus == 2
    assert len(resized.uses) == 2 and {x.node for x in resized.uses} == {"gpu4"}
    assert j["pinned"].pending and j["pinned"].pinned == (("gpu1", "g2", 0),)
    assert j["resources"].pending and j["resources"].reason == "Resources"
    assert j["held"].reason == "JobHeldUser" and j["held"].start_s is None
    later = j["later"]
    assert later.reason == "BeginTime" and later.start_s > later.submit_s + 3500
    assert (j["fail3"].state, j["fail3"].exit_code) == ("FAILED", 3)
    assert (j["ok"].state, j["ok"].exit_code) == ("COMPLETED", 0)
    assert j["ok"].end_s >= j["ok"].start_s >= j["ok"].submit_s > 1.7e9
    assert (j["cancelme"].state, j["cancelme"].exit_code) == ("CANCELLED", 128 + 15)
    timeout = j["timeout"]
    assert timeout.state == "TIMEOUT" and timeout.time_limit_s == 60
    assert timeout.reason == "TimeLimit" and timeout.end_s - timeout.start_s >= 60
    for job in j.values():
        assert (job.end_s is None) == (job.state in ("RUNNING", "PENDING"))
        assert (job.exit_code is None) == (job.end_s is None)


def test_every_release_gives_the_same_gpu_holders(rec):
    ids = rec.ids
    cluster = build_cluster(rec.nodes, rec.squeue, "wattbatch", 1.0)
    assert [n.name for n in cluster.nodes] == ["gpu1", "gpu2", "gpu3", "gpu4"]
    assert all(n.available and n.cpus == 16 and n.memory_mib == 64000 and n.features == ("v100",)
               for n in cluster.nodes)
    assert all([(g.index, g.gres_type, g.shards_total) for g in n.gpus]
               == [(i, f"g{i}", 4) for i in range(4)] for n in cluster.nodes)
    assert ids["fail3"] not in cluster.jobs and ids["held"] in cluster.jobs
    gpu1 = cluster.node("gpu1")
    assert [g.exclusive_job for g in gpu1.gpus] == [ids["big"]] * 4   # the pin hides nobody
    shared = cluster.node("gpu2").gpus[3]
    assert shared.shard_jobs == (ids["shardA"], ids["shardB"]) and shared.shards_used == 3
    assert shared.exclusive_job is None and cluster.node("gpu2").gpus[2].is_free
    assert cluster.node("gpu3").gpus[3].exclusive_job == ids["twonode"]
    held = sum(g.shards_used for n in cluster.nodes for g in n.gpus)
    assert held == 2 + 1 + 3 + 1 + 1      # shardA, shardB, shard3, shard2node on two nodes


def test_sacct_exit_codes(rec, utc):
    recs = {r.job_id: r for r in parse_sacct((rec.dir / "sacct.txt").read_text())}
    fail = recs[rec.ids["fail3"]]
    assert fail.state == "FAILED" and fail.exit_code == 3 and fail.signal == 0
    assert recs[rec.ids["multi2"]].alloc_tres["gres/gpu"] == "2"
    assert recs[rec.ids["timeout"]].state == "TIMEOUT"
    assert recs[rec.ids["cancelme"]].state == "CANCELLED"
    assert all(not r.state.endswith("by 0") for r in recs.values())
    assert recs[rec.ids["resources"]].nodes == ()
    assert recs[rec.ids["resources"]].start_s is None


def test_scontrol_records_name_the_request(rec):
    shown = {r["JobName"]: r for r in map(parse_scontrol_record,
                                          (rec.dir / "scontrol_jobs.txt").read_text().splitlines())}
    assert shown["multi2"]["TresPerNode"].replace("gres/", "gres:") == "gres:gpu:2"
    assert shown["shardA"]["TresPerNode"].replace("gres/", "gres:") == "gres:shard:g3:2"
    assert shown["resized"]["Restarts"] == "1"


def test_describe_lists_uses_and_holders(rec):
    data = describe(rec.nodes, rec.squeue)
    assert data["slurm"]["release"].startswith(rec.dir.name)
    jobs = {j["name"]: j for j in data["jobs"]}
    assert jobs["shardA"]["uses"] == [["gpu2", 3, 2]]
    assert jobs["timeout"]["time_limit_s"] == 60 and jobs["fail3"]["exit_code"] == 3
    gpu = data["nodes"][1]["gpus"][3]
    assert gpu["shards_used"] == 3 and gpu["shard_jobs"] == [rec.ids["shardA"], rec.ids["shardB"]]


# --- versions and shapes it does not know ----------------------------------------------------

def test_grouped_sinfo_rows_of_newer_releases_are_refused(golden_dir):
    sinfo = json.loads((golden_dir / "slurm" / "24.11" / "sinfo.json").read_text())
    with pytest.raises(FormatError, match="scontrol --json show nodes"):
        parse_nodes(sinfo)


def test_unknown_data_parser_is_a_clear_error(rec):
    doc = json.loads(json.dumps(rec.squeue))
    meta = doc["meta"]
    if "data_parser" in meta["plugin"]:
        meta["plugin"]["data_parser"] = "data_parser/v0.0.99"
    else:
        meta["plugin"]["type"] = "openapi/v0.0.99"
    with pytest.raises(FormatError, match=r"squeue --json of Slurm \d+\.\d+.*v0\.0\.99"):
        parse_jobs(doc)


def test_output_without_meta_is_refused():
    with pytest.raises(FormatError, match="no 'meta'"):
        parse_jobs({"jobs": []})
    with pytest.raises(InputError, match="not a JSON object"):
        detect([], "squeue --json")


@pytest.mark.parametrize("key, value", [("node_count", "two"), ("job_state", 7),
                                        ("exit_code", "0:0"), ("submit_time", [1])])
def test_a_field_of_the_wrong_shape_names_release_and_field(rec, key, value):
    doc = json.loads(json.dumps(rec.squeue))
    doc["jobs"][0][key] = value
    with pytest.raises(FormatError) as err:
        parse_jobs(doc)
    text = str(err.value)
    assert f"field {key}" in text and rec.dir.name in text and str(doc["jobs"][0]["job_id"]) in text
