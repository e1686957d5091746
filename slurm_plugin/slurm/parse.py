"""Pure parsers: Slurm command output -> model objects. No I/O; golden-tested per release.

Sources: the node listing (Slurm 22.05: ``sinfo --json``; 23.02+: ``scontrol --json show
nodes``) for state and configured GRES, ``squeue --json`` for jobs (requested GRES in
``tres_per_node``, allocated GPU indexes in ``gres_detail``, one entry per allocated node),
``sacct -P`` (finished jobs with real exit codes; ``sacct --json`` of 22.05 reports 0 for
failed jobs) and ``scontrol show job -o`` (one ``Key=Value`` line). Each JSON document is read
with the dialect of the Slurm version in its ``meta`` (``formats``, ``dialects``); a
``SlurmJson`` from its msgspec records (``decode``, ``typed_dialects``: ``_typed_job``), or,
where one does not read that way, from its json tree like any other, with the same result.
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import lru_cache, partial
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, TypeVar

from ..errors import ConfigError, InputError
from ..formats.admin_comment import (app_from_comment, recorded_app, recorded_batch, recorded_cap,
                                     recorded_elastic, recorded_slack)
from ..formats.sacct_rows import split_row
from ..holders import ACTIVE_STATES
from ..model import Gpu, GpuUse, Job, Node
from ..record import record
from .dialects import Legacy, dialect
from .document import SlurmJson
from .formats import FormatError, detect

T = TypeVar("T")

SHARE_GRES = ("shard", "mps")
# name[:type]:count[(IDX:0-1,3) | (0/4,2/4) | (S:0-1)]  -- the list inside () may hold commas.
_GRES_ITEM = re.compile(r"(?P<name>[A-Za-z][\w.-]*)(?::(?P<type>[^:,()]+))??"
                        r":(?P<count>\d+)(?=[,(]|$)(?:\((?P<extra>[^)]*)\))?")
# a GPU typed one per GPU: ``g0``, or ``<model>_g0`` (the local cluster's emulated models)
_TYPED_INDEX = re.compile(r"(?:(.+)_)?g(\d+)$")


@record
class GresItem:
    """One ``name:type:count(IDX:...)`` entry of a GRES string.

    ``indexes``: the GPU positions of ``(IDX:0-1)``. ``shares``: for a shared GRES written
    ``(0/4,2/4)`` (Slurm 23.02+), the shares held on each GPU position of the node."""

    name: str
    type: str
    count: int
    indexes: tuple[int, ...] = ()
    shares: tuple[int, ...] = ()


@record
class AcctRecord:
    """One job (allocation line) from ``sacct -P -X``."""

    job_id: str
    name: str
    user: str
    partition: str
    state: str                     # CANCELLED, not "CANCELLED by 0"
    exit_code: int | None          # of the batch script
    signal: int | None
    derived_exit_code: int | None  # highest exit code of any step
    submit_s: float | None
    start_s: float | None
    end_s: float | None
    elapsed_s: float
    time_limit_s: float | None
    nodes: tuple[str, ...]
    alloc_tres: Mapping[str, str]
    req_tres: Mapping[str, str]
    comment: str


# --- small pieces ---------------------------------------------------------------------------

def parse_index_list(text: str) -> tuple[int, ...]:
    """``"0-2,5"`` -> (0, 1, 2, 5); ``""`` or ``"N/A"`` -> ()."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part or part.upper() == "N/A":
            continue
        lo, _, hi = part.partition("-")
        try:
            out.extend(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            raise InputError(f"slurm: GRES index list {text!r}: {part!r} is not N or N-M") from None
    return tuple(out)


def array_task_count(text: str) -> int:
    """Tasks named by squeue's ``array_task_string`` (``4-9``, ``1,3,5-7``, ``0-10:2%4``; the
    ``%N`` limit says how many run at once, not how many there are); 1 for "" (no array, or
    one task). A form it cannot read counts as 2: more than one, whatever the number."""
    text = text.partition("%")[0].strip()
    if not text:
        return 1
    total = 0
    try:
        for part in text.split(","):
            span, _, step = part.partition(":")
            first, _, last = span.partition("-")
            total += len(range(int(first), int(last or first) + 1, int(step or 1)))
    except ValueError:
        return 2
    return max(total, 1)


@lru_cache(maxsize=8192)   # the same few strings repeat across thousands of jobs and nodes
def parse_gres(text: str) -> tuple[GresItem, ...]:
    """A GRES string (node ``gres``/``gres_used``, job ``gres_detail`` entry, ``tres_per_node``).

    ``gres:``/``gres/`` prefixes are dropped; ``(IDX:...)`` gives indexes, ``(a/b,c/d)`` the
    shares held per GPU position (and the positions holding any as indexes); other ``(...)``,
    such as ``(S:0-1)`` or ``(-/4)``, is ignored.
    """
    if not isinstance(text, str):
        raise InputError(f"slurm: GRES {text!r} is not a string")
    items = []
    for m in _GRES_ITEM.finditer(text.replace("gres:", "").replace("gres/", "")):
        extra = m.group("extra") or ""
        idx: tuple[int, ...] = ()
        shares: tuple[int, ...] = ()
        if extra.startswith("IDX:"):
            idx = parse_index_list(extra[4:])
        elif "/" in extra and extra[:1].isdigit():
            shares = _share_list(text, extra)
            idx = tuple(i for i, n in enumerate(shares) if n)
        items.append(GresItem(m.group("name"), m.group("type") or "", int(m.group("count")),
                              idx, shares))
    return tuple(items)


def _share_list(text: str, extra: str) -> tuple[int, ...]:
    """``"0/4,2/4"`` -> (0, 2): shares held on each GPU position."""
    try:
        return tuple(int(part.split("/", 1)[0]) for part in extra.split(","))
    except ValueError:
        raise InputError(f"slurm: GRES {text!r}: {extra!r} is not a list of held/total "
                         "share counts") from None


MAX_HOSTLIST_NAMES = 100_000


@lru_cache(maxsize=8192)
def expand_hostlist(text: str) -> tuple[str, ...]:
    """``"gpu[1-3,5],cpu01"`` -> ("gpu1", "gpu2", "gpu3", "gpu5", "cpu01"); zero padding kept.

    A range that is not ``N`` or ``N-M`` with N <= M, or more than ``MAX_HOSTLIST_NAMES``
    names, raises ``InputError`` naming the hostlist."""
    names: list[str] = []
    for m in re.finditer(r"([^,\[]*)(?:\[([^\]]*)\])?([^,]*)", text):
        prefix, ranges, suffix = m.group(1), m.group(2), m.group(3)
        if ranges is None:
            if prefix + suffix:
                names.append(prefix + suffix)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            hi = hi or lo
            if not (lo.isdigit() and hi.isdigit()) or int(hi) < int(lo) or \
                    len(names) + int(hi) - int(lo) >= MAX_HOSTLIST_NAMES:
                raise InputError(f"slurm: hostlist {text[:200]!r}: range {part!r} is not N or "
                                 f"N-M with N <= M (at most {MAX_HOSTLIST_NAMES} names)")
            width = len(lo)
            names.extend(f"{prefix}{i:0{width}d}{suffix}" for i in range(int(lo), int(hi) + 1))
    return tuple(names)


@lru_cache(maxsize=8192)   # a few comments recur over thousands of jobs
def declared_app(admin_comment: str, comment: str) -> str:
    """The class a job declared at submission, as ``contrib/slurm/job_submit.lua`` recorded it
    in AdminComment (``wb:uid=..;declared_app=NAME;..``), which users cannot change; without
    that record, the ``app=`` of the comment. Either way a hint, never a credential."""
    recorded = recorded_app(admin_comment)
    return app_from_comment(comment) if recorded is None else recorded


def _gpu_index(gres_type: str) -> int | None:
    m = _TYPED_INDEX.fullmatch(gres_type)
    return int(m.group(2)) if m else None


def type_model(gres_type: str, gpu_model: str) -> str:
    """The model a GPU's GRES type names: ``gN`` none (``gpu_model``, the site's), else the
    catalogue entry of ``<model>_gN``'s or the whole type's model part (``a100``,
    ``nvidia_h100_80gb_hbm3`` as ``AutoDetect=nvml`` names them), else that part as it is."""
    m = _TYPED_INDEX.fullmatch(gres_type)
    name = (m.group(1) or "") if m else gres_type
    if not name:
        return gpu_model
    from ..physics.constants import catalogue_entry
    try:
        return catalogue_entry(name)
    except ConfigError:
        return name


# --- nodes ----------------------------------------------------------------------------------

@lru_cache(maxsize=256)
def _gpu_layout(gres: str, gpu_model: str) -> tuple[tuple[int, str, str, int], ...]:
    """(index, model, gres type, shares) of each GPU a node's GRES string configures."""
    items = parse_gres(gres)
    gpus: list[list] = []
    for it in items:
        if it.name != "gpu":
            continue
        idx = _gpu_index(it.type)
        model = type_model(it.type, gpu_model)
        for _ in range(it.count):
            index = idx if idx is not None and it.count == 1 else len(gpus)
            gpus.append([index, model, it.type if idx is not None else "", 0])
    by_type = {g[2]: g for g in gpus if g[2]}
    for it in items:
        if it.name not in SHARE_GRES:
            continue
        if it.type in by_type:
            by_type[it.type][3] += it.count
        elif gpus:   # untyped: Slurm spreads the count evenly over the GPUs
            per, rest = divmod(it.count, len(gpus))
            for i, g in enumerate(gpus):
                g[3] += per + (1 if i < rest else 0)
    return tuple(sorted(tuple(g) for g in gpus))


def parse_nodes(doc: Mapping[str, Any] | SlurmJson, gpu_model: str = "V100",
                command: str = "node listing",
                warnings: list[str] | None = None) -> tuple[Node, ...]:
    """The node listing (22.05: ``sinfo --json``; 23.02+: ``scontrol --json show nodes``) ->
    nodes with their configured GPUs (usage comes from the jobs).

    A GPU's index is N from its GRES type ``gN`` when typed one per GPU, else its position.
    ``gpu_model`` names GPUs whose type is only an index (``g0``) or that have none; a type
    like ``a100`` or ``h100_g0`` names the model (its catalogue entry where catalogued). State
    is the base state, ``+flag`` for flags: ``idle+drain``.
    A node whose fields cannot be read raises ``FormatError``; with a ``warnings`` list it is
    left out and the warning (command, release, node, field) appended there instead. ``doc``:
    the decoded tree, or a ``SlurmJson`` (the same nodes, read from its typed records).
    """
    layout = partial(_gpu_layout, gpu_model=gpu_model)
    if isinstance(doc, SlurmJson):
        typed = _read_typed(doc, doc.typed and doc.typed.nodes, command,
                            lambda d, rows: [_node(raw, d, k, layout)
                                             for k, raw in enumerate(rows)])
        if typed is not None:
            return _sorted_nodes(typed)
        doc = doc.tree
    d = dialect(detect(doc, command))
    nodes = []
    for k, raw in enumerate(d.node_rows(doc)):
        try:
            nodes.append(_node(raw, d, k, layout))
        except _BAD_DATA as exc:
            if warnings is None:
                raise _unreadable(d, f"node {k}", raw, exc) from None
            warnings.append(str(_unreadable(d, f"node {k}", raw, exc)) + "; node left out")
    return _sorted_nodes(nodes)


def _node(raw: Any, d: Legacy, k: int, layout: Callable[[str], tuple]) -> Node:
    name = d.node_name(raw, k)
    return Node(name=name, state=d.node_state(raw), cpus=d.count(raw, "cpus") or 0,
                memory_mib=d.count(raw, "real_memory") or 0, features=d.features(raw),
                gpus=tuple([Gpu(name, i, m, t, shards_total=n)       # node, index, model, type
                            for i, m, t, n in d.parsed(raw, "gres", layout, "a GRES string")]))


def _sorted_nodes(nodes: Iterable[Node]) -> tuple[Node, ...]:
    """By name, naturally (``n2`` before ``n10``); of two entries of one name, the last."""
    by_name = {n.name: n for n in nodes}
    return tuple(by_name[n] for n in sorted(by_name, key=_natural))


def _read_typed(doc: SlurmJson, rows: list | None, command: str,
                read: Callable[[Any, list], T]) -> T | None:
    """``read(dialect, rows)`` on the typed records of ``doc``; None when it has none, or one
    does not read that way (the caller then reads ``doc.tree``, which says what is wrong)."""
    if rows is None:
        return None
    from .typed_dialects import Unforeseen, typed_dialect
    d = typed_dialect(detect(doc, command))
    try:
        return read(d, rows)
    except (Unforeseen, *_BAD_DATA):
        return None


# What malformed Slurm output raises inside a parser; each becomes a FormatError naming the
# command, the release and the record (a job or a node), never a traceback.
_BAD_DATA = (InputError, KeyError, TypeError, ValueError, AttributeError, IndexError,
             OverflowError)


def _unreadable(d: Legacy, what: str, raw: Any, exc: Exception) -> FormatError:
    if isinstance(exc, FormatError):
        return exc                      # names command, release, field and record already
    ident = raw.get("job_id", raw.get("name", "?")) if isinstance(raw, Mapping) else raw
    return d.fmt.error(f"{what} ({ident!r})", f"{type(exc).__name__}: {exc}",
                       "fields of the documented types")


def _natural(name: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


# --- jobs -----------------------------------------------------------------------------------

def _requested(raw: Mapping[str, Any], d: Legacy, num_nodes: int) -> tuple[int, int]:
    """(whole GPUs, shares) requested per node, from tres_per_node or --gpus (per job)."""
    gpus, shares = d.parsed(raw, "tres_per_node", _per_node, "a GRES string")
    if not gpus:
        per_job = d.parsed(raw, "tres_per_job", _gpus_of, "a GRES string")
        gpus = -(-per_job // max(num_nodes, 1))
    return gpus, shares


@lru_cache(maxsize=8192)
def _per_node(tres: str) -> tuple[int, int]:
    """(whole GPUs, shares) of a ``tres_per_node``."""
    items = parse_gres(tres)
    return (sum(it.count for it in items if it.name == "gpu"),
            sum(it.count for it in items if it.name in SHARE_GRES))


@lru_cache(maxsize=8192)
def _gpus_of(tres: str) -> int:
    return sum(it.count for it in parse_gres(tres) if it.name == "gpu")


@lru_cache(maxsize=8192)
def _held(detail: str) -> tuple[tuple[int, int], ...]:
    """(GPU index, shares held; 0 for the whole GPU) of one ``gres_detail`` entry."""
    held: list[tuple[int, int]] = []
    for it in parse_gres(detail):
        if not it.count or not it.indexes:
            continue
        if it.name == "gpu":
            held.extend((i, 0) for i in it.indexes)
        elif it.shares:               # 23.02+: the shares held on each GPU
            held.extend((i, it.shares[i]) for i in it.indexes)
        elif it.name in SHARE_GRES:   # 22.05, a share count over several GPUs: split evenly
            per, rest = divmod(it.count, len(it.indexes))
            held.extend((i, per + (1 if k < rest else 0)) for k, i in enumerate(it.indexes))
    return tuple(held)


def _uses(node_names: tuple[str, ...],
          held: Iterable[tuple[tuple[int, int], ...]]) -> tuple[GpuUse, ...]:
    """Allocated GPUs: one ``gres_detail`` entry (``_held``) per allocated node, in node
    order."""
    return tuple(GpuUse(node, i, n) for node, pairs in zip(node_names, held) for i, n in pairs)


@lru_cache(maxsize=8192)
def _recorded(admin_comment: str) -> tuple:
    """What a job's AdminComment records (``formats.admin_comment``): elastic range, (batch
    range, learning-rate rule), slack, power cap."""
    return (recorded_elastic(admin_comment), recorded_batch(admin_comment),
            recorded_slack(admin_comment), recorded_cap(admin_comment))


def _hostlist(raw: Mapping[str, Any], d: Legacy, key: str) -> tuple[str, ...]:
    return d.parsed(raw, key, expand_hostlist, "a hostlist")


def _pinned(raw: Mapping[str, Any], d: Legacy, state: str) -> tuple[tuple[str, str, int], ...]:
    """A pending job's typed GPU entries on its one required node (see ``Job.pinned``)."""
    if state != "PENDING":
        return ()
    required = _hostlist(raw, d, "required_nodes")
    return _pins(required, d.text(raw, "tres_per_node")) if len(required) == 1 else ()


def _pins(required: tuple[str, ...], tres_per_node: str) -> tuple[tuple[str, str, int], ...]:
    """(node, GRES type, shares; 0 for a whole GPU) of each typed GPU entry of
    ``tres_per_node`` (already read by ``_requested``), on the one node ``required``."""
    return tuple((required[0], it.type, it.count if it.name in SHARE_GRES else 0)
                 for it in parse_gres(tres_per_node)
                 if it.type and it.count and (it.name == "gpu" or it.name in SHARE_GRES))


def _begin_s(raw: Mapping[str, Any], d: Legacy, state: str) -> float | None:
    """A pending job's ``--begin`` (or reconcile's ``StartTime``): Slurm shows it as the time
    the job becomes eligible, later than its submission (otherwise it is eligible at once)."""
    if state != "PENDING":
        return None
    return _begin(d.epoch(raw, "eligible_time"), d.epoch(raw, "submit_time"))


def _begin(eligible: float | None, submitted: float | None) -> float | None:
    return eligible if eligible and submitted and eligible > submitted + 1 else None


def parse_job(raw: Mapping[str, Any], d: Legacy) -> Job:
    """One entry of ``squeue --json`` ``jobs``, read with the dialect of its document.

    ``start_s``: for a running job when it started; for a pending one Slurm's expected start
    (``--begin`` or the backfill estimate), None when unknown. ``end_s`` only once finished.
    ``time_limit_s`` is None when unlimited. Fields are read in this order, each only where
    it counts (``exit_code`` once finished, ...): the first one unreadable names the error.
    """
    state = d.job_state(raw)
    nodes = _hostlist(raw, d, "nodes")
    node_names = d.alloc_nodes(raw) or nodes
    num_nodes = d.count(raw, "node_count") or 1
    gpus, shares = _requested(raw, d, num_nodes)
    limit_min = d.minutes(raw, "time_limit")
    comment = d.text(raw, "comment")
    admin_comment = d.text(raw, "admin_comment")
    finished = state not in ACTIVE_STATES
    reason = d.text(raw, "state_reason")
    tasks = array_task_count(d.text(raw, "array_task_string")) if not finished else 1
    return _job(
        d.job_id(raw), state, d.text(raw, "name"), d.text(raw, "user_name"),
        d.text(raw, "account"), d.text(raw, "partition"), gpus, shares, num_nodes, nodes,
        node_names, d.parsed_each(raw, "gres_detail", _held, "a GRES string"),
        d.epoch(raw, "submit_time"), d.epoch(raw, "start_time"),
        d.epoch(raw, "end_time") if finished else None, limit_min,
        d.count(raw, "restart_cnt"), comment, admin_comment, reason,
        d.exit_code(raw) if finished else None, d.epoch(raw, "deadline"),
        _pinned(raw, d, state), _begin_s(raw, d, state), tasks)


def _typed_job(raw: Any, d: Any) -> Job:
    """``parse_job`` of a typed record (``decode.JobRecord``, with a ``typed_dialects``
    reader): the fields read straight, the dialect asked only where releases differ. Every
    value is ``parse_job``'s; where that would raise, so does this (and the document is read
    again with ``parse_job``)."""
    number = d.number
    state = d.job_state(raw)
    nodes = expand_hostlist(raw.nodes or "")
    num_nodes = number(raw.node_count) or 1
    tres_per_node = raw.tres_per_node or ""
    gpus, shares = _per_node(tres_per_node)
    if not gpus:
        gpus = -(-_gpus_of(raw.tres_per_job or "") // max(num_nodes, 1))
    limit_min = number(raw.time_limit)
    finished = state not in ACTIVE_STATES
    submit, start = number(raw.submit_time), number(raw.start_time)
    pinned: tuple = ()
    begin_s = end = exit_code = None
    tasks = 1
    if finished:
        end, exit_code = number(raw.end_time), d.exit_code(raw)
    else:
        tasks = array_task_count(raw.array_task_string or "")
    if state == "PENDING":
        required = expand_hostlist(raw.required_nodes or "")
        pinned = _pins(required, tres_per_node) if len(required) == 1 else ()
        eligible = number(raw.eligible_time)
        begin_s = _begin(float(eligible) if eligible else None,
                         float(submit) if submit else None)
    deadline = number(raw.deadline)
    return _job(
        d.job_id(raw), state, raw.name or "", raw.user_name or "", raw.account or "",
        raw.partition or "", gpus, shares, num_nodes, nodes, d.alloc_nodes(raw) or nodes,
        tuple(map(_held, raw.gres_detail or ())), float(submit) if submit else None,
        float(start) if start else None, float(end) if end else None,
        float(limit_min) if limit_min is not None else None, number(raw.restart_cnt),
        raw.comment or "", raw.admin_comment or "", raw.state_reason or "", exit_code,
        float(deadline) if deadline else None, pinned, begin_s, tasks)


def _job(job_id: str, state: str, name: str, user: str, account: str, partition: str,
         gpus: int, shares: int, num_nodes: int, nodes: tuple[str, ...],
         node_names: tuple[str, ...], held: tuple[tuple[tuple[int, int], ...], ...],
         submit_s: float | None, start_s: float | None, end_s: float | None,
         limit_min: float | None, restarts: int | None, comment: str, admin_comment: str,
         reason: str, exit_code: int | None, deadline_s: float | None,
         pinned: tuple[tuple[str, str, int], ...], begin_s: float | None, tasks: int) -> Job:
    """The Job of the fields read (both readers); positional, in ``model.Job``'s field order
    (a third of the time of keywords, over 100,000 jobs)."""
    elastic, (batch, lr_rule), slack_s, cap_w = _recorded(admin_comment)
    lo, hi = (None, None) if tasks > 1 else elastic or (None, None)
    b_lo, b_hi = (None, None) if tasks > 1 else batch or (None, None)
    return Job(job_id, state, name, user, account, partition, gpus, shares, num_nodes, nodes,
               _uses(node_names, held), submit_s or 0.0, start_s, end_s,
               limit_min * 60 if limit_min is not None else None, restarts or 0, comment,
               declared_app(admin_comment, comment),
               "" if reason == "None" else reason, exit_code, deadline_s, begin_s, slack_s,
               cap_w, pinned, lo, hi, None, b_lo, b_hi, lr_rule, tasks)


def parse_jobs(squeue: Mapping[str, Any] | SlurmJson, active_only: bool = False,
               command: str = "squeue --json",
               warnings: list[str] | None = None) -> tuple[Job, ...]:
    """``squeue --json`` of any supported release -> jobs (all, or only pending/running-like
    ones). A job whose fields cannot be read raises ``FormatError``; with a ``warnings`` list
    it is left out and the warning appended there instead (a snapshot goes on without it).
    ``squeue``: the decoded tree, or a ``SlurmJson`` (the same jobs, from its typed records)."""
    if isinstance(squeue, SlurmJson):
        typed = _read_typed(squeue, squeue.typed and squeue.typed.jobs, command,
                            lambda d, rows: [_typed_job(raw, d) for raw in rows])
        if typed is not None:
            return tuple(j for j in typed if not active_only or j.state in ACTIVE_STATES)
        squeue = squeue.tree
    d = dialect(detect(squeue, command))
    jobs = squeue.get("jobs")
    if not isinstance(jobs, list):
        raise d.fmt.error("jobs", jobs, "a list of jobs")
    out = []
    for k, raw in enumerate(jobs):
        try:
            job = parse_job(raw, d)
        except _BAD_DATA as exc:
            if warnings is None:
                raise _unreadable(d, f"job {k}", raw, exc) from None
            warnings.append(str(_unreadable(d, f"job {k}", raw, exc)) + "; job left out")
            continue
        if not active_only or job.state in ACTIVE_STATES:
            out.append(job)
    return tuple(out)


# --- sacct and scontrol ---------------------------------------------------------------------

SACCT_FIELDS = ("JobID", "JobName", "User", "Partition", "State", "ExitCode", "DerivedExitCode",
                "Submit", "Start", "End", "ElapsedRaw", "TimelimitRaw", "NodeList", "AllocTRES",
                "ReqTRES", "Comment")


def _sacct_time(text: str) -> float | None:
    """sacct prints local time ``2026-11-21T10:31:31`` or Unknown/None."""
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").timestamp()
    except ValueError:
        return None


def _code_pair(text: str) -> tuple[int | None, int | None]:
    code, _, sig = text.partition(":")
    try:
        return int(code), int(sig or 0)
    except ValueError:
        return None, None


def _tres(text: str) -> Mapping[str, str]:
    return MappingProxyType(dict(kv.split("=", 1) for kv in text.split(",") if "=" in kv))


def parse_sacct(text: str, delimiter: str = "|",
                warnings: list[str] | None = None) -> tuple[AcctRecord, ...]:
    """``sacct -P -X --format=<SACCT_FIELDS>`` output, header line included.

    ``sacct -P`` does not escape its delimiter: a job name or comment holding it makes a row
    of more fields than the header. With ``|`` the extra ones are placed in JobName/Comment
    where only one placement reads (``sacct_rows``); a row that cannot be read raises
    ``InputError`` naming the line; with a ``warnings`` list it is left out and the warning
    appended there. ``snapshot.history`` asks sacct for a
    delimiter no name is expected to hold (``SACCT_DELIMITER``)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return ()
    header = lines[0].split(delimiter)
    missing = [f for f in SACCT_FIELDS if f not in header]
    if missing:
        raise InputError(f"slurm: sacct output lacks field(s) {', '.join(missing)}; "
                         f"run sacct -P --format={','.join(SACCT_FIELDS)}")
    records = []
    for number, line in enumerate(lines[1:], 2):
        try:
            records.append(_acct_record(header, line, delimiter, f"line {number}"))
        except (InputError, ValueError, OverflowError) as exc:
            shown = line if len(line) <= 200 else line[:197] + "..."
            error = InputError(f"slurm: sacct row {shown!r}: {exc}")
            if warnings is None:
                raise error from None
            warnings.append(f"{error}; job left out")
    return tuple(records)


def _acct_record(header: list[str], line: str, delimiter: str, where: str) -> AcctRecord:
    if delimiter == "|":         # sacct's own: extra ones placed in JobName/Comment
        row = split_row(line, header, where)
    else:
        fields = line.split(delimiter)
        if len(fields) != len(header):
            raise InputError(f"{where}: {len(fields)} fields for {len(header)} columns: a "
                             f"job name or comment holds the delimiter {delimiter!r}")
        row = dict(zip(header, fields))
    code, sig = _code_pair(row["ExitCode"])
    derived, _ = _code_pair(row["DerivedExitCode"])
    limit = row["TimelimitRaw"]
    nodes = row["NodeList"]
    elapsed = row["ElapsedRaw"]
    return AcctRecord(
        job_id=row["JobID"], name=row["JobName"], user=row["User"],
        partition=row["Partition"], state=row["State"].split(" ")[0], exit_code=code,
        signal=sig, derived_exit_code=derived, submit_s=_sacct_time(row["Submit"]),
        start_s=_sacct_time(row["Start"]), end_s=_sacct_time(row["End"]),
        elapsed_s=float(elapsed) if elapsed.isdigit() else 0.0,
        time_limit_s=float(limit) * 60 if limit.isdigit() else None,
        nodes=() if nodes in ("", "None assigned") else expand_hostlist(nodes),
        alloc_tres=_tres(row["AllocTRES"]), req_tres=_tres(row["ReqTRES"]),
        comment=row["Comment"])


def parse_scontrol_record(text: str) -> Mapping[str, str]:
    """One ``scontrol show job -o`` / ``show node -o`` line -> {Key: Value}.

    Values may contain spaces (Command=, Comment=): a new pair starts at `` Key=``.
    """
    pairs = re.split(r"\s+(?=[A-Za-z][\w:/]*=)", text.strip())
    return MappingProxyType(dict(p.split("=", 1) for p in pairs if "=" in p))


def plain(obj: Any) -> Any:
    """JSON-ready form of parsed objects (dataclasses, tuples, mappings): for golden files and
    ``--json`` output."""
    names = getattr(obj, "__record_fields__", None) or getattr(obj, "__dataclass_fields__", None)
    if names is not None and not isinstance(obj, type):
        return {f: plain(getattr(obj, f)) for f in names}
    if isinstance(obj, Mapping):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return [plain(v) for v in obj]
    return obj
