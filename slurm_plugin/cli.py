"""``wattctl``: the admins' tool. Each subcommand lives in ``slurm_plugin/commands/``."""

from __future__ import annotations

import importlib
import sys

import click

from .errors import WattError

# module name in slurm_plugin.commands -> attribute holding the click command
_COMMANDS: list[tuple[str, str]] = [
    ("policies", "policies"),
    ("localcluster", "group"),
    ("carbon", "carbon"),
    ("collect", "collect"),
    ("simulate", "simulate"),
    ("reconcile", "reconcile"),
    ("snapshot", "snapshot"),
    ("history", "history"),
    ("report", "report"),
    ("profile_gpus", "profile_gpus"),
    ("gpu_models", "gpu_models"),
    ("calibrate_gpus", "calibrate_gpus"),
]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="wattbatch")
def group() -> None:
    """wattbatch admin tool: local cluster, reconcile, simulate, carbon data, reports."""


for _module, _attr in _COMMANDS:
    group.add_command(getattr(importlib.import_module(f".commands.{_module}", __package__), _attr))


def main() -> None:
    try:
        rc = group.main(standalone_mode=False)     # a command's click Exit(n) comes back as n
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except WattError as exc:
        click.echo(f"wattctl: error: {exc}", err=True)
        sys.exit(2)
    except SystemExit:
        raise


if __name__ == "__main__":
    main()
