"""Fuzzed Slurm output never makes a traceback: the parsers raise ``FormatError`` /
``InputError`` naming command, release and field, and a snapshot leaves the one bad job or
node out with a warning. Deterministic: seeds 0..SEEDS-1 per release, and every string field
of every record of each recorded document given each of ``NOT_STRINGS`` in turn."""

from __future__ import annotations

import json
import random
import re
from contextlib import contextmanager
from functools import cache, reduce
from operator import getitem
from pathlib import Path

import pytest

from slurm_plugin.errors import InputError, WattError
from slurm_plugin.record import replace
from slurm_plugin.holders import ACTIVE_STATES
from slurm_plugin.slurm.parse import (expand_hostlist, parse_gres, parse_jobs, parse_sacct,
                                      parse_scontrol_record)
from slurm_plugin.slurm.snapshot import build_cluster

GOLDEN = Path(__file__).parents[1] / "golden" / "slurm"
RELEASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "squeue.json").exists())
# each release, and the older data_parser versions 26.05 serves on request (26.05/v0.0.42 ...)
DOCUMENTS = sorted(str(p.parent.relative_to(GOLDEN)) for p in GOLDEN.glob("**/squeue.json"))
SEEDS = 300
ODD = ["", "|", "IDX:", "(IDX:)", "gpu:1(IDX:)", "gpu[3-1]", "gpu[a-b]", "gpu[1-", "x]", "[]",
       "gpu:g0:1(IDX:0-)", "gpu:-1", "gres/gpu:99999999999999999999", "\ufffd", "N/A", None, 0,
       -1, 1e308, float("nan"), [], {}, {"number": "x"},
       {"set": True, "infinite": False, "number": None}, True, "a=b c=d", "gpu:1(IDX:0-1,,3)",
       "shard:g0:2(0/4,x/4)", "gpu1,gpu[1-2,]", "gpu[01-003]", "gpu[-]", "gpu[1-3]x[2]",
       "gpu[1-99999999]"]


def _mutate(obj, rng: random.Random) -> None:
    if isinstance(obj, dict):
        if obj and rng.random() < 0.3:
            key = rng.choice(list(obj))
            if rng.random() < 0.2:
                del obj[key]
            else:
                obj[key] = rng.choice(ODD)
        for value in list(obj.values()):
            if rng.random() < 0.5:
                _mutate(value, rng)
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            if rng.random() < 0.2:
                obj[i] = rng.choice(ODD)
            elif rng.random() < 0.5:
                _mutate(value, rng)


@pytest.mark.parametrize("release", RELEASES)
def test_fuzzed_json_becomes_warnings_never_a_traceback(release):
    squeue = (GOLDEN / release / "squeue.json").read_text()
    nodes = (GOLDEN / release / "nodes.json").read_text()
    left_out = 0
    for seed in range(SEEDS):
        rng = random.Random(seed)
        jobs_doc, nodes_doc = json.loads(squeue), json.loads(nodes)
        _mutate(jobs_doc["jobs"], rng)
        _mutate(nodes_doc, rng)
        try:
            cluster = build_cluster(nodes_doc, jobs_doc, "c", 0.0)
        except WattError as exc:        # the document itself (meta, node list) unreadable
            assert release in str(exc) or "slurm:" in str(exc), exc
            continue
        for warning in cluster.warnings:     # names command and release (as the doc gives it)
            assert warning.startswith("slurm: ") and " of Slurm " in warning, warning
            assert warning.endswith(("job left out", "node left out")), warning
        left_out += len(cluster.warnings)
    assert left_out > SEEDS // 4          # the fuzzing did reach the records


@pytest.mark.parametrize("release", RELEASES)
def test_fuzzed_sacct_rows_are_left_out_with_a_warning(release):
    lines = (GOLDEN / release / "sacct.txt").read_text().splitlines()
    skipped = 0
    for seed in range(SEEDS):
        rng = random.Random(seed)
        row = list(rng.choice(lines[1:]))
        for _ in range(3):
            row.insert(rng.randrange(len(row)), rng.choice("|\udcff=:,[-"))
        warnings: list[str] = []
        records = parse_sacct("\n".join([lines[0], "".join(row)]), warnings=warnings)
        assert len(records) + len(warnings) == 1
        skipped += len(warnings)
    assert skipped > SEEDS // 4


def test_a_job_name_or_comment_holding_the_delimiter():
    header = ("JobID|JobName|User|Partition|State|ExitCode|DerivedExitCode|Submit|Start|End|"
              "ElapsedRaw|TimelimitRaw|NodeList|AllocTRES|ReqTRES|Comment")
    row = ("12|a|b|root|gpu|COMPLETED|0:0|0:0|2026-11-21T10:00:00|2026-11-21T10:00:01|"
           "2026-11-21T10:00:02|1|60|gpu1|cpu=1|cpu=1|wb:x|y")
    rec, = parse_sacct(f"{header}\n{row}")     # the extra '|' placed where they read
    assert (rec.name, rec.comment, rec.user, rec.elapsed_s) == ("a|b", "wb:x|y", "root", 1.0)
    cut = row.replace("|60|", "|")             # a row no placement reads
    with pytest.raises(InputError, match=r"line 2: cannot read the row"):
        parse_sacct(f"{header}\n{cut}")
    warnings: list[str] = []
    assert parse_sacct(f"{header}\n{cut}", warnings=warnings) == ()
    assert "'12|a|b|root" in warnings[0] and warnings[0].endswith("job left out")
    sep = "\x1f"                          # what snapshot.history asks sacct for
    rec, = parse_sacct(f"{header.replace('|', sep)}\n"
                       f"{row.replace('|', sep).replace('a' + sep + 'b', 'a|b', 1)}".replace(
                           "wb:x" + sep + "y", "wb:x|y"), delimiter=sep)
    assert rec.name == "a|b" and rec.comment == "wb:x|y" and rec.elapsed_s == 1.0


@pytest.mark.parametrize("text", ["gpu[3-1]", "gpu[a-b]", "gpu[-]", "gpu[1-2,]", "[]",
                                  "gpu[1-99999999]"])
def test_odd_hostlist_ranges_name_the_hostlist(text):
    with pytest.raises(InputError, match=r"hostlist .* is not N or N-M"):
        expand_hostlist(text)


@pytest.mark.parametrize("text", ["gpu:1(IDX:)", "IDX:", "gpu:g0:1(IDX:0-)", "(IDX:)"])
def test_empty_or_open_gres_index_is_no_traceback(text):
    try:
        parse_gres(text)
    except InputError as exc:
        assert text in str(exc)


@pytest.mark.parametrize("text", ODD[:14])
def test_scontrol_records_of_any_text(text):
    assert isinstance(dict(parse_scontrol_record(text)), dict)


# --- every string field of every record, one non-string value at a time ----------------------

NOT_STRINGS = (7, 2.5, None, True, ["gpu1"], {"name": "gpu1"})
FILES = {"jobs": "squeue.json", "nodes": "nodes.json"}


@cache
def _documents(doc: str) -> dict[str, dict]:
    """The recorded documents of ``doc``; a test damages one field in place and restores it."""
    return {kind: json.loads((GOLDEN / doc / name).read_text()) for kind, name in FILES.items()}


def _build(docs: dict[str, dict]):
    return build_cluster(docs["nodes"], docs["jobs"], "c", 0.0)


@cache
def _without(doc: str, kind: str, k: int):
    """The snapshot of ``doc`` with record ``k`` of ``kind`` left out of its document."""
    docs = dict(_documents(doc))
    records = docs[kind][kind]
    docs[kind] = dict(docs[kind], **{kind: records[:k] + records[k + 1:]})
    return _build(docs)


def _string_leaves(obj, path=()):
    """(path, value) of each string under ``obj``; a list position is an int in the path."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _string_leaves(value, (*path, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _string_leaves(value, (*path, i))
    elif isinstance(obj, str):
        yield path, obj


def _field(path) -> str:
    """("job_resources", "allocated_nodes", 0, "nodename") ->
    "job_resources.allocated_nodes[].nodename"."""
    out = ""
    for part in path:
        out += "[]" if isinstance(part, int) else ("." if out else "") + part
    return out


@cache
def _before(doc: str):
    return _build(_documents(doc))


@cache
def _record_classes(doc: str, kind: str) -> tuple[str, ...]:
    if kind == "nodes":
        return ("node",) * len(_documents(doc)["nodes"]["nodes"])
    states = [job.state for job in parse_jobs(_documents(doc)["jobs"])]
    return tuple(s if s == "PENDING" else "active" if s in ACTIVE_STATES else "finished"
                 for s in states)


def _cases():
    """Every distinct string field path of each document's jobs and nodes, in the first record
    of each class (pending, active, finished job; node) that holds it non-empty (or in the first
    that holds it, where none does): the parsers read some fields of some classes only."""
    for doc in DOCUMENTS:
        for kind in FILES:
            first: dict[str, tuple[int, tuple]] = {}
            filled: dict[tuple[str, str], tuple[int, tuple]] = {}
            for k, record in enumerate(_documents(doc)[kind][kind]):
                for path, value in _string_leaves(record):
                    first.setdefault(_field(path), (k, path))
                    if value:
                        filled.setdefault((_field(path), _record_classes(doc, kind)[k]), (k, path))
            covered = {field for field, _ in filled}
            empty = {(field, "empty"): at for field, at in first.items() if field not in covered}
            for (field, cls), (k, path) in sorted({**empty, **filled}.items()):
                yield pytest.param(doc, kind, k, path, id=f"{doc}-{kind}-{field}-{cls}")


@contextmanager
def _damaged(record: dict, path: tuple, value):
    *head, last = path
    parent = reduce(getitem, head, record)
    kept, parent[last] = parent[last], value
    try:
        yield
    finally:
        parent[last] = kept


def _names_the_field(warning: str, kind: str, k: int, record: dict, path: tuple) -> bool:
    """The warning names the record (its job id or node name) and the field (keys joined by
    dots, a list position as [N] or not at all); a damaged node name, the node's position."""
    if kind == "nodes" and path == ("name",):
        return f"field nodes[{k}].name " in warning
    ident = record["job_id" if kind == "jobs" else "name"]
    keys = "".join(r"(\[\d+\])?" if isinstance(p, int) else (r"\." if i else "") + re.escape(p)
                   for i, p in enumerate(path))
    return f"(of {ident})" in warning and re.search(rf"field {keys} ", warning) is not None


@pytest.mark.parametrize("doc, kind, k, path", list(_cases()))
def test_a_non_string_in_a_string_field_costs_at_most_its_record(doc, kind, k, path):
    """The snapshot is built; the damaged record is read as before (a field not read), read as
    the value's text (a number; null: unset), or left out with one warning naming it and the
    field; every other record is as before."""
    docs = _documents(doc)
    record = docs[kind][kind][k]
    before = _before(doc)
    for value in NOT_STRINGS:
        with _damaged(record, path, value):
            cluster = _build(docs)
            if cluster.warnings:
                (warning,) = cluster.warnings
                assert warning.endswith(f"{kind[:-1]} left out"), warning
                assert _names_the_field(warning, kind, k, record, path), (value, warning)
                assert replace(cluster, warnings=()) == _without(doc, kind, k), (value, warning)
                continue
            if cluster == before:
                continue
            assert value is None or type(value) in (int, float), \
                f"{value!r} read into the model without a warning"
            with _damaged(record, path, "" if value is None else str(value)):
                assert cluster == _build(docs), f"{value!r} not read as its text"
