"""Site configuration, in layers: packaged defaults -> site file -> WATTBATCH_* env -> flags.

The packaged defaults live in ``site/defaults.toml`` (shipped inside the package). An admin's
file is found at ``$WATTBATCH_SITE_CONFIG``, else ``/etc/wattbatch/site.toml`` if present.
Every key is declared in ``SCHEMA`` with its type; an unknown key, a value of the wrong type,
out of its range or (a float) not a finite number raises ``ConfigError`` naming the file, the
key and the value.
"""

from __future__ import annotations

import json
import math
import os
from types import MappingProxyType
from collections.abc import Mapping

from .errors import ConfigError
from .record import record
from .resources import packaged_site_file

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Any

DEFAULT_SITE_FILE = "/etc/wattbatch/site.toml"


PACKAGED = "site/defaults.toml (packaged)"
# Parsing TOML (and importing tomllib) took ~6 ms of every wattbatch start: each file's
# validated keys are cached per user while the file and this module are unchanged.
_CODE_STAMP = os.stat(__file__).st_mtime_ns


def cache_dir() -> str:
    return os.environ.get("WATTBATCH_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "wattbatch")


def _file_keys(path: str, label: str) -> dict[str, Any]:
    """The validated keys of one TOML file (``label`` names it in errors), from the cache when
    its stamp (file mtime and size, this module's mtime) matches. A bad file is never cached."""
    try:
        st = os.stat(path)
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ConfigError(label, "(file)", path, f"cannot read site config ({exc.strerror}); "
                          "fix the path in WATTBATCH_SITE_CONFIG") from None
    stamp = [st.st_mtime_ns, st.st_size, _CODE_STAMP, label]
    cache = os.path.join(cache_dir(), "config-" + os.path.abspath(path).replace(os.sep, "%")
                         + ".json")
    try:
        with open(cache, encoding="utf-8") as fh:
            got = json.load(fh)
        if got["stamp"] == stamp:
            return dict(got["keys"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    keys = _parse_toml(label, data.decode("utf-8", errors="replace"))
    try:
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        _forget_gone_files(os.path.dirname(cache))
        tmp = f"{cache}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"stamp": stamp, "path": os.path.abspath(path), "keys": keys}, fh)
        os.replace(tmp, cache)
    except OSError:
        pass                     # no cache: parsed again next time
    return keys


def _forget_gone_files(cache_dir: str) -> None:
    """Drop the cache entries of files that no longer exist (run only when one is written)."""
    for name in os.listdir(cache_dir):
        if not (name.startswith("config-") and name.endswith(".json")):
            continue
        entry = os.path.join(cache_dir, name)
        try:
            with open(entry, encoding="utf-8") as fh:
                source = json.load(fh).get("path")
            if source and not os.path.exists(source):
                os.remove(entry)
        except (OSError, ValueError, AttributeError):
            continue


@record
class Key:
    type: type
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    maximum: float | None = None


def _num(lo: float | None = None, hi: float | None = None) -> Key:
    return Key(float, minimum=lo, maximum=hi)


def _int(lo: int | None = None, hi: int | None = None) -> Key:
    return Key(int, minimum=lo, maximum=hi)


SCHEMA: dict[str, Key] = {
    "cluster.name": Key(str),
    "policy.name": Key(str),
    "policy.stages": Key(list),
    "policy.allow_share": Key(bool),
    "policy.fail_open": Key(bool),
    "slurm.bin_dir": Key(str),
    "slurm.conf": Key(str),
    "slurm.timeout_s": _num(0.1, 600),
    "slurm.share_gres": Key(str, choices=("shard", "mps")),
    "slurm.shards_per_gpu": _int(1, 128),
    "slurm.typed_gpus": Key(bool),
    "influx.url": Key(str),
    "influx.database": Key(str),
    "influx.username": Key(str),
    "influx.password": Key(str),
    "influx.token": Key(str),
    "influx.timeout_s": _num(0.05, 60),
    "influx.skip_after_timeout_s": _num(0, 86400),
    "carbon.zone": Key(str),
    "carbon.file": Key(str),
    "carbon.max_age_s": _num(0, 1e9),
    "node.state_dir": Key(str),
    "node.gpu_source": Key(str),
    "node.gpu_model": Key(str),
    "node.cap_refresh_s": _num(0, 86400),
    "node.emulated_variability": Key(str),
    "physics.site_gpu_models": Key(str),
    "progress.site_key_file": Key(str),
    "progress.job_key_dir": Key(str),
    "reconcile.state_dir": Key(str),
    "reconcile.max_actions": _int(0, 10000),
    "reconcile.watch_s": _num(0, 1e8),
    "reconcile.completing_wait_s": _num(0, 600),
    "template.name": Key(str),
    "view.path": Key(str),
    "view.max_age_s": _num(1, 86400),
    "view.owner": Key(str),
    "view.hide_job_owners": Key(bool),
    "view.keep_in_server": Key(bool),
    "wrapper.server_idle_s": _num(0, 86400),
    "wrapper.snapshot_cache_s": _num(0, 3600),
    "greenflow.budget_kg_per_day": _num(0, 1e9),
    "greenflow.budget_kg_per_week": _num(0, 1e9),
    "greenflow.shiftable_partitions": Key(str),
    "greenflow.accounts": Key(str),
    "greenflow.order_queue": Key(bool),
    "greenflow.resize_interval_s": _num(0, 1e7),
    "greenflow.restart_cost_s": _num(0, 86400),
    "elastic.restart_cost_s": _num(0, 86400),
    "elastic.min_interval_s": _num(0, 1e7),
    "elastic.gain_factor": _num(0, 1000),
    "elastic.min_efficiency": _num(0, 1),
    "elastic.stale_s": _num(1, 1e8),
    "elastic.max_samples_per_s_per_gpu": _num(0, 1e12),
    "elastic.superlinear": _num(1, 100),
    "elastic.fairness_factor": _num(1, 1000),
    "elastic.max_resizes_per_pass": _int(0, 10000),
    "elastic.measure_restart_cost": Key(bool),
    "elastic.order_queue": Key(bool),
    "elastic.tier_age_s": _num(0, 1e7),
    "pal.profile": Key(str),
    "pal.locality_penalty_a": _num(1, 10),
    "pal.locality_penalty_b": _num(1, 10),
    "pal.locality_penalty_c": _num(1, 10),
    "pal.locality_penalty_d": _num(1, 10),
    "pal.default_class": Key(str),
    "pal.order_queue": Key(bool),
    "pal.size_tiers": Key(bool),
    "pal.tier_age_s": _num(0, 1e7),
    "pal.slowdown_tolerance": _num(0, 1),
    "pal.profile_max_age_days": _num(0, 36500),
    "eaco.alpha": _num(0, 1),
    "eaco.util_threshold_pct": _num(1, 400),
    "eaco.mem_threshold_pct": _num(1, 100),
    "eaco.max_jobs_per_gpu": _int(1, 8),
    "eaco.max_slowdown": _num(1, 10),
    "eaco.observe_epochs": _int(1, 100),
    "eaco.deadline_factor": _num(1, 100),
    "eaco.pin_wait_s": _num(0, 1e7),
    "eaco.share_modes": Key(list, choices=("shard", "mig")),
    "ones.population": _int(2, 256),
    "ones.generations": _int(0, 64),
    "ones.crossover_p": _num(0, 1),
    "ones.mutation_p": _num(0, 1),
    "ones.seed": _int(0, None),
    "ones.restart_cost_s": _num(0, 86400),
    "ones.min_interval_s": _num(0, 1e7),
    "ones.min_gain": _num(0, 1000),
    "ones.hold_s": _num(1, 1e7),
    "ones.lookahead": _int(1, 100000),
    "ones.max_resizes_per_pass": _int(0, 10000),
    "ones.statistical_efficiency": _int(0, 1),
}


def env_name(key: str) -> str:
    return "WATTBATCH_" + key.replace(".", "_").upper()


def _coerce(source: str, key: str, raw: Any, spec: Key) -> Any:
    if spec.type is list:
        return _coerce_list(source, key, raw, spec)
    value = raw
    if isinstance(raw, str) and spec.type is not str:
        text = raw.strip().lower()
        try:
            if spec.type is bool:
                if text not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError(text)
                value = text in ("1", "true", "yes", "on")
            else:
                value = spec.type(text)
        except ValueError:
            raise ConfigError(source, key, raw, f"expected {spec.type.__name__}") from None
    if spec.type is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, spec.type) or (spec.type is not bool and isinstance(value, bool)):
        raise ConfigError(source, key, raw, f"expected {spec.type.__name__}")
    if spec.type is float and not math.isfinite(value):
        # every comparison with NaN is false: without this, nan passed every range check
        raise ConfigError(source, key, raw, "must be a finite number"
                          + (f" from {spec.minimum:g} to {spec.maximum:g}"
                             if spec.minimum is not None and spec.maximum is not None else ""))
    if spec.choices and value not in spec.choices:
        raise ConfigError(source, key, raw, f"choose one of: {', '.join(map(str, spec.choices))}")
    if spec.minimum is not None and value < spec.minimum:
        raise ConfigError(source, key, raw, f"must be at least {spec.minimum:g}")
    if spec.maximum is not None and value > spec.maximum:
        raise ConfigError(source, key, raw, f"must be at most {spec.maximum:g}")
    return value


def _coerce_list(source: str, key: str, raw: Any, spec: Key) -> list[str]:
    """A list of choices: a TOML list, or comma-separated words (an environment variable);
    at least one, each once."""
    items = raw.split(",") if isinstance(raw, str) else raw
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise ConfigError(source, key, raw, "expected a list of words")
    if not spec.choices:                # names checked elsewhere (policy.stages); may be none
        value = [i.strip() for i in items if i.strip()]
        for item in value:
            if value.count(item) > 1:
                raise ConfigError(source, key, raw, f"{item!r} is named twice; give each once")
        return value
    value = [i.strip().lower() for i in items]
    choose = f"choose from: {', '.join(map(str, spec.choices))}"
    if not value or not all(value):
        raise ConfigError(source, key, raw, f"expected one or more words; {choose}")
    for item in value:
        if item not in spec.choices:
            raise ConfigError(source, key, raw, f"{item!r} is not a choice; {choose}")
        if value.count(item) > 1:
            raise ConfigError(source, key, raw, f"{item!r} is named twice; give each once")
    return value


def _flatten(source: str, table: Mapping[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for section, body in table.items():
        if not isinstance(body, Mapping):
            raise ConfigError(source, section, body,
                              "top-level entries must be [sections]; see site/defaults.toml")
        for name, raw in body.items():
            key = f"{section}.{name}"
            if key not in SCHEMA:
                raise ConfigError(source, key, raw,
                                  "unknown key; valid keys are listed in site/defaults.toml")
            flat[key] = _coerce(source, key, raw, SCHEMA[key])
    return flat


def _parse_toml(source: str, text: str) -> dict[str, Any]:
    import tomllib

    try:
        return _flatten(source, tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, "(file)", str(exc), "fix the TOML syntax") from None


class SiteConfig:
    """Resolved configuration: ``cfg["influx.url"]`` or ``cfg.section("eaco")``."""

    def __init__(self, values: Mapping[str, Any], sources: Mapping[str, str]) -> None:
        self._values = dict(values)
        self._sources = dict(sources)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)

    def source(self, key: str) -> str:
        return self._sources.get(key, "?")

    def section(self, name: str) -> Mapping[str, Any]:
        prefix = name + "."
        return MappingProxyType({k[len(prefix):]: v for k, v in self._values.items()
                                 if k.startswith(prefix)})

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def with_overrides(self, overrides: Mapping[str, Any], source: str = "flag") -> "SiteConfig":
        values, sources = dict(self._values), dict(self._sources)
        for key, raw in overrides.items():
            if key not in SCHEMA:
                raise ConfigError(source, key, raw, "unknown key")
            values[key] = _coerce(source, key, raw, SCHEMA[key])
            sources[key] = source
        return SiteConfig(values, sources)


def load(site_file: str | os.PathLike | None = None,
         environ: Mapping[str, str] | None = None) -> SiteConfig:
    """Resolve the layers. ``site_file=None`` uses $WATTBATCH_SITE_CONFIG or /etc/wattbatch."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}

    def merge(source: str, flat: Mapping[str, Any]) -> None:
        for k, v in flat.items():
            values[k] = v
            sources[k] = source

    merge(PACKAGED, _file_keys(packaged_site_file("defaults.toml"), PACKAGED))
    path = site_file or environ.get("WATTBATCH_SITE_CONFIG") or None
    if path is None and os.path.exists(DEFAULT_SITE_FILE):
        path = DEFAULT_SITE_FILE
    if path is not None:
        p = os.fspath(path)
        merge(p, _file_keys(p, p))
    for key, spec in SCHEMA.items():
        name = env_name(key)
        if name in environ:
            merge(f"${name}", {key: _coerce(f"${name}", key, environ[name], spec)})
    missing = [k for k in SCHEMA if k not in values]
    if missing:
        raise ConfigError("site/defaults.toml", missing[0], None, "packaged default missing")
    cfg = SiteConfig(values, sources)
    _check_policy(cfg)
    return cfg


def site_policy(cfg: SiteConfig) -> tuple[str, str, str]:
    """(the site's policy name, where it was set, its key): ``policy.stages`` joined by ``+``
    when it names any (a stack), else ``policy.name``."""
    if cfg["policy.stages"]:
        return "+".join(cfg["policy.stages"]), cfg.source("policy.stages"), "policy.stages"
    return cfg["policy.name"], cfg.source("policy.name"), "policy.name"


def _check_policy(cfg: SiteConfig) -> None:
    """An unknown policy, or names that cannot stack: a ConfigError at load, naming the key."""
    from .policy.registry import check_stack, policy_names
    name, source, key = site_policy(cfg)
    value = cfg[key]
    if key == "policy.stages" and len(value) == 1:
        name = value[0]
    if "+" not in name and name not in policy_names():
        names = ", ".join(policy_names())
        fix = (f"set {source} to one of: {names}, or unset it" if source.startswith("$") else
               f"set {key} in {source} to one of: {names}")
        raise ConfigError(source, key, value, f"unknown policy; {fix}")
    try:
        check_stack(name, source, key)
    except ConfigError as exc:          # the value as the site wrote it
        raise ConfigError(source, key, value, exc.fix) from None


# the site's sharing facts every policy's settings carry (``policy.base.SITE_KEYS``)
SHARE_FACTS = ("share_gres", "shards_per_gpu", "typed_gpus")


def policy_settings(cfg: SiteConfig, policy_name: str,
                    **overrides: Any) -> Mapping[str, Any]:
    """What a policy sees as ``Context.settings``, the same for the wrapper, the reconciler and
    the simulator: the ``[policy]`` keys, the site's sharing facts (``slurm.share_gres``,
    ``shards_per_gpu``, ``typed_gpus``), then its own section, then ``overrides`` (what the
    caller's own setting fixes: the simulated cluster's shards per GPU, a period budget).
    A stack (``pal+eaco``) gets each stage policy's own under ``stage_settings``."""
    names = [n.strip() for n in policy_name.split("+")]
    if len(names) > 1:
        stage = {n: policy_settings(cfg, n, **overrides) for n in names}
        return MappingProxyType({**cfg.section("policy"), "stage_settings": stage})
    facts = {k: cfg[f"slurm.{k}"] for k in SHARE_FACTS}
    own = cfg.section(policy_name.replace("-", "_"))
    return MappingProxyType({**cfg.section("policy"), **facts, **own, **overrides})
