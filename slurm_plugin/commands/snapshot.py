"""``wattctl snapshot``: what wattbatch sees of the cluster, for admins and bug reports."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Iterator

import click

from ..errors import InputError

if TYPE_CHECKING:
    from ..model import Job, Node
    from ..slurm.document import SlurmJson
    from ..slurm.formats import SlurmFormat


def _load(path: str, option: str) -> SlurmJson:
    from ..slurm.document import SlurmJson
    try:
        return SlurmJson.from_file(path)
    except OSError as exc:
        raise InputError(f"snapshot: {option} {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise InputError(f"snapshot: {option} {path}: not JSON ({exc}); record it with "
                         "`squeue --json -t all` / `scontrol --json show nodes` (Slurm "
                         "23.02+) or `sinfo --json` (22.05)") from None


@click.command("snapshot")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--squeue-json", type=click.Path(dir_okay=False), default=None,
              help="Read this recorded `squeue --json [-t all]` instead of running Slurm.")
@click.option("--nodes-json", type=click.Path(dir_okay=False), default=None,
              help="With --squeue-json: the recorded node listing (`scontrol --json show "
                   "nodes` on 23.02+, `sinfo --json` on 22.05).")
def snapshot(as_json: bool, squeue_json: str | None, nodes_json: str | None) -> None:
    """Show the Slurm release, the nodes with their GPUs and who holds them, and the jobs,
    as wattbatch's policies see them."""
    from ..gc_pause import gc_paused
    with gc_paused():     # to the last line: the parse's millions of objects make no cycle
        _show(as_json, squeue_json, nodes_json)


def _show(as_json: bool, squeue_json: str | None, nodes_json: str | None) -> None:
    from ..slurm.snapshot import describe, described, read_documents

    if (squeue_json is None) != (nodes_json is None):
        raise click.UsageError("give both --squeue-json and --nodes-json, or neither")
    if squeue_json is not None:
        squeue, nodes_doc = _load(squeue_json, "--squeue-json"), _load(nodes_json, "--nodes-json")
    else:
        from .. import config as site_config
        nodes_doc, squeue, _ = read_documents(site_config.load())
    if as_json:
        click.echo(json.dumps(describe(nodes_doc, squeue), indent=2))
        return
    fmt, warnings, nodes, jobs = described(nodes_doc, squeue)
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo("\n".join(_lines(fmt, nodes, jobs)))    # one write: ~200,000 lines at 100,000 jobs


def _lines(fmt: SlurmFormat, nodes: tuple[Node, ...], jobs: tuple[Job, ...]) -> Iterator[str]:
    """The text form of ``described``: straight from the model (no JSON-ready dicts)."""
    yield (f"Slurm {fmt.release} (data_parser {fmt.data_parser}): {len(nodes)} nodes, "
           f"{len(jobs)} jobs")
    for node in nodes:
        yield f"node {node.name:<10} {node.state}"
        for g in node.gpus:
            holders = ([f"{g.exclusive_job} (whole)"] if g.exclusive_job else []) + \
                list(g.shard_jobs)
            yield (f"  gpu {g.index} {g.gres_type or '-':<4} shards "
                   f"{g.shards_used}/{g.shards_total}  {', '.join(holders) or 'free'}")
    for j in jobs:
        uses = " ".join(f"{u.node}:{u.index}" + (f"/{u.shards}sh" if u.shards else "")
                        for u in j.uses)
        extra = f" exit {j.exit_code}" if j.exit_code is not None else ""
        yield (f"job {j.job_id:<8} {j.state:<12} gpus {j.gpus} shards {j.shards}"
               f" nodes {j.num_nodes} {uses or '-'}{extra}"
               + (f"  ({j.reason})" if j.reason else ""))
