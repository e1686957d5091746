"""``wattctl history export``: the site's accounting in the form ``simulate --from-sacct`` reads."""

from __future__ import annotations

import click

from ..errors import InputError


@click.group("history")
def history() -> None:
    """A site's job history, for what-if replay (`wattctl simulate --from-sacct`)."""


@history.command("export")
@click.option("--since", default=None,
              help="Passed to sacct as -S (sacct's time formats: now-30days, 2026-11-01, "
                   "2026-11-01T10:00, ...; checked first, as `report --since`). Without it "
                   "sacct starts at 00:00 today.")
@click.option("--until", default=None, help="Passed to sacct as -E (same formats).")
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False, allow_dash=True),
              default="-", show_default=True, help="File to write, - for stdout.")
def export(since: str | None, until: str | None, output: str) -> None:
    """Run `sacct -a -X -P -o JobIDRaw,JobName,User,Account,Partition,Submit,Start,End,Elapsed,
    Timelimit,State,ExitCode,ReqTRES,AllocTRES,NodeList,AdminComment,Comment` and write what it
    prints.

    sacct selects jobs by eligible time: a job cancelled while it waited for a --begin later
    than --until is not listed."""
    import time

    from ..config import load
    from ..report.period import parse_time_s
    from ..sim.trace_sacct import SACCT_ARGS
    from ..slurm.cli import slurm

    now = time.time()
    for option, value in (("--since", since), ("--until", until)):
        if value:
            try:       # as report --since: a bad time is said here, naming the option
                parse_time_s(value, now, option)
            except InputError as exc:
                raise InputError(f"history export: {str(exc).split(': ', 1)[1]}") from None
    args = list(SACCT_ARGS)
    if since:
        args += ["-S", since]
    if until:
        args += ["-E", until]
    cfg = load()
    # a site's months of accounting take sacct longer than slurm.timeout_s (20 s by default)
    text = slurm("sacct", args, cfg, timeout_s=max(cfg["slurm.timeout_s"], 600.0)).stdout
    if output == "-":
        click.echo(text, nl=False)
        return
    try:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise InputError(f"history export: --output {output}: cannot write ({exc.strerror})") \
            from None
    click.echo(f"history export: {max(0, len(text.splitlines()) - 1)} jobs -> {output}", err=True)
