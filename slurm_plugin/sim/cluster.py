"""The simulated cluster's shape and options: flags or a ``--cluster FILE.toml``.

```toml
[cluster]
nodes = 64
gpus_per_node = 8
gpu_type = "V100"           # any catalogued GPU model (`wattctl gpu-models`): "A100", "H100", ...
shards_per_gpu = 4          # shards a GPU offers for sharing (0: no sharing)
node_base_power_w = 400.0   # default from the fitted physics
backfill_depth = 100        # Slurm bf_max_job_test
bf_interval_s = 2.0         # SchedulerParameters=bf_interval (Slurm's default 30)
sched_interval_s = 2.0      # SchedulerParameters=sched_interval (Slurm's default 60)
time_limit_rule = "modal"   # limits of trace jobs without time_limit_s: modal | exact
time_limit_factor_max = 4.0 # modal: users over-ask by up to this factor (before rounding)
reconcile_interval_s = 300.0
suspend_time_s = 600.0      # Slurm SuspendTime (power saving); absent = nodes stay powered
resume_delay_s = 300.0      # boot time of a suspended node
suspended_power_w = 15.0
keep_idle_nodes = 0         # SuspendExcNodes=<all nodes>:N: this many idle nodes never power down
deferrable_share = 0.5      # jobs of a trace without slack_s drawn deferrable (sim/slack.py)
slack_s = 21600.0           # and their slack: the start may move up to this long
nodes_per_switch = 0        # network topology: leaf switches of this many nodes (0: one switch)
restart_cost_s = 90.0       # a resize of a running job: checkpoint + requeue + start-up
```

Slurm's two schedulers: the main one runs when a job is submitted or ends and every
``sched_interval_s``, in priority order, and stops at the first job that cannot start; the
backfill pass runs every ``bf_interval_s``. Both defaults are the local test cluster's
slurm.conf values (``SCHED_DEFAULTS``), so the simulator is a twin of that cluster out of the box;
a production cluster's slurm.conf values go in the cluster file.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..physics import (idle_power_w, node_base_power_w, node_resume_delay_s,
                       node_suspended_power_w)
from .slack import DEFAULT_SHARE, DEFAULT_SLACK_S
from .time_limits import RULES


# SchedulerParameters of slurm_plugin/localcluster/slurm.conf.j2 (a test checks they agree).
SCHED_DEFAULTS = {"bf_interval_s": 2.0, "sched_interval_s": 2.0}


@dataclass(frozen=True)
class ClusterSpec:
    nodes: int = 64
    gpus_per_node: int = 8
    gpu_type: str = "V100"
    shards_per_gpu: int = 4
    node_base_power_w: float | None = None
    backfill_depth: int = 100
    bf_interval_s: float = SCHED_DEFAULTS["bf_interval_s"]
    sched_interval_s: float = SCHED_DEFAULTS["sched_interval_s"]
    time_limit_rule: str = "modal"
    time_limit_factor_max: float = 4.0
    reconcile_interval_s: float = 300.0
    suspend_time_s: float | None = None
    resume_delay_s: float | None = None
    suspended_power_w: float | None = None
    keep_idle_nodes: int = 0
    deferrable_share: float = DEFAULT_SHARE
    slack_s: float = DEFAULT_SLACK_S
    nodes_per_switch: int = 0
    restart_cost_s: float = 90.0

    @property
    def gpu_count(self) -> int:
        return self.nodes * self.gpus_per_node

    def resolved(self) -> "ClusterSpec":
        """Fill the physics defaults and check the GPU type is a catalogued model (a
        ConfigError names it and lists the close names)."""
        idle_power_w(self.gpu_type)
        return replace(
            self,
            node_base_power_w=node_base_power_w() if self.node_base_power_w is None
            else self.node_base_power_w,
            resume_delay_s=node_resume_delay_s() if self.resume_delay_s is None
            else self.resume_delay_s,
            suspended_power_w=node_suspended_power_w() if self.suspended_power_w is None
            else self.suspended_power_w)

    def with_slurm_settings(self, settings: dict[str, Any]) -> "ClusterSpec":
        """Apply the slurm.conf power-saving settings a policy declares (SuspendTime,
        ResumeTimeout), unless the cluster file already sets them."""
        spec = self
        if "SuspendTime" in settings and spec.suspend_time_s is None:
            spec = replace(spec, suspend_time_s=float(settings["SuspendTime"]))
        if "ResumeTimeout" in settings and spec.resume_delay_s is None:
            spec = replace(spec, resume_delay_s=float(settings["ResumeTimeout"]))
        return spec


_MIN = {"nodes": 1, "gpus_per_node": 1, "shards_per_gpu": 0, "node_base_power_w": 0,
        "backfill_depth": 1, "reconcile_interval_s": 1, "bf_interval_s": 1, "sched_interval_s": 1,
        "time_limit_factor_max": 1, "suspend_time_s": 0,
        "resume_delay_s": 0, "suspended_power_w": 0, "keep_idle_nodes": 0, "deferrable_share": 0,
        "slack_s": 0, "nodes_per_switch": 0, "restart_cost_s": 0}
_MAX = {"deferrable_share": 1}


def read_table(p: Path, name: str) -> dict:
    """The ``[name]`` table of a TOML file; errors name the file, the table and the fix."""
    try:
        table = tomllib.loads(p.read_text())
    except OSError as exc:
        raise ConfigError(str(p), "(file)", str(p), f"cannot read ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(p), "(file)", str(exc), "fix the TOML syntax") from None
    body = table.get(name)
    if not isinstance(body, dict):
        raise ConfigError(str(p), name, None, f"add a [{name}] table")
    return body


def load_cluster(path: str | Path) -> ClusterSpec:
    """Read ``[cluster]`` from a TOML file; errors name the file, key and value."""
    p = Path(path)
    return check_cluster(str(p), read_table(p, "cluster"))


def check_cluster(source: str, body: dict[str, Any], table: str = "cluster") -> ClusterSpec:
    """The spec of one ``[cluster]`` table (a cluster file's, or a sweep's ``[[sweep.clusters]]``
    with ``table="sweep.clusters"``); errors name ``source``, the key and the value."""
    known = {f.name: f for f in fields(ClusterSpec)}
    values: dict[str, Any] = {}
    for key, raw in body.items():
        if key not in known:
            raise ConfigError(source, f"{table}.{key}", raw,
                              f"unknown key; valid keys: {', '.join(known)}")
        if key in ("gpu_type", "time_limit_rule"):
            if not isinstance(raw, str):
                raise ConfigError(source, f"{table}.{key}", raw, "expected a string")
            if key == "time_limit_rule" and raw not in RULES:
                raise ConfigError(source, f"{table}.{key}", raw,
                                  f"choose one of: {', '.join(RULES)}")
            values[key] = raw
            continue
        want_int = key in ("nodes", "gpus_per_node", "shards_per_gpu", "backfill_depth",
                           "nodes_per_switch", "keep_idle_nodes")
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or (want_int and not isinstance(raw, int)):
            raise ConfigError(source, f"{table}.{key}", raw,
                              f"expected {'an integer' if want_int else 'a number'}")
        if not math.isfinite(raw):      # nan passes every comparison below
            raise ConfigError(source, f"{table}.{key}", raw, "must be a finite number")
        if raw < _MIN[key]:
            raise ConfigError(source, f"{table}.{key}", raw, f"must be at least {_MIN[key]}")
        if key in _MAX and raw > _MAX[key]:
            raise ConfigError(source, f"{table}.{key}", raw, f"must be at most {_MAX[key]}")
        values[key] = raw if want_int else float(raw)
    spec = ClusterSpec(**values)
    try:
        spec.resolved()
    except ConfigError as exc:
        raise ConfigError(source, f"{table}.gpu_type", spec.gpu_type, exc.fix) from None
    return spec
