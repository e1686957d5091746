"""The policy path of wattbatch: config -> request -> snapshot + readings -> advise -> plan.

Any exception raised here makes ``wattbatch`` submit the job unchanged (fail-open); the
exception carries the loaded config as ``wattbatch_cfg`` so the caller can honour
``policy.fail_open``.
"""

from __future__ import annotations

import os
import time
from _thread import get_ident
from collections.abc import Mapping

from slurm_plugin import config
from slurm_plugin.errors import ConfigError
from slurm_plugin.history import read_view
from slurm_plugin.model import JobRequest, Placement
from slurm_plugin.policy.base import Context
from slurm_plugin.policy.registry import kept_policy, policy_names
from slurm_plugin.record import field, record

from . import translate
from .render import is_shell_script, render, warm_templates
from .request import (app_warning, batch_warning, build_request, deadline_warning, gpu_ask,
                      merge, min_nodes)
from .sbatch_args import CommandLine, ScriptHeader
from .wb_options import WbOptionError, WbSettings

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Any, Callable

NOT_READ = " not read: "     # a readings source that failed (telemetry.readers.read_readings)


@record(frozen=False)
class Outcome:
    cfg: Any
    policy: str
    original: str                        # the script as the user gave it
    script: str                          # the script sbatch gets
    wrap: bool = False
    request: JobRequest | None = None
    placement: Placement | None = None
    plan: translate.Plan | None = None
    args: list[str] = field(default_factory=list)
    unchanged_reason: str = ""
    warnings: list[str] = field(default_factory=list)   # for stderr, one line each
    timings_ms: dict[str, float] = field(default_factory=dict)
    snapshot_age_s: float | None = None   # how old the Slurm snapshot was (None: not read)
    cluster: Any = None                   # the snapshot decided on (None: not read)

    def explain_lines(self) -> list[str]:
        if self.unchanged_reason:           # only a dry run shows these: nothing went in
            return [f"would submit unchanged: {self.unchanged_reason}"]
        lines = [f"policy {self.policy}"] + self.why()
        lines += list(self.plan.notes if self.plan else ())
        lines.append("sbatch options added: " + (" ".join(self.args) or "(none)"))
        if self.plan and self.plan.template:
            lines.append(f"script block from template {self.plan.template}")
        lines.append("decision time: " + ", ".join(f"{k} {v:.1f} ms"
                                                   for k, v in self.timings_ms.items()))
        if self.snapshot_age_s is not None:
            source = getattr(self.cluster, "source", "")
            where = f"cluster {source}" if source else "Slurm snapshot"
            lines.append(f"{where} taken {self.snapshot_age_s:.1f} s before the decision")
        return lines

    def why(self) -> list[str]:
        """The policy's reasons; marked as advice when its GPU choice was not applied."""
        why = list(self.placement.why if self.placement else ())
        if self.plan and self.plan.gpus_kept:
            why = [f"advised (its GPU choice not applied, see below): {w}" for w in why]
        return why

    def as_dict(self, script: str) -> dict[str, Any]:
        p = self.placement
        return {
            "policy": self.policy,
            "submitted": False,
            "unchanged_reason": self.unchanged_reason or None,
            "request": _plain(self.request),
            "placement": _plain(p),
            "why": self.why(),
            "notes": list(self.plan.notes) if self.plan else [],
            "sbatch_args_added": list(self.args),
            "template": self.plan.template if self.plan else "",
            "environment": dict(self.plan.env) if self.plan else {},
            "timings_ms": self.timings_ms,
            "snapshot_age_s": self.snapshot_age_s,
            "script": script,
        }


def _plain(obj: Any) -> Any:
    if obj is None:
        return None
    out = {}
    for name in obj.__slots__:
        value = getattr(obj, name)
        if isinstance(value, frozenset):
            value = sorted(value)
        elif isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, Mapping):
            value = dict(value)
        out[name] = value
    return out


class _Lazy:
    """Stands in for the snapshot or the readings and fetches them on first use only: a
    policy that never looks (``slurm-default``) costs no Slurm or InfluxDB query. ``start``
    fetches in a thread meanwhile (waiting on Slurm and InfluxDB leaves the interpreter free
    for the policy's imports and the template)."""

    __slots__ = ("_load", "_value", "_error", "_thread", "_owner", "load_ms", "waited_ms")

    def __init__(self, load: Callable[[], Any]) -> None:
        self._load, self._value, self._error, self._thread = load, None, None, None
        self._owner = get_ident()
        self.load_ms = 0.0          # how long fetching took
        self.waited_ms = 0.0        # how long the creating thread was blocked on it

    def start(self) -> None:
        import threading
        self._thread = threading.Thread(target=self._fetch, daemon=True)
        self._thread.start()

    def _fetch(self) -> None:
        t0 = time.perf_counter()
        try:
            self._value = self._load()
        except BaseException as exc:      # re-raised in the caller's thread by _get
            self._error = exc
        self.load_ms = (time.perf_counter() - t0) * 1e3

    def _get(self) -> Any:
        thread = self._thread
        if thread is not None or (self._value is None and self._error is None):
            t0 = time.perf_counter()
            if thread is not None:
                thread.join()
            else:
                self._fetch()
            if get_ident() == self._owner:
                self.waited_ms += (time.perf_counter() - t0) * 1e3
        if self._error is not None:
            raise self._error
        return self._value

    @property
    def loaded(self) -> bool:
        return self._value is not None

    @property
    def value(self) -> Any:
        """What was fetched (None: nothing yet)."""
        return self._value

    def settle(self) -> None:
        """Wait for a fetch still running (a thread left running at exit can crash Python's
        shutdown); what it found or raised is kept for nobody."""
        if self._thread is not None:
            self._thread.join()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get(), name)


def _check_elastic_range(lo: int, hi: int, cluster_gpus: int) -> None:
    """``--wb-elastic=MIN-MAX`` against the GPUs the cluster has (the snapshot's nodes): a range
    it cannot hold is the user's error, said before anything is submitted."""
    if cluster_gpus and hi > cluster_gpus:
        raise WbOptionError(f"--wb-elastic={lo}-{hi}: the cluster has {cluster_gpus} GPUs; "
                            f"give a MAX of at most {cluster_gpus}", key="elastic")


def _policy(name: str, wb: WbSettings, cfg: Any) -> Any:
    """The policy (or stack, ``pal+eaco``) named by ``--wb-policy`` (the user's error if
    unknown) or the site's (``policy.stages``, else ``policy.name``; checked at config load).

    An unknown name says where it was set, the names known and how to fix it: a
    :class:`WbOptionError` for ``--wb-policy`` (the caller puts where it was set in front), a
    :class:`ConfigError` for the site's."""
    if not wb.policy:
        _, where, key = config.site_policy(cfg)
        return kept_policy(name, source=where, key=key)
    try:
        return kept_policy(name, source="--wb-policy", key="policy")
    except ConfigError as exc:
        names = ", ".join(policy_names())
        where = wb.sources.get("policy", "command line")
        fix = (f"choose one of: {names} (or several joined by +), or leave --wb-policy out "
               "for the site's policy" if where == "command line" else
               f"set {where} to one of: {names}, or unset it" if where.startswith("$") else
               f"change that #WATTBATCH policy= setting to one of: {names}, or remove it")
        reason = "unknown policy" if exc.fix.startswith("choose") else \
            exc.fix.split("; choose")[0]
        raise WbOptionError(f"--wb-policy={name!r}: {reason}; {fix}", key="policy") from None


def decide(cmd: CommandLine, header: ScriptHeader, text: str, wb: WbSettings,
           environ: Mapping[str, str], providers: Any, now_s: float) -> Outcome:
    cfg = config.load(environ=environ)
    try:
        return _decide(cfg, cmd, header, text, wb, environ, providers, now_s)
    except Exception as exc:
        exc.wattbatch_cfg = cfg        # type: ignore[attr-defined]
        raise


def _decide(cfg: Any, cmd: CommandLine, header: ScriptHeader, text: str, wb: WbSettings,
            environ: Mapping[str, str], providers: Any, now_s: float) -> Outcome:
    name = wb.policy or config.site_policy(cfg)[0]
    view = merge(cmd.uses, header.uses, environ)
    out = Outcome(cfg=cfg, policy=name, original=text, script=text, wrap=view.has("wrap"))
    try:
        request = build_request(view, wb, script=cmd.script, now_s=now_s, environ=environ)
    except ValueError as exc:        # sbatch says so itself; a dry run stops on it
        out.unchanged_reason = str(exc)
        return out
    out.request = request
    for said in (deadline_warning(wb, request.time_limit_s, now_s), app_warning(wb),
                 batch_warning(wb)):
        if said:
            out.warnings.append(said)
    policy = _policy(name, wb, cfg)
    cluster = _Lazy(lambda: providers.snapshot(cfg))
    carbon = bool(getattr(policy, "reads_carbon", False))
    readings = _Lazy(lambda: providers.readings(cfg, cluster, now_s, carbon))
    settings = config.policy_settings(cfg, name)
    wanted = policy.prefetch(request, settings) if hasattr(policy, "prefetch") else ()
    if "cluster" in wanted or "readings" in wanted:     # the readings ask for running jobs
        cluster.start()
    if "readings" in wanted:
        readings.start()
    if wanted:
        warm_templates()
    try:
        ctx = Context(cluster=cluster, readings=readings, now_s=now_s,  # type: ignore[arg-type]
                      settings=settings, history=read_view(cfg["reconcile.state_dir"]))
        t0 = time.perf_counter()
        placement = policy.advise(request, ctx)
        t1 = time.perf_counter()
    finally:
        cluster.settle()
        readings.settle()
    policy_ms = (t1 - t0) * 1e3 - cluster.waited_ms - readings.waited_ms
    if readings.loaded:      # decided without a source that failed (timed out, skipped): say so
        out.warnings += [w for w in getattr(readings, "warnings", ()) if NOT_READ in w]
    if request.max_gpus is not None and cluster.loaded:
        _check_elastic_range(request.min_gpus or 1, request.max_gpus, cluster.gpu_count)
    site = translate.Site(cfg["slurm.share_gres"], cfg["slurm.shards_per_gpu"],
                          cfg["slurm.typed_gpus"], cfg["template.name"])
    ask = gpu_ask(view, min_nodes(view.get("nodes")))
    plan = translate.plan(placement, request, view, ask, wb, site, cluster,
                          shell_script=is_shell_script(text))
    out.placement, out.plan, out.args = placement, plan, list(plan.args)
    out.script = render(text, plan.template, plan.env, share_mode=plan.share_mode,
                        gpus=plan.gpus, mem_cap_mib=plan.mem_cap_mib,
                        mem_fraction=plan.mem_fraction)
    if out.script != text and not view.has("job_name"):
        # sbatch names a job after its script file; the rendered script reaches it otherwise
        out.args.append("--job-name=" + ("wrap" if out.wrap else
                                         os.path.basename(cmd.script) if cmd.script else "sbatch"))
    out.timings_ms = {"snapshot": cluster.load_ms, "readings": readings.load_ms,
                      "policy": policy_ms,
                      "plan+render": (time.perf_counter() - t1) * 1e3}
    if cluster.loaded:
        out.snapshot_age_s = round(max(0.0, now_s - cluster.taken_s), 3)
        out.cluster = cluster.value
        out.warnings += [w for w in cluster.warnings if w.startswith("cluster view ")]
    return out
