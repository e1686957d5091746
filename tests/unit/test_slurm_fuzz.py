"""Fuzzed Slurm output never makes a traceback: the parsers raise ``FormatError`` /
``InputError`` naming command, release and field, and a snapshot leaves the one bad job or
node out with a warning. Deterministic: seeds 0..SEEDS-1 per release."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from slurm_plugin.errors import InputError, WattError
from slurm_plugin.slurm.parse import (expand_hostlist, parse_gres, parse_sacct,
                                      parse_scontrol_record)
from slurm_plugin.slurm.snapshot import build_cluster

GOLDEN = Path(__file__).parents[1] / "golden" / "slurm"
RELEASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "squeue.json").exists())
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
