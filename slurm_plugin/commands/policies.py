"""``wattctl policies``: list the policies a site or the simulator can name."""

from __future__ import annotations

import json

import click

from ..policy import policy_names


@click.command("policies")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
def policies(as_json: bool) -> None:
    """List the policy names."""
    names = policy_names()
    click.echo(json.dumps(names) if as_json else "\n".join(names))
