"""Slurm JSON read through msgspec's typed records (``decode``, ``document``, ``typed_dialects``)
gives the model the ``json`` path gives, on every recorded document and on synthetic ones of
every release; a document of a shape not foreseen is read the ``json`` way, with its result,
its warnings and its errors word for word."""

from __future__ import annotations

import json
import math
import random
import re
import subprocess
import sys

import pytest

from slurm_plugin.errors import WattError
from slurm_plugin.slurm import document
from slurm_plugin.slurm.document import SlurmJson
from slurm_plugin.slurm.parse import parse_jobs, parse_nodes, plain
from slurm_plugin.slurm.snapshot import build_cluster, describe
from slurm_plugin.slurm.synthetic import RELEASES, documents

from test_slurm_fuzz import DOCUMENTS, GOLDEN, _mutate

SIZES = ((3, 2, 10), (20, 8, 300), (64, 4, 1500))     # nodes, GPUs per node, jobs


@pytest.fixture()
def json_reads(monkeypatch):
    """How many times a document was read the ``json`` way (the fallback)."""
    count = [0]
    loads = document._loads

    def counted(text):
        count[0] += 1
        return loads(text)
    monkeypatch.setattr(document, "_loads", counted)
    return count


def both(nodes_text, squeue_text):
    """(the json trees, the SlurmJson documents) of two documents."""
    return ((json.loads(nodes_text), json.loads(squeue_text)),
            (SlurmJson(nodes_text), SlurmJson(squeue_text)))


def outcome(read, *docs):
    """``read(*docs)``, or the error it raises, as a comparable value."""
    try:
        return plain(read(*docs))
    except WattError as exc:
        return f"{type(exc).__name__}: {exc}"


def snapshot(nodes, squeue):
    cluster = build_cluster(nodes, squeue, "c", 1.0)
    return cluster, cluster.warnings


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_recorded_documents_read_the_same_typed(doc, json_reads):
    d = GOLDEN / doc
    trees, typed = both((d / "nodes.json").read_bytes(), (d / "squeue.json").read_bytes())
    assert json_reads[0] == 0
    assert build_cluster(*typed, "c", 1.0) == build_cluster(*trees, "c", 1.0)
    assert parse_jobs(typed[1]) == parse_jobs(trees[1])
    assert parse_nodes(typed[0], "A100") == parse_nodes(trees[0], "A100")
    assert describe(*typed) == describe(*trees)
    assert json_reads[0] == 0               # no record needed the json path


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("nodes, gpus, jobs", SIZES)
def test_synthetic_documents_read_the_same_typed(release, nodes, gpus, jobs, json_reads):
    texts = [json.dumps(doc) for doc in documents(release, nodes, gpus, jobs, seed=nodes)]
    trees, typed = both(*texts)
    assert build_cluster(*typed, "c", 1.0) == build_cluster(*trees, "c", 1.0)
    assert parse_jobs(typed[1]) == parse_jobs(trees[1])
    assert json_reads[0] == 0


def recorded(doc="24.11"):
    return (json.loads((GOLDEN / doc / "nodes.json").read_text()),
            json.loads((GOLDEN / doc / "squeue.json").read_text()))


def job_of(squeue, state):
    return next(j for j in squeue["jobs"] if state in json.dumps(j["job_state"]))


# values of the foreseen shapes that take the readers' less common turns: read typed
FORESEEN = [
    ("24.11", "RUNNING", "restart_cnt", 2**64 - 1),
    ("24.11", "RUNNING", "restart_cnt", {"set": False, "infinite": False, "number": 7}),
    ("24.11", "PENDING", "time_limit", {"set": True, "infinite": True, "number": 5}),
    ("24.11", "COMPLETED", "exit_code",
     {"status": ["CORE_DUMPED"], "signal": {"id": {"set": True, "infinite": False,
                                                   "number": 11}}}),
    ("24.11", "COMPLETED", "exit_code", {"status": ["ERROR"], "return_code": 4}),
    ("24.11", "COMPLETED", "exit_code", {"status": ["INVALID"]}),
    ("24.11", "RUNNING", "job_state", ["RUNNING", "COMPLETING"]),
    ("24.11", "RUNNING", "job_resources", None),
    ("24.11", "RUNNING", "job_id", "77"),
    ("24.11", "PENDING", "eligible_time", {"set": True, "infinite": False, "number": 2**40}),
    ("24.11", "PENDING", "array_task_string", "1-9%2"),
    ("22.05", "COMPLETED", "exit_code", 9),
    ("22.05", "RUNNING", "time_limit", None),
    ("22.05", "RUNNING", "job_resources", {"allocated_nodes": []}),
    ("22.05", "PENDING", "admin_comment", "wb:uid=1;declared_app=bert;elastic=1-4;cap=250"),
]


@pytest.mark.parametrize("doc, state, key, value", FORESEEN)
def test_less_common_values_read_the_same_typed(doc, state, key, value, json_reads):
    nodes, squeue = recorded(doc)
    job_of(squeue, state)[key] = value
    trees, typed = both(json.dumps(nodes), json.dumps(squeue))
    assert outcome(snapshot, *typed) == outcome(snapshot, *trees)
    assert json_reads[0] == 0


@pytest.mark.parametrize("doc, key, value", [
    ("24.11", "features", "v100,nvlink"), ("24.11", "state", ["IDLE", "DRAIN"]),
    ("24.11", "cpus", {"set": True, "infinite": False, "number": 8}),
    ("22.05", "state_flags", ["DRAIN", ""]), ("22.05", "state", None),
    ("22.05", "features", "v100,,nvlink")])
def test_node_fields_read_the_same_typed(doc, key, value, json_reads):
    nodes, squeue = recorded(doc)
    nodes["nodes"][1][key] = value
    trees, typed = both(json.dumps(nodes), json.dumps(squeue))
    assert outcome(snapshot, *typed) == outcome(snapshot, *trees)
    assert json_reads[0] == 0


# a field of a shape the types do not foresee (msgspec refuses it), or a value only the json
# path reads right (a reader raises Unforeseen): either way read from the json tree
UNFORESEEN = [
    ("24.11", "RUNNING", "name", 123),                     # a number where a string was
    ("24.11", "RUNNING", "node_count", 1.0),               # a float where an integer was
    ("24.11", "RUNNING", "time_limit", "60"),
    ("24.11", "RUNNING", "job_resources", {"nodes": {}}),  # {}: no allocation, no error
    ("24.11", "COMPLETED", "exit_code", {"status": ["SIGNALED"], "signal": "TERM"}),
    ("24.11", "PENDING", "submit_time", {"set": True, "infinite": False, "number": 2**64}),
    ("22.05", "RUNNING", "node_count", {"set": True, "infinite": False, "number": 1}),
    ("22.05", "RUNNING", "job_state", ["RUNNING"]),
    ("22.05", "RUNNING", "restart_cnt", -2**63 - 1),
    ("22.05", "PENDING", "job_id", True),
    ("24.11", "PENDING", "job_id", ""),
]


@pytest.mark.parametrize("doc, state, key, value", UNFORESEEN)
def test_unforeseen_shapes_read_the_json_way(doc, state, key, value, json_reads):
    nodes, squeue = recorded(doc)
    job_of(squeue, state)[key] = value
    trees, typed = both(json.dumps(nodes), json.dumps(squeue))
    assert outcome(snapshot, *typed) == outcome(snapshot, *trees)
    assert outcome(parse_jobs, typed[1]) == outcome(parse_jobs, trees[1])
    assert json_reads[0] >= 1


def test_fallback_keeps_the_warning_naming_command_release_and_record(json_reads):
    nodes, squeue = recorded()
    job = job_of(squeue, "RUNNING")
    job["gres_detail"] = ["gpu:g0:1(IDX:x)"]
    typed = SlurmJson(json.dumps(squeue))
    assert json_reads[0] == 0               # decodes typed; the record reads wrong
    with pytest.raises(WattError) as err:
        parse_jobs(typed)
    message = str(err.value)
    assert message.startswith("slurm: squeue --json of Slurm 24.11.5 (data_parser v0.0.42)")
    assert f"field gres_detail[0] (of {job['job_id']})" in message
    _, warnings = snapshot(SlurmJson(json.dumps(nodes)), typed)
    (warning,) = warnings
    assert str(job["job_id"]) in warning and warning.endswith("job left out")
    assert json_reads[0] == 1               # the tree, decoded once for both reads


def test_documents_that_are_not_json_or_not_objects():
    with pytest.raises(ValueError) as err:
        SlurmJson(b"{not json")
    with pytest.raises(ValueError, match=re.escape(str(err.value))):
        json.loads("{not json")
    bad_name = b'{"meta": {}, "jobs": [{"job_id": 5, "name": "a\xffb"}]}'
    with pytest.raises(UnicodeDecodeError):     # UTF-8, as reading the file as text was
        SlurmJson(bad_name)
    # a command's output: undecodable bytes as U+FFFD, as every output is read
    assert SlurmJson.from_output(bad_name).tree["jobs"][0]["name"] == "a\ufffdb"
    assert SlurmJson.from_output(bad_name).typed is not None
    # bytes nobody reads are not looked at
    assert SlurmJson(b'{"meta": {}, "jobs": [], "not_read": "\xff"}').typed is not None
    nan = SlurmJson(b'{"meta": {}, "x": NaN}')     # json reads it, msgspec does not
    assert nan.typed is None and math.isnan(nan.tree["x"])
    assert outcome(parse_jobs, SlurmJson(b"[1]")) == outcome(parse_jobs, [1])
    assert outcome(parse_jobs, SlurmJson(b"{}")) == outcome(parse_jobs, {})


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_fuzzed_documents_read_the_same_typed(doc):
    """The fuzzing of test_slurm_fuzz: whatever the json path gives (a cluster, warnings, an
    error), the typed path gives too."""
    squeue = (GOLDEN / doc / "squeue.json").read_text()
    nodes = (GOLDEN / doc / "nodes.json").read_text()
    for seed in range(60):
        rng = random.Random(seed)
        jobs_doc, nodes_doc = json.loads(squeue), json.loads(nodes)
        _mutate(jobs_doc["jobs"], rng)
        _mutate(nodes_doc, rng)
        trees, typed = both(json.dumps(nodes_doc), json.dumps(jobs_doc))
        assert outcome(snapshot, *typed) == outcome(snapshot, *trees), seed


def test_msgspec_is_imported_only_to_decode():
    code = ("import sys; import slurm_plugin.slurm.snapshot, slurm_plugin.commands.snapshot; "
            "assert 'msgspec' not in sys.modules; "
            "from slurm_plugin.slurm.document import SlurmJson; SlurmJson(b'{}'); "
            "assert 'msgspec' in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=GOLDEN.parents[2])
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("text", [
    b'{"meta": {}, "jobs": []}', b"{not json", b'{"meta": {}, "jobs": [], "x": "\xff"}',
    b'{"meta": {}, "x": NaN}', b'{"meta": {}, "jobs": [], "name": "caf\xc3\xa9"}', b""])
def test_a_file_mapped_reads_as_its_bytes(tmp_path, text):
    """``SlurmJson.from_file`` (the file's pages mapped, not read first) gives what the file's
    bytes give: the same records and tree, or the same error."""
    path = tmp_path / "doc.json"
    path.write_bytes(text)

    def read(make):
        try:
            doc = make()
            return "ok", doc.typed, repr(doc.tree)
        except ValueError as exc:
            return type(exc).__name__, str(exc)
    assert read(lambda: SlurmJson.from_file(str(path))) == read(lambda: SlurmJson(text))
