"""Snapshot of the live cluster (model.Cluster) and the accounting history.

Two calls: ``squeue --json`` for jobs, then the node listing of that release
(``formats``): ``sinfo --json`` on Slurm 22.05, ``scontrol --json show nodes`` on 23.02 and
later, where ``sinfo --json`` merges nodes of one state into one row. ``squeue --json`` is the
only source of per-job GPU indexes (``gres_detail``) short of one ``scontrol show job -d`` per
job (Slurm 22.05: ~236 ms and 6 MB at 2,000 jobs, against 16 ms for ``squeue -h -o``, which
has no GPU indexes). A policy needs to know which job holds which GPU (co-location, shards
pinned by index), so the snapshot pays for the JSON once per decision. It is decoded with
msgspec into only the fields the parsers read (``decode``, ``document``): 10,000 jobs of 24.11
in about a quarter of a second, decode and parse (benchmarks/bench_parse.py,
docs/slurm-versions.md).

A Slurm newer than any known here writes a data_parser version the parsers do not know: the
command is then asked again for the newest known version (``--json=v0.0.45``), which a
release keeps serving for a few releases.
"""

from __future__ import annotations

import time
from types import MappingProxyType
from typing import Any, Mapping

from ..config import SiteConfig
from ..gc_pause import gc_paused
from ..holders import ACTIVE_STATES, attach_jobs
from ..model import Cluster, Job, Node
from ..record import replace
from .cli import slurm, slurm_document, slurm_release
from .document import SlurmJson
from .formats import NEWEST, FormatError, SlurmFormat, detect, release_tuple
from .parse import SACCT_FIELDS, AcctRecord, parse_jobs, parse_nodes, parse_sacct
from .topology import switches, with_switches

SlurmDoc = Mapping[str, Any] | SlurmJson      # a decoded tree, or the typed records
NODES_LEGACY = ("sinfo", [])                    # Slurm 22.05
NODES_CURRENT = ("scontrol", ["show", "nodes"])  # Slurm 23.02 and later
FIRST_CURRENT = (23, 2)


@gc_paused()
def build_cluster(nodes_doc: SlurmDoc, squeue: SlurmDoc, name: str, taken_s: float,
                  gpu_model: str = "V100") -> Cluster:
    """Pure: the two JSON documents (decoded trees or ``SlurmJson``) -> Cluster with GPU
    holders filled and active jobs only.

    A job or node whose fields cannot be read is left out, with a warning in
    ``Cluster.warnings`` (command, release, record, field): one odd record never stops a
    snapshot."""
    warnings: list[str] = []
    jobs = parse_jobs(squeue, active_only=True, warnings=warnings)
    nodes = attach_jobs(parse_nodes(nodes_doc, gpu_model, warnings=warnings), jobs)
    return Cluster(nodes=nodes, jobs=MappingProxyType({j.job_id: j for j in jobs}),
                   taken_s=taken_s, name=name, warnings=tuple(warnings))


def read_json(cmd: str, args: list[str], cfg: SiteConfig) -> tuple[SlurmJson, SlurmFormat]:
    """``cmd --json args`` and its format; asked again as ``--json=<newest known>`` when
    the release writes a newer version than the parsers know."""
    command = " ".join([cmd, "--json", *args])
    doc = slurm_document(cmd, args, cfg)
    try:
        return doc, detect(doc, command)
    except FormatError:
        doc = slurm_document(cmd, args, cfg, version=NEWEST)
        return doc, detect(doc, f"{cmd} --json={NEWEST} {' '.join(args)}".strip())


def read_documents(cfg: SiteConfig) -> tuple[SlurmJson, SlurmJson, SlurmFormat]:
    """(node listing, ``squeue --json``, format): the raw inputs of a snapshot.

    The node listing of the release ``scontrol -V`` names is asked while ``squeue`` runs (a
    decision waits on both); when ``squeue``'s document says otherwise, or the early listing
    failed, it is asked again after."""
    import threading
    early: dict[str, tuple[bool, SlurmJson]] = {}

    def listing() -> None:
        try:
            legacy = release_tuple(slurm_release(cfg)) < FIRST_CURRENT
            cmd, args = NODES_LEGACY if legacy else NODES_CURRENT
            early["doc"] = (legacy, read_json(cmd, list(args), cfg)[0])
        except Exception:          # noqa: BLE001 - asked again below, where errors are raised
            pass
    thread = threading.Thread(target=listing, daemon=True)
    thread.start()
    try:
        squeue, fmt = read_json("squeue", [], cfg)
    finally:
        thread.join()
    if "doc" in early and early["doc"][0] == fmt.legacy:
        return early["doc"][1], squeue, fmt
    cmd, args = NODES_LEGACY if fmt.legacy else NODES_CURRENT
    nodes_doc, _ = read_json(cmd, list(args), cfg)
    return nodes_doc, squeue, fmt


def snapshot(cfg: SiteConfig, gpu_model: str | None = None) -> Cluster:
    """Nodes (state, GPUs by index and type, who holds them) and pending/running jobs. A GPU
    whose GRES type names no model is ``gpu_model``'s, by default the site's
    ``node.gpu_model``."""
    taken_s = time.time()
    nodes_doc, squeue, _ = read_documents(cfg)
    cluster = build_cluster(nodes_doc, squeue, cfg["cluster.name"], taken_s,
                            cfg["node.gpu_model"] if gpu_model is None else gpu_model)
    switch_of = switches(cfg["slurm.conf"])
    return replace(cluster, nodes=with_switches(cluster.nodes, switch_of)) if switch_of \
        else cluster


# sacct -P does not escape its delimiter; job names and comments hold "|" far more often than
# the ASCII unit separator.
SACCT_DELIMITER = "\x1f"


def history(cfg: SiteConfig, since: str = "now-1days", users: str | None = None,
            warnings: list[str] | None = None) -> tuple[AcctRecord, ...]:
    """Finished and running jobs from ``sacct -P`` (exit codes are right there, unlike
    ``sacct --json``). ``since`` is any sacct ``--starttime``; held jobs are absent. A row
    that cannot be read is left out with a warning in ``warnings`` (given) or raises."""
    args = ["-P", f"--delimiter={SACCT_DELIMITER}", "-X", f"--format={','.join(SACCT_FIELDS)}",
            f"--starttime={since}"]
    args += [f"--user={users}"] if users else ["--allusers"]
    return parse_sacct(slurm("sacct", args, cfg).stdout, delimiter=SACCT_DELIMITER,
                       warnings=warnings)


@gc_paused()
def described(nodes_doc: SlurmDoc, squeue: SlurmDoc) -> tuple[SlurmFormat, list[str],
                                                              tuple[Node, ...], tuple[Job, ...]]:
    """Pure: what wattbatch reads from the two documents: the format of ``squeue``'s, the
    warnings of the jobs and nodes left out because their fields cannot be read, the nodes
    with their GPUs and holders, and every job in ``squeue``."""
    fmt = detect(squeue, "squeue --json")
    warnings: list[str] = []
    jobs = parse_jobs(squeue, warnings=warnings)
    nodes = attach_jobs(parse_nodes(nodes_doc, warnings=warnings),
                        [j for j in jobs if j.state in ACTIVE_STATES])
    return fmt, warnings, nodes, jobs


@gc_paused()
def describe(nodes_doc: SlurmDoc, squeue: SlurmDoc) -> dict:
    """Pure: ``described`` as plain JSON (``wattctl snapshot --json``)."""
    fmt, warnings, nodes, jobs = described(nodes_doc, squeue)
    return {
        "slurm": {"release": fmt.release, "data_parser": fmt.data_parser},
        "warnings": warnings,
        "nodes": [{"name": n.name, "state": n.state, "available": n.available,
                   "gpus": [{"index": g.index, "type": g.gres_type, "model": g.model,
                             "shards_total": g.shards_total, "shards_used": g.shards_used,
                             "exclusive_job": g.exclusive_job, "shard_jobs": list(g.shard_jobs)}
                            for g in n.gpus]} for n in nodes],
        "jobs": [{"job_id": j.job_id, "name": j.name, "user": j.user, "state": j.state,
                  "gpus": j.gpus, "shards": j.shards, "num_nodes": j.num_nodes,
                  "nodes": list(j.nodes),
                  "uses": [[u.node, u.index, u.shards] for u in j.uses],
                  "submit_s": j.submit_s, "start_s": j.start_s, "end_s": j.end_s,
                  "time_limit_s": j.time_limit_s, "exit_code": j.exit_code,
                  "restart_count": j.restart_count, "reason": j.reason, "comment": j.comment,
                  "pinned": [list(p) for p in j.pinned]} for j in jobs],
    }
