"""``wattctl snapshot``: what wattbatch sees of the cluster, for admins and bug reports."""

from __future__ import annotations

import json

import click

from ..errors import InputError


def _load(path: str, option: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
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
    from ..slurm.snapshot import describe, read_documents

    if (squeue_json is None) != (nodes_json is None):
        raise click.UsageError("give both --squeue-json and --nodes-json, or neither")
    if squeue_json is not None:
        squeue, nodes_doc = _load(squeue_json, "--squeue-json"), _load(nodes_json, "--nodes-json")
    else:
        from .. import config as site_config
        nodes_doc, squeue, _ = read_documents(site_config.load())
    data = describe(nodes_doc, squeue)
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    for warning in data["warnings"]:
        click.echo(f"warning: {warning}", err=True)
    click.echo(f"Slurm {data['slurm']['release']} (data_parser {data['slurm']['data_parser']})"
               f": {len(data['nodes'])} nodes, {len(data['jobs'])} jobs")
    for node in data["nodes"]:
        click.echo(f"node {node['name']:<10} {node['state']}")
        for g in node["gpus"]:
            holders = ([f"{g['exclusive_job']} (whole)"] if g["exclusive_job"] else []) + \
                g["shard_jobs"]
            click.echo(f"  gpu {g['index']} {g['type'] or '-':<4} shards "
                       f"{g['shards_used']}/{g['shards_total']}  {', '.join(holders) or 'free'}")
    for j in data["jobs"]:
        uses = " ".join(f"{n}:{i}" + (f"/{s}sh" if s else "") for n, i, s in j["uses"])
        extra = f" exit {j['exit_code']}" if j["exit_code"] is not None else ""
        click.echo(f"job {j['job_id']:<8} {j['state']:<12} gpus {j['gpus']} shards {j['shards']}"
                   f" nodes {j['num_nodes']} {uses or '-'}{extra}"
                   + (f"  ({j['reason']})" if j["reason"] else ""))
