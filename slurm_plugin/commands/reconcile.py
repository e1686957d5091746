"""``wattctl reconcile``: one periodic pass for cron (locked, journaled, idempotent)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .. import config as site_config
from ..policy import get_policy
from ..reconcile import reconcile_pass


def _record_actions(cfg, actions: list, warnings: list) -> None:
    """The pass's actions into InfluxDB (``reconcile_action``, for the dashboard); InfluxDB
    down is a warning, never a failed pass."""
    import time

    from ..errors import TelemetryError
    from ..telemetry.actions import outcome_points
    from ..telemetry.influx import InfluxClient

    try:
        InfluxClient.from_config(cfg).write(outcome_points(actions, cfg["cluster.name"],
                                                           time.time()))
    except TelemetryError as exc:
        warnings.append(f"actions not recorded in InfluxDB: {exc}")


def _settings_warnings(cfg, policy_name: str, settings) -> list[str]:
    """What the policy refuses at submit time in its site settings, as the pass's warnings
    (wattbatch warns at each submission; a pass that reads none of it would stay silent): the
    ``pal`` profile must be readable (pal alone or in a stack)."""
    if "pal" not in policy_name.split("+"):
        return []
    settings = (settings.get("stage_settings") or {}).get("pal", settings)
    from ..errors import ConfigError, WattError
    from ..policy.pal.predict import profile_of
    from ..policy.pal.settings import parse_settings

    late = "; until it is fixed, wattbatch under policy pal submits each job unchanged"
    try:
        profile_of(settings, parse_settings(settings))
    except ConfigError as exc:
        key = f"pal.{exc.key}"
        return [str(ConfigError(cfg.source(key), key, exc.value, exc.fix + late))]
    except WattError as exc:
        return [f"{exc}{late}"]
    return []


def _publish_view(cfg, holder: dict) -> list[str]:
    """The pass's snapshot and readings as the site's cluster view (``cluster_view``)."""
    from ..cluster_view import publish
    try:
        publish(cfg["view.path"], cfg, holder["cluster"], holder.get("readings"))
    except OSError as exc:
        return [f"cluster view {cfg['view.path']}: not written ({exc.strerror or exc}); "
                "submissions read Slurm until a pass writes it"]
    return []


@click.command("reconcile")
@click.option("--dry-run", is_flag=True,
              help="Decide and journal, but change nothing in Slurm. The state directory must "
                   "exist: a dry run creates none (a mistyped --state-dir is an error).")
@click.option("--json", "as_json", is_flag=True, help="Print the pass as one JSON object.")
@click.option("--policy", "policy_name", default=None, help="Override policy.name of the site.")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None,
              help="Override reconcile.state_dir (journal, lock, history); a pass that is no "
                   "dry run creates it.")
def reconcile(dry_run: bool, as_json: bool, policy_name: str | None, state_dir: str | None) -> None:
    """Read Slurm and InfluxDB, let the site policy decide, and act.

    A second pass started while one runs exits 0 at once, saying so. Every action is journaled
    before and after each Slurm step; a pass finishes what a crashed pass left half done.
    """
    from .. import live
    from ..errors import StateError

    cfg = site_config.load()
    site_name, where, key = site_config.site_policy(cfg)
    name = policy_name or site_name
    policy = get_policy(name, source=where if policy_name is None else "wattctl reconcile",
                        key=key if policy_name is None else "--policy")
    state = Path(state_dir or cfg["reconcile.state_dir"])
    if dry_run and not state.is_dir():
        given = f"--state-dir {state}" if state_dir else \
            f"reconcile.state_dir = {str(state)!r} ({cfg.source('reconcile.state_dir')})"
        raise StateError(f"reconcile: {given}: no such directory; a dry run creates none: fix "
                         f"the path, or create it (mkdir -p {state}), or run one pass without "
                         "--dry-run")
    holder: dict = {}
    settings = site_config.policy_settings(cfg, name)

    def snap():
        cluster = live.snapshot(cfg)
        if getattr(policy, "reads_limit_use", False):
            cluster = live.with_limit_use(cfg, cluster)
        holder["cluster"] = cluster
        return cluster

    result = reconcile_pass(
        policy=policy,
        snapshot=snap,
        readings=lambda: holder.setdefault("readings", live.readings(
            cfg, holder.get("cluster"), carbon=getattr(policy, "reads_carbon", False))),
        actuator=live.SlurmActuator(cfg),
        state_dir=state,
        settings=settings,
        dry_run=dry_run,
        max_actions=cfg["reconcile.max_actions"],
        watch_s=cfg["reconcile.watch_s"],
        completing_wait_s=cfg["reconcile.completing_wait_s"],
    )
    if result.ran:
        result.warnings.extend(_settings_warnings(cfg, name, settings))
        if cfg["view.path"] and not dry_run and "cluster" in holder:
            result.warnings.extend(_publish_view(cfg, holder))
    data = {"policy": policy.name, "state_dir": str(state), **result.as_dict()}
    if result.ran and result.outcomes and not dry_run:
        _record_actions(cfg, data["actions"], result.warnings)
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    if not result.ran:
        click.echo(f"wattctl reconcile: another pass is running ({result.holder}); nothing done")
        return
    for w in result.warnings:
        click.echo(f"wattctl reconcile: warning: {w}", err=True)
    mode = " (dry run)" if dry_run else ""
    click.echo(f"reconcile{mode}: policy {policy.name}, {result.nodes_seen} nodes, "
               f"{result.jobs_seen} jobs, {len(result.outcomes)} actions, "
               f"policy {result.policy_s * 1000:.1f} ms, pass {result.total_s * 1000:.0f} ms")
    for o in result.outcomes:
        a = o.action
        extra = f" gpus={a.gpus}" if a.gpus else ""
        if a.kind == "power_cap":
            extra += f" cap={a.power_cap_w:g}W" if a.power_cap_w is not None else " cap=none"
            if a.time_limit_s is not None:
                extra += f" time_limit={a.time_limit_s:.0f}s"
        who = f" job {a.job_id}" if a.job_id else ""      # an observe action names no job
        click.echo(f"  {o.status:8s} {a.kind}{who}{extra}: {a.why} {o.detail}".rstrip(" :"))
