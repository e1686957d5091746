"""``wattctl localcluster up|down|status``: the built-in Slurm + InfluxDB test cluster."""

from __future__ import annotations

import shlex

import click

from .. import localcluster
from ..localcluster.cluster import as_json

_STATE_DIR = click.option("--state-dir", type=click.Path(file_okay=False), default=None,
                          help="All state lives here (default $WATTBATCH_LOCALCLUSTER_DIR or "
                               "/var/tmp/wattbatch-localcluster).")
_JSON = click.option("--json", "as_json_flag", is_flag=True, help="Print JSON.")


@click.group("localcluster")
def group() -> None:
    """Run a real Slurm cluster (4 nodes x 4 fake GPUs) and InfluxDB on this machine."""


@group.command("up")
@_STATE_DIR
@_JSON
@click.option("--port", "ports", multiple=True, metavar="NAME=PORT",
              help="Override a port: slurmctld, slurmdbd, slurmd (first of N), mariadb, "
                   "influx, influx_rpc. Remembered in the state dir.")
@click.option("--share-gres", type=click.Choice(["shard", "mps"]), default=None,
              help="GRES that shares a GPU (default shard).")
@click.option("--no-install", is_flag=True, help="Do not apt-get install missing packages.")
@click.option("--timeout", "timeout_s", type=float, default=120.0, show_default=True,
              help="Seconds to wait for idle nodes and InfluxDB.")
def up(state_dir: str | None, as_json_flag: bool, ports: tuple[str, ...],
       share_gres: str | None, no_install: bool, timeout_s: float) -> None:
    """Install what is missing, start every daemon, wait until ready (idempotent)."""
    parsed = {}
    for item in ports:
        name, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r}: expected NAME=PORT", param_hint="--port")
        parsed[name.strip()] = value.strip()
    spec = localcluster.resolve(state_dir, ports=parsed, share_gres=share_gres)
    report = localcluster.up(spec, install=not no_install, timeout_s=timeout_s)
    if as_json_flag:
        click.echo(as_json(report.as_dict()))
        return
    started = ", ".join(report.started) or "nothing (already up)"
    click.echo(f"local cluster up in {report.step_s['total']:.1f} s; started: {started}")
    click.echo(f"state dir: {spec.state_dir}")
    click.echo(f"use it:    . {spec.env_sh}")


@group.command("down")
@_STATE_DIR
@_JSON
def down(state_dir: str | None, as_json_flag: bool) -> None:
    """Cancel all jobs, then stop every daemon of the local cluster."""
    result = localcluster.down(localcluster.resolve(state_dir))
    if as_json_flag:
        click.echo(as_json(result))
        return
    click.echo(f"cancelled {result['cancelled_jobs']} job(s); stopped: "
               f"{', '.join(result['stopped']) or 'nothing (already down)'}")


@group.command("status")
@_STATE_DIR
@_JSON
def status(state_dir: str | None, as_json_flag: bool) -> None:
    """Say which daemons run and the state of each node. Exit 1 unless fully up."""
    result = localcluster.status(localcluster.resolve(state_dir))
    if as_json_flag:
        click.echo(as_json(result))
    else:
        for name, pid in result["daemons"].items():
            click.echo(f"{name:12} {'running (pid %d)' % pid if pid else 'stopped'}")
        for node, state in sorted(result["nodes"].items()):
            click.echo(f"{node:12} {state}")
        click.echo(f"{'influx':12} {result['influx_url']} "
                   f"{'answers /ping' if result['influx_ping'] else 'not answering'}")
        click.echo(f"state dir: {result['state_dir']}  ({'up' if result['up'] else 'not up'})")
    raise SystemExit(0 if result["up"] else 1)


@group.command("env")
@_STATE_DIR
def env(state_dir: str | None) -> None:
    """Print shell exports that point wattbatch and Slurm at the local cluster.

    Use as: eval "$(wattctl localcluster env)"
    """
    spec = localcluster.resolve(state_dir)
    for name, value in spec.env().items():
        click.echo(f"export {name}={shlex.quote(value)}")
