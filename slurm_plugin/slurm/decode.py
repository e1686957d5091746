"""Slurm ``--json`` output decoded into only the fields the parsers read (msgspec, typed).

``squeue --json`` of a large cluster is hundreds of megabytes (24.11: ~6 KB per job, ~130
fields of which ``parse`` reads ~25); ``json.loads`` builds every field of every record, a
dict per object. msgspec decodes the bytes straight into the ``Struct`` types below, skipping
every other field without building it: a fraction of the time and memory (figures in
docs/slurm-versions.md, ``benchmarks/bench_parse.py``).

One set of types serves every data_parser version (``formats``): where a field's shape differs
between releases the type is the union of the shapes (``int | Number``: 22.05's plain integer,
23.02+'s ``{set, infinite, number}``), and ``typed_dialects`` reads it with the dialect the
document's ``meta`` names. A value of any other shape (a string where a number was, a float, a
release with a shape not foreseen) fails validation: ``decode`` then returns None and the
caller reads the document with ``json`` and ``dialects``, with the result (or error) those give.
Importing this module imports msgspec (~60 ms): it is imported where Slurm JSON is decoded,
never by the submission path.
"""

from __future__ import annotations

import msgspec


class Number(msgspec.Struct, gc=False):
    """23.02+: ``{set, infinite, number}`` (``set`` false: unset; ``infinite``: unlimited)."""

    set: bool
    infinite: bool = False
    number: int | None = None


class Signal(msgspec.Struct, gc=False):
    id: int | Number | None = None


class ExitCode(msgspec.Struct, gc=False):
    """23.02+: ``{status: [...], return_code: {...}, signal: {id: {...}}}``."""

    status: list[str]
    return_code: int | Number | None = None
    signal: Signal | None = None


class AllocatedNode(msgspec.Struct, gc=False):
    """22.05: an entry of ``job_resources.allocated_nodes``."""

    nodename: str


class Allocation(msgspec.Struct, gc=False):
    """23.02+: an entry of ``job_resources.nodes.allocation``."""

    name: str


class AllocationNodes(msgspec.Struct, gc=False):
    """23.02+: ``job_resources.nodes``."""

    allocation: list[Allocation] | None = None


class JobResources(msgspec.Struct, gc=False):
    allocated_nodes: list[AllocatedNode] | None = None     # 22.05
    nodes: str | AllocationNodes | None = None             # 22.05: a hostlist; 23.02+: object


Count = int | Number | None      # 22.05: an integer (0: unset); 23.02+: a Number


class JobRecord(msgspec.Struct, gc=False):
    """One entry of ``squeue --json`` ``jobs``: the fields ``parse.parse_job`` reads."""

    job_id: int | str | None = None
    job_state: str | list[str] | None = None        # 22.05: "RUNNING"; 23.02+: ["RUNNING"]
    name: str | None = None
    user_name: str | None = None
    account: str | None = None
    partition: str | None = None
    comment: str | None = None
    admin_comment: str | None = None
    state_reason: str | None = None
    array_task_string: str | None = None
    nodes: str | None = None
    required_nodes: str | None = None
    tres_per_node: str | None = None
    tres_per_job: str | None = None
    gres_detail: list[str] | None = None
    job_resources: JobResources | None = None
    node_count: Count = None
    time_limit: Count = None
    restart_cnt: Count = None
    submit_time: Count = None
    start_time: Count = None
    end_time: Count = None
    deadline: Count = None
    eligible_time: Count = None
    exit_code: int | ExitCode | None = None         # 22.05: a wait status; 23.02+: object


class NodeRecord(msgspec.Struct, gc=False):
    """One entry of the node listing's ``nodes``: the fields ``parse.parse_nodes`` reads."""

    name: str | None = None
    state: str | list[str] | None = None            # 22.05: "mixed"; 23.02+: ["MIXED", ...]
    state_flags: list[str] | None = None            # 22.05
    cpus: Count = None
    real_memory: Count = None
    features: str | list[str] | None = None         # 22.05: "a,b"; 23.02+: ["a", "b"]
    gres: str | None = None


class Document(msgspec.Struct, gc=False):
    """A ``--json`` document: ``meta`` and ``errors`` kept as JSON text (small; read by
    ``formats.detect`` and ``cli`` as ``json`` reads them), and the records."""

    meta: msgspec.Raw = msgspec.Raw()
    errors: msgspec.Raw = msgspec.Raw()
    jobs: list[JobRecord] | None = None
    nodes: list[NodeRecord] | None = None


_DECODER = msgspec.json.Decoder(Document)


def decode(text: str | bytes) -> Document | None:
    """``text`` (a command's stdout, a file's bytes: UTF-8) as a ``Document``; None when it is
    not JSON msgspec reads (``json`` then says why, or reads it: ``NaN``) or a field has a shape
    these types do not foresee."""
    try:
        return _DECODER.decode(text)
    except msgspec.MsgspecError:
        return None
