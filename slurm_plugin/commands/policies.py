"""``wattctl policies``: list the policies a site or the simulator can name, and the stages
each offers in a stack (``policy/stages.py``)."""

from __future__ import annotations

import json

import click

from ..policy import policy_names
from ..policy.registry import stage_kinds
from ..policy.stages import KINDS


@click.command("policies")
@click.option("--json", "as_json", is_flag=True,
              help="Print a JSON list: each policy's name and the stage kinds it offers.")
def policies(as_json: bool) -> None:
    """List the policy names and the stages each offers in a stack (name several joined by
    + or in policy.stages; the stages run in the order sizing, timing, sharing, placement)."""
    names = policy_names()
    if as_json:
        click.echo(json.dumps([{"name": n, "stages": list(stage_kinds(n))} for n in names]))
        return
    width = max(map(len, names))
    for n in names:
        kinds = sorted(stage_kinds(n), key=KINDS.index)
        click.echo(f"{n:<{width}}  {', '.join(kinds) or '-'}")
