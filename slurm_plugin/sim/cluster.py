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

A cluster of several GPU models lists its node groups instead of ``nodes`` and ``gpu_type``,
in node order (the first group's nodes come first: ``node00`` ...); every other key stays in
``[cluster]`` and holds for every group, ``gpus_per_node`` included:

```toml
[cluster]
gpus_per_node = 8
[[cluster.groups]]
nodes = 16
gpu_type = "V100"
[[cluster.groups]]
nodes = 32
gpu_type = "A100"
```

``wattctl simulate --gpu-type V100:16,A100:32`` is the same cluster (``MODEL:NODES``,
comma-separated; no ``--nodes`` with it). Each node computes with its own model (idle power,
caps, the jobs' power, memory, the model its GPU views show). A job runs on one model: Slurm
places it as in one partition per model, a job allowed in all of them (``-p v100,a100``): a
multi-node job's nodes all hold the same model, first fit over the nodes in order, and a
job pinned to nodes of two models is refused (the policy's placement falls back to Slurm's).
Errors name the group by its place in the list from 0: ``cluster.groups[1].gpu_type``.

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
from ..physics.constants import catalogue_entry
from .slack import DEFAULT_SHARE, DEFAULT_SLACK_S
from .time_limits import RULES


# SchedulerParameters of slurm_plugin/localcluster/slurm.conf.j2 (a test checks they agree).
SCHED_DEFAULTS = {"bf_interval_s": 2.0, "sched_interval_s": 2.0}


@dataclass(frozen=True)
class ClusterSpec:
    """The cluster. ``groups``: (GPU model, nodes) per node group, in node order, for a cluster
    of several models; then ``nodes`` is their sum and ``gpu_type`` their label
    (``"V100:16,A100:32"``, as ``--gpu-type`` takes it). One group is the flat form: ``nodes``
    and ``gpu_type`` become its own and ``groups`` is empty."""

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
    groups: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        if len(self.groups) == 1:
            (gpu_type, nodes), = self.groups
            object.__setattr__(self, "gpu_type", gpu_type)
            object.__setattr__(self, "nodes", nodes)
            object.__setattr__(self, "groups", ())
        elif self.groups:
            object.__setattr__(self, "groups", tuple((m, n) for m, n in self.groups))
            object.__setattr__(self, "nodes", sum(n for _, n in self.groups))
            object.__setattr__(self, "gpu_type", groups_label(self.groups))

    @property
    def gpu_count(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def node_groups(self) -> tuple[tuple[str, int], ...]:
        """(GPU model, nodes) per node group, in node order: one for a single-model cluster."""
        return self.groups or ((self.gpu_type, self.nodes),)

    @property
    def model_nodes(self) -> tuple[tuple[str, int], ...]:
        """(GPU model, nodes) per model: groups of one catalogue entry are one model, named as
        its first group."""
        out: dict[str, tuple[str, int]] = {}
        for model, n in self.node_groups:
            key = catalogue_entry(model)
            name, count = out.get(key, (model, 0))
            out[key] = (name, count + n)
        return tuple(out.values())

    @property
    def largest_model_nodes(self) -> int:
        """The most nodes of one GPU model: the most a job (which runs on one model) gets."""
        return max(n for _, n in self.model_nodes)

    def resolved(self) -> "ClusterSpec":
        """Fill the physics defaults and check every GPU type is a catalogued model (a
        ConfigError names it and lists the close names)."""
        for model, _ in self.node_groups:
            idle_power_w(model)
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


def groups_label(groups: tuple[tuple[str, int], ...]) -> str:
    """``"V100:16,A100:32"``: the groups as ``--gpu-type`` takes them."""
    return ",".join(f"{model}:{n}" for model, n in groups)


def parse_groups(text: str) -> tuple[tuple[str, int], ...]:
    """``--gpu-type``'s value: one model (``"A100"``: no groups) or ``MODEL:NODES`` groups,
    comma-separated; a ValueError says what is wrong. Models are checked by ``resolved``."""
    if ":" not in text:
        return ()
    out = []
    for part in text.split(","):
        model, sep, count = part.strip().partition(":")
        if not sep or not model.strip() or not count.strip().isdigit() or int(count) < 1:
            raise ValueError(f"{part.strip()!r} is not MODEL:NODES (a GPU model and a whole "
                             f"number of nodes of at least 1, e.g. V100:16,A100:32)")
        out.append((model.strip(), int(count)))
    return tuple(out)


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
        if key == "groups":
            values[key] = _check_groups(source, table, raw)
            for flat in ("nodes", "gpu_type"):
                if flat in body:
                    raise ConfigError(source, f"{table}.{flat}", body[flat],
                                      f"the groups give the nodes and their GPU model: set "
                                      f"{flat} in each [[{table}.groups]] table, not both")
            continue
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
    if not spec.groups:
        try:
            spec.resolved()
        except ConfigError as exc:
            raise ConfigError(source, f"{table}.gpu_type", spec.gpu_type, exc.fix) from None
    return spec


_GROUP_KEYS = ("nodes", "gpu_type")


def _check_groups(source: str, table: str, raw: Any) -> tuple[tuple[str, int], ...]:
    """``[[cluster.groups]]`` (``table``: ``cluster``): (GPU model, nodes) per table; errors
    name the table by its place from 0 (``cluster.groups[1].gpu_type``) and list the close
    names of a model not catalogued."""
    key = f"{table}.groups"
    if not isinstance(raw, list) or not raw or not all(isinstance(g, dict) for g in raw):
        raise ConfigError(source, key, raw, f"expected [[{key}]] tables, each with nodes and "
                                            f"gpu_type")
    out = []
    for i, group in enumerate(raw):
        where = f"{key}[{i}]"
        for k, v in group.items():
            if k not in _GROUP_KEYS:
                fix = f"unknown key; valid keys: {', '.join(_GROUP_KEYS)}"
                if k in {f.name for f in fields(ClusterSpec)}:
                    fix += f" ({k} is the cluster's, for every group: set it beside the " \
                           f"groups, in the {table} table)"
                raise ConfigError(source, f"{where}.{k}", v, fix)
        for k in _GROUP_KEYS:
            if k not in group:
                raise ConfigError(source, f"{where}.{k}", None, f"add {k} to this group")
        nodes, model = group["nodes"], group["gpu_type"]
        if isinstance(nodes, bool) or not isinstance(nodes, int):
            raise ConfigError(source, f"{where}.nodes", nodes, "expected an integer")
        if nodes < 1:
            raise ConfigError(source, f"{where}.nodes", nodes, "must be at least 1")
        if not isinstance(model, str):
            raise ConfigError(source, f"{where}.gpu_type", model, "expected a string")
        try:
            idle_power_w(model)
        except ConfigError as exc:
            raise ConfigError(source, f"{where}.gpu_type", model, exc.fix) from None
        out.append((model, nodes))
    return tuple(out)
