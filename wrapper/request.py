"""From the merged sbatch options to a ``model.JobRequest``.

Merging follows sbatch: command line > ``SBATCH_*`` environment > ``#SBATCH`` lines; for each
option the last occurrence of a layer counts.
"""

from __future__ import annotations

import math
import os
import re
import time

from slurm_plugin.model import JobRequest
from slurm_plugin.record import field, record

from .options import OPTIONS
from .sbatch_args import OptUse
from .wb_options import WbSettings

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Callable, Mapping


@record
class SbatchView:
    """The options the policy looks at: field name -> (value, source)."""

    values: Mapping[str, str | None] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.values.get(name, default)

    def has(self, name: str) -> bool:
        return name in self.values


def merge(cli: list[OptUse], script: list[OptUse], environ: Mapping[str, str]) -> SbatchView:
    values: dict[str, str | None] = {}
    sources: dict[str, str] = {}
    for use in script:
        if use.opt.field:
            values[use.opt.field], sources[use.opt.field] = use.value, f"script line {use.line}"
    for opt in OPTIONS:
        if opt.field and opt.env and opt.env in environ:
            values[opt.field], sources[opt.field] = environ[opt.env], f"${opt.env}"
    for use in cli:
        if use.opt.field:
            values[use.opt.field], sources[use.opt.field] = use.value, "command line"
    return SbatchView(values, sources)


# --- time formats ---------------------------------------------------------------------------

_UNLIMITED = ("infinite", "unlimited", "-1")
_TIME = re.compile(r"(?:([0-9]+)-([0-9]+)(?::([0-9]+))?(?::([0-9]+))?"
                   r"|([0-9]+)(?::([0-9]+))?(?::([0-9]+))?)")
_TIME_FORMS = "minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED/INFINITE"


def parse_time_limit_s(text: str) -> float | None:
    """Slurm ``--time``: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S; UNLIMITED/INFINITE -> None.

    ``0`` means no limit too (sbatch: "a time limit of zero requests that no time limit be
    imposed"). Raises ``ValueError`` on anything else, naming the value and the forms sbatch
    takes."""
    t = text.strip().lower()
    if t in _UNLIMITED or t == "0":
        return None
    m = _TIME.fullmatch(t)
    if m is None:
        raise ValueError(f"--time={text!r}: not a time limit sbatch takes; give {_TIME_FORMS} "
                         "(e.g. --time=90 or --time=1-12:00:00)")
    if m.group(1) is not None:                     # D-H[:M[:S]]
        days, h, mi, s = (int(g or 0) for g in m.group(1, 2, 3, 4))
    else:                                          # M, M:S, H:M:S
        days = 0
        parts = [int(g) for g in m.group(5, 6, 7) if g is not None]
        h, mi, s = parts if len(parts) == 3 else (0, *parts, 0)[:3]
    return float(((days * 24 + h) * 60 + mi) * 60 + s)


_UNITS = {"": 1, "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
          "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
          "h": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400, "days": 86400,
          "w": 604800, "week": 604800, "weeks": 604800}
_NAMED = {"midnight": (0, 0), "noon": (12, 0), "elevenses": (11, 0), "fika": (15, 0),
          "teatime": (16, 0)}


def parse_instant_s(text: str, now_s: float) -> float:
    """Slurm ``--begin``/``--deadline`` times, in local time: ``now[+N[units]]``,
    ``HH:MM[:SS][AM|PM]``, ``YYYY-MM-DD[THH:MM[:SS]]``, ``MMDDYY``, ``MM/DD[/YY]``,
    ``today``, ``tomorrow``, ``midnight``, ``noon``, ``elevenses``, ``fika``, ``teatime``."""
    t = text.strip().lower()
    m = re.fullmatch(r"now(?:\+(\d+)([a-z]*))?", t)
    if m:
        if (m.group(2) or "") not in _UNITS:
            raise ValueError(text)
        return now_s + int(m.group(1) or 0) * _UNITS[m.group(2) or ""]
    lt = time.localtime(now_s)
    base = time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, 0, 0, 0, 0, 0, -1))
    if t == "today":
        return base
    if t == "tomorrow":
        return time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday + 1, 0, 0, 0, 0, 0, -1))
    if t in _NAMED or re.fullmatch(r"\d{1,2}:\d{2}(:\d{2})?(am|pm)?", t):
        if t in _NAMED:
            h, mi, s = *_NAMED[t], 0
        else:
            clock = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}))?(am|pm)?", t)
            h, mi, s = int(clock.group(1)), int(clock.group(2)), int(clock.group(3) or 0)
            if clock.group(4) == "pm" and h < 12:
                h += 12
            elif clock.group(4) == "am" and h == 12:
                h = 0
        at = time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, h, mi, s, 0, 0, -1))
        return at if at > now_s else time.mktime(
            (lt.tm_year, lt.tm_mon, lt.tm_mday + 1, h, mi, s, 0, 0, -1))
    m = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})(?:t(\d{1,2}):(\d{2})(?::(\d{2}))?)?", t)
    if m:
        y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
        h, mi, s = int(m.group(4) or 0), int(m.group(5) or 0), int(m.group(6) or 0)
        return time.mktime((y, mo, d, h, mi, s, 0, 0, -1))
    m = re.fullmatch(r"(\d{2})(\d{2})(\d{2})|(\d{1,2})/(\d{1,2})(?:/(\d{2}))?", t)
    if m:
        if m.group(1):
            mo, d, y = int(m.group(1)), int(m.group(2)), 2000 + int(m.group(3))
        else:
            mo, d = int(m.group(4)), int(m.group(5))
            y = 2000 + int(m.group(6)) if m.group(6) else lt.tm_year
        return time.mktime((y, mo, d, 0, 0, 0, 0, 0, -1))
    raise ValueError(text)


# --- GPUs ------------------------------------------------------------------------------------

@record
class GresEntry:
    name: str
    type: str
    count: int
    text: str            # as written


def parse_gres(text: str) -> list[GresEntry]:
    """``--gres`` list: ``name[:type][:count]`` entries, comma separated (``gres:`` prefix ok)."""
    out = []
    for raw in filter(None, (p.strip() for p in text.split(","))):
        item = raw
        for prefix in ("gres:", "gres/"):
            if item.startswith(prefix):
                item = item[len(prefix):]
        parts = item.split(":")
        count = 1
        if len(parts) > 1 and re.fullmatch(r"\d+[kmg]?", parts[-1].lower()):
            count = _count(parts.pop())
        out.append(GresEntry(parts[0], parts[1] if len(parts) > 1 else "", count, raw))
    return out


def _count(text: str) -> int:
    t = text.lower()
    mult = {"k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}.get(t[-1:], 1)
    return int(t.rstrip("kmg")) * mult


def _typed_count(text: str) -> tuple[str, int]:
    """``[type:]N`` as in ``--gpus-per-node=v100:2``."""
    kind, _, count = text.rpartition(":")
    return kind, _count(count)


def min_nodes(text: str | None) -> int:
    if not text:
        return 1
    m = re.match(r"\d+", text)
    return max(1, int(m.group(0))) if m else 1


@record
class GpuAsk:
    gpus: int = 0            # per node
    model: str = ""
    source: str = ""         # "gres", "gpus-per-node", "gpus", "gpus-per-task", ""
    shared: bool = False     # the user asked for shard/mps GRES themselves


# options that ask for GPUs outside --gres (sbatch cannot take them back), in the order read
_GPU_OPTIONS = (("gpus_per_node", "gpus-per-node"), ("gpus", "gpus"),
                ("gpus_per_task", "gpus-per-task"), ("gpus_per_socket", "gpus-per-socket"),
                ("tres_per_task", "tres-per-task"))


def _gpu_value(view: SbatchView, name: str) -> str:
    """The ``[type:]N`` an option asks for ("" if none); ``--tres-per-task``: its
    ``gres/gpu[:type]:N`` entry (24.11+, the same as ``--gpus-per-task``)."""
    text = view.get(name) or ""
    if name != "tres_per_task":
        return text
    gpu = next((e for e in parse_gres(text) if e.name == "gpu"), None)
    return f"{gpu.type}:{gpu.count}" if gpu else ""


def gpus_option(view: SbatchView) -> str:
    """The first ``--gpus*`` option (or ``--tres-per-task=gres/gpu``) in effect, "" if none."""
    return next((source for name, source in _GPU_OPTIONS if _gpu_value(view, name)), "")


def gpu_ask(view: SbatchView, nodes: int) -> GpuAsk:
    if view.get("gres"):
        entries = parse_gres(view.get("gres") or "")
        if any(e.name in ("shard", "mps") for e in entries):
            return GpuAsk(source="gres", shared=True)
        for e in entries:
            if e.name == "gpu":
                return GpuAsk(e.count, e.type, "gres")
    for name, source in _GPU_OPTIONS:
        if _gpu_value(view, name):
            try:
                kind, count = _typed_count(_gpu_value(view, name))
            except ValueError:
                raise ValueError(f"{view.sources.get(name, 'command line')}: --{source}="
                                 f"{view.get(name)!r}: not a GPU count sbatch takes; give "
                                 "[TYPE:]N, e.g. 2 or a100:2") from None
            if name == "gpus":
                count = math.ceil(count / nodes)
            return GpuAsk(count, kind, source)
    return GpuAsk()


def requested_model(gres_type: str, constraint: str) -> str:
    """The GPU model a job asks for, in the catalogue's spelling where it names one: its GRES
    type's model (``a100``, ``nvidia_h100_80gb_hbm3``, ``h100_80gb_hbm3_g0`` as the snapshot
    reads GPUs' types), else one of the features its ``--constraint`` requires (a plain
    ``&``-list, such as ``h100&ib``) that names a catalogued model, else the type as given
    ("" for none: any model)."""
    if gres_type:
        from slurm_plugin.slurm.parse import type_model
        return type_model(gres_type, gres_type)
    if constraint and not any(c in constraint for c in "|[]*,"):
        from slurm_plugin.errors import ConfigError
        from slurm_plugin.physics.constants import catalogue_entry
        for feature in constraint.split("&"):
            try:
                return catalogue_entry(feature.strip())
            except ConfigError:
                continue
    return ""


def _user(environ: Mapping[str, str]) -> str:
    try:
        import pwd
        return pwd.getpwuid(os.getuid()).pw_name
    except (KeyError, ImportError):
        return environ.get("USER", "")


def default_job_name(script: str | None, wrap: bool) -> str:
    """The name sbatch gives a job without ``--job-name``."""
    if wrap:
        return "wrap"
    return os.path.basename(script) if script else "sbatch"


def _slack_s(wb: WbSettings, limit_s: float | None, now_s: float) -> float | None:
    """``--wb-slack``, or the room ``--wb-deadline`` leaves after the time limit (the smaller
    when both are given); None: the job is not deferrable."""
    slacks = [wb.slack_s] if wb.slack_s else []
    if wb.deadline:
        slacks.append(max(0.0, parse_instant_s(wb.deadline, now_s) - now_s - (limit_s or 0.0)))
    return min(slacks) if slacks else None


def _span(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"


def deadline_warning(wb: WbSettings, limit_s: float | None, now_s: float) -> str:
    """What to say (once, the job still goes in) when ``--wb-deadline`` leaves no slack: it has
    passed, or it is no further away than the job's time limit; "" otherwise."""
    if not wb.deadline:
        return ""
    left_s = parse_instant_s(wb.deadline, now_s) - now_s
    head = f"{wb.sources.get('deadline', 'command line')}: --wb-deadline={wb.deadline!r}: "
    tail = ("the job gets no slack (it is placed as if no deadline were given); "
            "give a later deadline")
    if left_s <= 0:
        return head + "that time has passed; " + tail
    if limit_s is not None and left_s <= limit_s:
        return (head + f"only {_span(left_s)} away, within the job's time limit "
                f"({_span(limit_s)}): it cannot be met unless the job starts now; " + tail
                + " or a shorter --time")
    return ""


def app_warning(wb: WbSettings) -> str:
    """What to say (once, the job still goes in) when ``--wb-app`` names no known workload
    class: the policies that predict from the class treat the job as of unknown class."""
    if not wb.app:
        return ""
    from slurm_plugin.errors import InputError
    from slurm_plugin.physics import class_names, job_class
    from slurm_plugin.physics.pollux import pollux_apps
    if wb.app.strip().lower() in pollux_apps():     # a scaling profile's (elastic, ones)
        return ""
    try:
        job_class(wb.app)
    except InputError:
        return (f"{wb.sources.get('app', 'command line')}: --wb-app={wb.app!r}: not a known "
                f"workload class, so the policies that predict from it (eaco's sharing, pal's "
                f"class, greenflow's models) treat the job as unknown; give the nearest in kind of: "
                f"{', '.join(class_names())}")
    return ""


def batch_warning(wb: WbSettings) -> str:
    """What to say (once, the job still goes in) when ``--wb-batch-size`` gives a range no
    batch-size advice can use: ``ones`` advises batches only for an application with a
    batch-size profile (``--wb-app``), and only within its profiled global batch sizes."""
    if not wb.batch_size:
        return ""
    from slurm_plugin.physics.pollux import pollux_apps
    from slurm_plugin.physics.pollux_batch import measured_batch_range
    lo, hi = wb.batch_size
    head = f"{wb.sources.get('batch_size', 'command line')}: --wb-batch-size={lo}-{hi}: "
    app = wb.app.strip().lower()
    if app not in pollux_apps():
        named = f"--wb-app={wb.app!r} has none" if wb.app else "no --wb-app names one"
        return (head + f"batch sizes are advised only for an application with a batch-size "
                f"profile ({named}), so the job keeps its own batch; give --wb-app= one of: "
                f"{', '.join(pollux_apps())}")
    m_lo, m_hi = measured_batch_range(app)
    if hi < m_lo or lo > m_hi:
        return (head + f"outside {app}'s profiled global batch sizes ({m_lo}-{m_hi}), so no "
                f"batch can be advised and the job keeps its own; give a range that meets "
                f"{m_lo}-{m_hi}")
    return ""


def array_task_count(text: str) -> int:
    """Tasks of an ``--array`` spec (``0-15``, ``1,3,5-7``, ``0-15:4``, ``1-8%2``: the limit
    changes how many run at once, not how many there are); 2 for one wattbatch cannot read
    (sbatch judges it; it stands for several tasks)."""
    total = 0
    for part in text.split("%", 1)[0].split(","):
        span, _, step = part.strip().partition(":")
        lo, dash, hi = span.partition("-")
        try:
            first, last, by = int(lo), int(hi) if dash else int(lo), int(step) if step else 1
        except ValueError:
            return 2
        if first < 0 or last < first or by < 1:
            return 2
        total += (last - first) // by + 1
    return total


def _read(view: SbatchView, name: str, parse: Callable[[str], float | None]) -> float | None:
    """``parse`` of option ``name``'s value; its ``ValueError`` also says where the value came
    from (``command line``, ``script line N``, ``$SBATCH_...``)."""
    try:
        return parse(view.get(name) or "")
    except ValueError as exc:
        raise ValueError(f"{view.sources.get(name, 'command line')}: {exc}") from None


def _deadline_s(text: str, now_s: float) -> float:
    try:
        return parse_instant_s(text, now_s)
    except ValueError:
        raise ValueError(f"--deadline={text!r}: not a time sbatch takes; give e.g. "
                         "2026-12-01T08:00, now+6hours, tomorrow") from None


def build_request(view: SbatchView, wb: WbSettings, *, script: str | None, now_s: float,
                  environ: Mapping[str, str]) -> JobRequest:
    """Raises ``ValueError`` for a value sbatch would reject, saying which option, where it was
    set and what sbatch takes (the caller submits unchanged; a dry run stops)."""
    nodes = min_nodes(view.get("nodes"))
    ask = gpu_ask(view, nodes)
    limit = view.get("time")
    deadline = view.get("deadline")
    name = view.get("job_name") or default_job_name(script, view.has("wrap"))
    user = _user(environ)
    lo, hi = wb.elastic or (None, None)
    b_lo, b_hi = wb.batch_size or (None, None)
    limit_s = _read(view, "time", parse_time_limit_s) if limit else None
    deadline_s = _read(view, "deadline", lambda text: _deadline_s(text, now_s)) if deadline \
        else None
    return JobRequest(
        name=name, user=user, account=view.get("account") or "",
        partition=view.get("partition") or "", gpus=ask.gpus, num_nodes=nodes,
        gpu_model=requested_model(ask.model, view.get("constraint") or ""), gpu_type=ask.model,
        time_limit_s=limit_s,
        deadline_s=deadline_s,
        slack_s=_slack_s(wb, limit_s, now_s),
        app=wb.app, memory_per_gpu_mib=wb.gpu_mem_mib, min_gpus=lo, max_gpus=hi,
        min_batch_size=b_lo, max_batch_size=b_hi, lr_scaling=wb.lr_scaling,
        allow_share=wb.share, opt_out=wb.opt_out, submit_s=now_s,
        repeat_key=f"{user}:{name}:{wb.app}",
        array_tasks=array_task_count(view.get("array")) if view.get("array") else 1)
