"""``wattctl localcluster up|down|status|env|exec|root``: the built-in Slurm + InfluxDB test
cluster, on the host's Slurm or (``--slurm 24.11|26.05``) inside a Debian root."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from .. import localcluster
from ..localcluster import debroot
from ..localcluster.cluster import as_json
from ..localcluster.spec import GPU_SOURCES

_STATE_DIR = click.option("--state-dir", type=click.Path(file_okay=False), default=None,
                          help="All state lives here (default $WATTBATCH_LOCALCLUSTER_DIR or "
                               "/var/tmp/wattbatch-localcluster).")
_JSON = click.option("--json", "as_json_flag", is_flag=True, help="Print JSON.")
_SLURM = click.option("--slurm", "release", type=click.Choice(debroot.CHOICES),
                      default=debroot.SYSTEM, show_default=True,
                      help="Which Slurm: the host's own, or 24.11 (Debian trixie) / 26.05 "
                           "(Debian sid) inside a Debian root built with debootstrap.")


def _inner(release: str, argv: list[str], *, setup: bool = False,
           stdout_to_stderr: bool = False) -> int:
    """Prepare ``release``'s root, optionally run the project's setup there, then ``argv``
    inside it; the exit code of the first that fails."""
    root = debroot.prepare(release)
    if setup:
        debroot.say(f"setting up Slurm {release} and wattbatch in {root} (scripts/setup.sh: "
                    "apt on the first run, then pip)")
        rc = debroot.run_in_root(release, ["bash", "scripts/setup.sh"], root=root,
                                 stdout_to_stderr=True)
        if rc != 0:
            debroot.say(f"scripts/setup.sh failed in {root} (exit {rc})")
            return rc
        debroot.provide_influxd(root)
    return debroot.run_in_root(release, argv, root=root, stdout_to_stderr=stdout_to_stderr)


def _passed_options(state_dir: str | None, as_json_flag: bool) -> list[str]:
    return ([f"--state-dir={state_dir}"] if state_dir else []) + (
        ["--json"] if as_json_flag else [])


@click.group("localcluster")
def group() -> None:
    """Run a real Slurm cluster (4 nodes x 4 fake GPUs) and InfluxDB on this machine."""


@group.command("up")
@_STATE_DIR
@_JSON
@_SLURM
@click.option("--port", "ports", multiple=True, metavar="NAME=PORT",
              help="Override a port: slurmctld, slurmdbd, slurmd (first of N), mariadb, "
                   "influx, influx_rpc. Remembered in the state dir.")
@click.option("--share-gres", type=click.Choice(["shard", "mps"]), default=None,
              help="GRES that shares a GPU (default shard).")
@click.option("--gpu-model", default=None, metavar="MODEL|MODEL:N,...",
              help="The emulated GPUs' model (`wattctl gpu-models`): one for every node "
                   "(H100), or groups in node order (A100:2,H100:2). Default V100. The GRES "
                   "types name it (gpu:h100_80gb_hbm3_g0) and the physics follows it. "
                   "Remembered in the state dir.")
@click.option("--gpu-source", type=click.Choice(GPU_SOURCES), default=None,
              help="How the collector reads the emulated GPUs (node.gpu_source): as they are "
                   "(default emulated), or shown to the NVML read path as NVML would show "
                   "them (emulated-nvml). Remembered in the state dir.")
@click.option("--no-install", is_flag=True, help="Do not apt-get install missing packages.")
@click.option("--timeout", "timeout_s", type=float, default=120.0, show_default=True,
              help="Seconds to wait for idle nodes and InfluxDB.")
@click.option("--fresh", is_flag=True,
              help="A clean Slurm start: no job of an earlier run is kept.")
def up(state_dir: str | None, as_json_flag: bool, release: str, ports: tuple[str, ...],
       share_gres: str | None, gpu_model: str | None, gpu_source: str | None,
       no_install: bool, timeout_s: float, fresh: bool) -> None:
    """Install what is missing, start every daemon, wait until ready (idempotent).

    Slurm's jobs are kept across down/up; --fresh starts with none.

    With --slurm 24.11 or 26.05: build the Debian root if needed, copy this checkout into it,
    run scripts/setup.sh there, then `wattctl localcluster up` inside it.
    """
    if release != debroot.SYSTEM:
        argv = [".venv/bin/wattctl", "localcluster", "up",
                *_passed_options(state_dir, as_json_flag), *(f"--port={p}" for p in ports),
                *([f"--share-gres={share_gres}"] if share_gres else []),
                *([f"--gpu-model={gpu_model}"] if gpu_model is not None else []),
                *([f"--gpu-source={gpu_source}"] if gpu_source else []),
                *(["--no-install"] if no_install else []), *(["--fresh"] if fresh else []),
                f"--timeout={timeout_s}"]
        rc = _inner(release, argv, setup=not no_install)
        if rc == 0 and not as_json_flag:
            click.echo(f"use it:    wattctl localcluster exec --slurm {release} -- sinfo")
        raise SystemExit(rc)
    parsed = {}
    for item in ports:
        name, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r}: expected NAME=PORT", param_hint="--port")
        parsed[name.strip()] = value.strip()
    spec = localcluster.resolve(state_dir, ports=parsed, share_gres=share_gres,
                                gpu_model=gpu_model, gpu_source=gpu_source)
    report = localcluster.up(spec, install=not no_install, timeout_s=timeout_s, fresh=fresh)
    if as_json_flag:
        click.echo(as_json(report.as_dict()))
        return
    started = ", ".join(report.started) or "nothing (already up)"
    click.echo(f"local cluster up in {report.step_s['total']:.1f} s; started: {started}")
    click.echo(f"state dir: {spec.state_dir}")
    click.echo(f"default slurm.conf: {report.default_conf}")
    click.echo(f"use it:    . {spec.env_sh}")


@group.command("down")
@_STATE_DIR
@_JSON
@_SLURM
@click.option("--cancel-jobs", is_flag=True, help="Cancel every job first (default: Slurm "
              "keeps them for the next up).")
def down(state_dir: str | None, as_json_flag: bool, release: str, cancel_jobs: bool) -> None:
    """Stop every daemon of the local cluster; Slurm keeps its jobs for the next up.

    With --slurm 24.11 or 26.05 also undo every mount of that release's Debian root.
    """
    if release != debroot.SYSTEM:
        raise SystemExit(_down_in_root(release, state_dir, as_json_flag, cancel_jobs))
    result = localcluster.down(localcluster.resolve(state_dir), cancel_jobs=cancel_jobs)
    if as_json_flag:
        click.echo(as_json(result))
        return
    click.echo(f"cancelled {result['cancelled_jobs']} job(s), requeued "
               f"{result['requeued_jobs']} running job(s); stopped: "
               f"{', '.join(result['stopped']) or 'nothing (already down)'}")


def _down_in_root(release: str, state_dir: str | None, as_json_flag: bool,
                  cancel_jobs: bool) -> int:
    root = debroot.root_path(release)
    rc = 0
    if not root.is_dir():
        debroot.say(f"no root at {root}: nothing to stop")
    elif (root / debroot.VENV_BIN_IN_ROOT.lstrip("/") / "wattctl").exists():
        with debroot.mounted(root):
            rc = debroot.run_in_root(release, [".venv/bin/wattctl", "localcluster", "down",
                                               *_passed_options(state_dir, as_json_flag),
                                               *(["--cancel-jobs"] if cancel_jobs else [])],
                                     root=root)
    if root.is_dir() or debroot.read_record(root):
        undone = debroot.unmount(root)
        debroot.say(f"unmounted {', '.join(undone) or 'nothing (not mounted)'} in {root}")
    return rc


@group.command("status")
@_STATE_DIR
@_JSON
@_SLURM
def status(state_dir: str | None, as_json_flag: bool, release: str) -> None:
    """Say which daemons run and the state of each node. Exit 1 unless fully up."""
    if release != debroot.SYSTEM:
        root = debroot.root_path(release)
        if not root.is_dir() or not debroot.is_mounted(root):
            click.echo(f"Slurm {release}: root {root} "
                       f"{'not mounted' if root.is_dir() else 'not built'}: not up")
            raise SystemExit(1)
        raise SystemExit(debroot.run_in_root(
            release, [".venv/bin/wattctl", "localcluster", "status",
                      *_passed_options(state_dir, as_json_flag)], root=root))
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
        click.echo(f"{'slurm.conf':12} {localcluster.DEFAULT_SLURM_CONF}: "
                   f"{result['default_slurm_conf']}")
        click.echo(f"state dir: {result['state_dir']}  ({'up' if result['up'] else 'not up'})")
    raise SystemExit(0 if result["up"] else 1)


@group.command("env")
@_STATE_DIR
@_SLURM
def env(state_dir: str | None, release: str) -> None:
    """Print shell exports that point wattbatch and Slurm at the local cluster.

    Use as: eval "$(wattctl localcluster env)". With --slurm 24.11 or 26.05 the paths are
    inside that release's root (what `wattctl localcluster exec` exports there).
    """
    if release != debroot.SYSTEM:
        spec = localcluster.Spec(state_dir=Path(state_dir or
                                                        debroot.state_dir_in_root(release)))
        click.echo(f"# inside {debroot.root_path(release)}; run commands there with: "
                   f"wattctl localcluster exec --slurm {release} -- CMD")
    else:
        spec = localcluster.resolve(state_dir)
    for name, value in spec.env().items():
        click.echo(f"export {name}={shlex.quote(value)}")


@group.command("exec", context_settings={"ignore_unknown_options": True,
                                         "allow_interspersed_args": False})
@click.option("--slurm", "release", type=click.Choice(debroot.CHOICES[1:]), required=True,
              help="The release whose Debian root runs the command.")
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_(release: str, argv: tuple[str, ...]) -> None:
    """Run a command inside a release's Debian root (built and mounted if needed).

    It runs in /opt/wattbatch/src (a fresh copy of this checkout) with .venv/bin first on
    PATH and, when that root's cluster is up, its SLURM_CONF and WATTBATCH_SITE_CONFIG.
    Output is streamed; the command's exit code is this one's.
    Example: wattctl localcluster exec --slurm 24.11 -- squeue --json
    """
    raise SystemExit(_inner(release, list(argv)))


@group.command("root")
@click.option("--slurm", "release", type=click.Choice(debroot.CHOICES[1:]), required=True,
              help="The release whose Debian root to build.")
def root(release: str) -> None:
    """Build a release's Debian root if needed and print its path."""
    click.echo(debroot.build(release))
