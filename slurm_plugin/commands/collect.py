"""``wattctl collect``: sample this node's GPUs into InfluxDB, once or every S seconds."""

from __future__ import annotations

import json
import math
from typing import Any

import click

from .. import config
from ..model import GpuReading
from ..node.collector import collect_once, run_loop
from ..node.ledger import CachedIntensity, Ledger
from ..node.source import SOURCES, make_source, node_name
from ..record import asdict
from ..telemetry.influx import InfluxClient


def _ledger(cfg, client: InfluxClient) -> Ledger:
    """The per-job energy ledger of this node, with CO2 from the site's carbon zone. The GPUs'
    model is what NVML names each board, else ``node.gpu_model``; a model the catalogue lacks
    is one warning, never an error (the readings need no model)."""
    from ..telemetry.carbon import provider_from_config

    warn = lambda m: click.echo(f"wattbatch collector: warning: {m}", err=True)  # noqa: E731
    return Ledger(cfg["node.state_dir"], None, cfg["node.gpu_model"],
                  CachedIntensity(provider_from_config(cfg, client), warn=warn,
                                  max_age_s=cfg["carbon.max_age_s"]), warn=warn)


def _plain(value: Any) -> Any:
    """``value`` with every NaN or infinite number (a reading the GPU could not give) as None,
    so the JSON printed is valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def readings_json(readings: list[GpuReading], degraded: dict[int, dict[str, str]]) -> str:
    """One pass as JSON: each reading with its residents and model, and ``degraded``, the
    readings its GPU could not give (reading -> why; {} when all were read)."""
    return json.dumps([_plain({**asdict(r), "degraded": degraded.get(r.index, {})})
                       for r in readings])


@click.command("collect")
@click.option("--once", is_flag=True, help="Take one sample, print it and exit.")
@click.option("--interval", "interval_s", type=click.FloatRange(min=0.1), default=None,
              help="Sample every S seconds until stopped.")
@click.option("--count", type=click.IntRange(min=1), default=None,
              help="With --interval: stop after N samples.")
@click.option("--source", default=None,
              help=f"GPU source: {', '.join(sorted(SOURCES))} (default: site node.gpu_source).")
@click.option("--node", default=None,
              help="Node name (default: $SLURMD_NODENAME or host); emulated: a list or 'all'.")
@click.option("--json", "as_json", is_flag=True,
              help="--once: print the readings as JSON; nothing is written (InfluxDB, ledger).")
def collect(once: bool, interval_s: float | None, count: int | None, source: str | None,
            node: str | None, as_json: bool) -> None:
    """Sample this node's GPUs into InfluxDB.

    Writes gpu,cluster=..,node=..,gpu=.. points: power, energy, utilization, memory, cap.
    With --once --json, prints one pass (each GPU's reading, its jobs and model, and what it
    could not read) and writes nothing: no InfluxDB is needed."""
    if once == (interval_s is not None):
        raise click.UsageError("give exactly one of --once or --interval S")
    if source is not None and source not in SOURCES:    # read at run time: a source may be added
        raise click.BadParameter(f"{source!r} is not one of "
                                 f"{', '.join(repr(k) for k in sorted(SOURCES))}",
                                 param_hint="'--source'")
    cfg = config.load()
    name = source or cfg["node.gpu_source"]
    gpu_source = make_source(name, node or node_name(), cfg,
                             "--source" if source else cfg.source("node.gpu_source"))
    if once and as_json:
        # a source that tells no degraded readings (the emulated GPUs) reads everything
        click.echo(readings_json(gpu_source.read(), getattr(gpu_source, "degraded", {})))
        return
    client = InfluxClient.from_config(cfg)
    ledger = _ledger(cfg, client)
    if once:
        for r in collect_once(gpu_source, client, cfg["cluster.name"], ledger):
            click.echo(f"{r.node} gpu{r.index}: {r.power_w:.1f} W, {r.energy_j:.0f} J, "
                       f"{r.util_pct:.0f}%, {r.mem_used_mib:.0f} MiB, cap {r.power_limit_w:.0f} W")
        return
    failures = run_loop(gpu_source, client, cfg["cluster.name"], interval_s, iterations=count,
                        ledger=ledger)
    if failures:
        raise click.ClickException(f"{failures} of {count} samples failed (see warnings above)")
