"""wattbatch's own options: ``--wb-*`` words, ``#WATTBATCH`` lines, ``WATTBATCH_*`` variables.

Precedence: command line > ``#WATTBATCH`` lines > environment > site config. Within one layer
two flags of one setting that contradict each other (``--wb-share --wb-no-share``) are an error.

* Command line: ``--wb-NAME`` for a flag, ``--wb-NAME=VALUE`` or ``--wb-NAME VALUE`` otherwise,
  anywhere before the script path (after it, words belong to the script).
* Script: ``#WATTBATCH`` lines at column 0 above the first command (the ``#SBATCH`` rule). Each
  holds one or more words, split like a shell line (quotes, ``#`` comment), each written
  ``--wb-NAME[=VALUE]`` or plain ``NAME[=VALUE]``; a value may also be the next word.
  Example: ``#WATTBATCH app=resnet18 no-share opt-out=defer``.
* Environment: ``WATTBATCH_<NAME>`` with ``-`` as ``_`` (``WATTBATCH_DRY_RUN=1``); flags read
  1/true/yes/on or 0/false/no/off. ``WATTBATCH_SHARE=0`` is ``--wb-no-share``.
"""

from __future__ import annotations

import shlex

from slurm_plugin.errors import InputError
from slurm_plugin.record import field, record

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping

ACTIONS = ("share", "defer", "resize", "place", "power", "batch")


class WbOptionError(InputError):
    """A wattbatch option is unknown or its value is invalid: on the command line exit 255 (nothing
    submitted); from the environment or a ``#WATTBATCH`` line one warning, job unchanged.
    ``key``: the :class:`WbSettings` field at fault, when known (found after resolving)."""

    def __init__(self, message: str, key: str = "") -> None:
        super().__init__(message)
        self.key = key


@record
class WbOpt:
    name: str
    key: str                  # WbSettings field it sets
    help: str
    parse: Callable[[str], Any] | None = None    # None: a flag
    flag_value: Any = True

    @property
    def env(self) -> str:
        return "WATTBATCH_" + self.name.replace("-", "_").upper()


def _opt_out(text: str) -> frozenset[str]:
    items = {w.strip() for w in text.split(",") if w.strip()}
    if "all" in items:
        return frozenset(ACTIONS)
    bad = sorted(items - set(ACTIONS))
    if bad:
        raise ValueError(f"unknown action {bad[0]!r}; choose from {', '.join(ACTIONS)}, all")
    return frozenset(items)


def _range(text: str, what: str, example: str) -> tuple[int, int]:
    """``MIN-MAX`` (or one number) of ``what``, with 1 <= MIN <= MAX."""
    lo, sep, hi = text.partition("-")
    try:
        lo_n, hi_n = int(lo), int(hi if sep else lo)
    except ValueError:
        raise ValueError(f"expected MIN-MAX {what}, e.g. {example}") from None
    if not 1 <= lo_n <= hi_n:
        raise ValueError(f"expected 1 <= MIN <= MAX ({what})")
    return lo_n, hi_n


def _elastic(text: str) -> tuple[int, int]:
    return _range(text, "GPUs", "1-4")


def _batch(text: str) -> tuple[int, int]:
    return _range(text, "global batch sizes", "64-1024")


def _lr_rule(text: str) -> str:
    if text not in ("linear", "sqrt"):
        raise ValueError("expected linear or sqrt")
    return text


def _mib(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError("expected a positive number of MiB")
    return value


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _duration_s(text: str) -> float:
    t = text.strip().lower()
    unit = _DURATION_UNITS.get(t[-1:], 0)
    try:
        value = float(t[:-1] if unit else t) * (unit or 1)
    except ValueError:
        value = -1.0
    if not 0 < value <= 365 * 86400:
        raise ValueError("expected a duration such as 6h, 90m, 2d or 3600 (seconds)")
    return value


def _instant(text: str) -> str:
    from .request import parse_instant_s
    try:
        parse_instant_s(text, 0.0)
    except ValueError:
        raise ValueError("expected a time as sbatch --begin takes it, e.g. "
                         "2026-12-01T08:00, now+6hours, tomorrow") from None
    return text


def _name(text: str) -> str:
    if not text or any(c.isspace() for c in text):
        raise ValueError("expected a non-empty name without spaces")
    return text


WB_OPTIONS: tuple[WbOpt, ...] = (
    WbOpt("dry-run", "dry_run", "print the decision and the final script; submit nothing"),
    WbOpt("json", "json", "as --wb-dry-run, printed as one JSON object"),
    WbOpt("explain", "explain", "print why the job is placed as it is (stderr), then submit"),
    WbOpt("share", "share", "allow this job to share a GPU with others"),
    WbOpt("no-share", "share", "never share a GPU with this job", flag_value=False),
    WbOpt("opt-out", "opt_out", f"refuse policy actions: comma list of {', '.join(ACTIONS)}, all",
          _opt_out),
    WbOpt("policy", "policy", "advise this job with policy NAME, or a stack of them joined by + "
          "(see `wattctl policies`)", _name),
    WbOpt("app", "app", "workload class of the job (e.g. resnet18; see the classes in docs/physics.md), used for predictions", _name),
    WbOpt("elastic", "elastic", "the job runs on MIN-MAX GPUs and checkpoints on SIGTERM/USR1",
          _elastic),
    WbOpt("batch-size", "batch_size", "the scheduler may set the job's global batch size within "
          "MIN-MAX (policy ones; the job asks for it with wattbatch-progress)", _batch),
    WbOpt("lr-scaling", "lr_scaling", "how the job scales its learning rate with a new batch "
          "size: linear (default) or sqrt", _lr_rule),
    WbOpt("gpu-mem", "gpu_mem_mib", "GPU memory the job needs per GPU, in MiB", _mib),
    WbOpt("slack", "slack_s", "the job may start this much later than now (e.g. 6h), when "
          "the grid is cleaner; marks it deferrable", _duration_s),
    WbOpt("deadline", "deadline", "the job should finish by this time (sbatch --begin's "
          "format); the time between now and it, less its time limit, is its slack", _instant),
    WbOpt("off", "off", "bypass wattbatch: hand everything to sbatch unchanged"),
    WbOpt("help", "help", "print this help"),
)
BY_NAME: dict[str, WbOpt] = {o.name: o for o in WB_OPTIONS}


@record
class WbSettings:
    dry_run: bool = False
    json: bool = False
    explain: bool = False
    share: bool | None = None
    opt_out: frozenset[str] = frozenset()
    policy: str | None = None
    app: str = ""
    elastic: tuple[int, int] | None = None
    batch_size: tuple[int, int] | None = None
    lr_scaling: str = ""
    gpu_mem_mib: int | None = None
    slack_s: float | None = None
    deadline: str | None = None
    off: bool = False
    help: bool = False
    sources: Mapping[str, str] = field(default_factory=dict)   # field -> where it was set


def takes_value(name: str) -> bool:
    opt = BY_NAME.get(name)
    return bool(opt and opt.parse)


def valid_names() -> str:
    return ", ".join(f"--wb-{o.name}" for o in WB_OPTIONS)


def _apply(values: dict[str, Any], sources: dict[str, str], where: str, name: str,
           value: str | None) -> None:
    opt = BY_NAME.get(name)
    if opt is None:
        raise WbOptionError(f"wattbatch: {where}: unknown option --wb-{name}; "
                            f"valid options: {valid_names()}")
    if opt.parse is None:
        if value is not None:
            raise WbOptionError(f"wattbatch: {where}: --wb-{name} takes no value (got {value!r})")
        values[opt.key] = opt.flag_value
    else:
        if value is None:
            raise WbOptionError(f"wattbatch: {where}: --wb-{name} needs a value: {opt.help}")
        try:
            values[opt.key] = opt.parse(value)
        except ValueError as exc:
            raise WbOptionError(f"wattbatch: {where}: --wb-{name}={value!r}: {exc}") from None
    sources[opt.key] = where


def _flag_env(name: str, raw: str) -> bool:
    text = raw.strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise WbOptionError(f"wattbatch: ${name}={raw!r}: expected 1/0, true/false, yes/no, on/off")


def _from_env(environ: Mapping[str, str], values: dict[str, Any], sources: dict[str, str]) -> None:
    for opt in WB_OPTIONS:
        if opt.env not in environ or opt.name in ("no-share", "help"):
            continue
        raw = environ[opt.env]
        if opt.parse is None:
            values[opt.key] = _flag_env(opt.env, raw)
            sources[opt.key] = f"${opt.env}"
        elif raw.strip():
            _apply(values, sources, f"${opt.env}", opt.name, raw.strip())


def _script_words(lineno: int, text: str) -> list[tuple[str, str | None]]:
    where = f"script line {lineno}"
    try:
        words = shlex.split(text, comments=True)
    except ValueError as exc:
        raise WbOptionError(f"wattbatch: {where}: malformed #WATTBATCH line: {exc}") from None
    out: list[tuple[str, str | None]] = []
    k = 0
    while k < len(words):
        word = words[k]
        bare = word[len("--wb-"):] if word.startswith("--wb-") else word
        if bare.startswith("-"):
            raise WbOptionError(f"wattbatch: {where}: malformed #WATTBATCH word {word!r}: write "
                                f"NAME[=VALUE] or --wb-NAME[=VALUE]; valid options: {valid_names()}")
        name, eq, value = bare.partition("=")
        if not eq and takes_value(name) and k + 1 < len(words):
            out.append((name, words[k + 1]))
            k += 2
            continue
        out.append((name, value if eq else None))
        k += 1
    return out


def _no_contradiction(layer: str, words: list[tuple[str, str | None]]) -> None:
    """Two flags of one setting that say opposite things in the same layer (``--wb-share
    --wb-no-share``) are a mistake to point out, not a choice to make silently; a later layer
    still overrides an earlier one (the command line over the script)."""
    said: dict[str, str] = {}
    for name, _ in words:
        opt = BY_NAME.get(name)
        if opt is None or opt.parse is not None:
            continue
        first = said.setdefault(opt.key, name)
        if first != name:
            raise WbOptionError(f"wattbatch: {layer}: --wb-{first} and --wb-{name} contradict "
                                f"each other; keep one of them")


def resolve(cli_words: list[tuple[str, str | None]], script_lines: list[tuple[int, str]],
            environ: Mapping[str, str]) -> WbSettings:
    """Merge the three layers (later wins): environment, ``#WATTBATCH`` lines, command line."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    _from_env(environ, values, sources)
    script_words = [(f"script line {lineno}", name, value)
                    for lineno, text in script_lines for name, value in _script_words(lineno, text)]
    _no_contradiction("the script's #WATTBATCH lines", [(n, v) for _, n, v in script_words])
    _no_contradiction("the command line", cli_words)
    for where, name, value in script_words:
        _apply(values, sources, where, name, value)
    for name, value in cli_words:
        _apply(values, sources, "command line", name, value)
    if values.get("json"):
        values["dry_run"] = True
    return WbSettings(**values, sources=sources)


DRY_RUN_KEYS = ("dry_run", "json")


def dry_run_wanted(cli_words: list[tuple[str, str | None]], script_lines: list[tuple[int, str]],
                   environ: Mapping[str, str]) -> tuple[str, bool]:
    """(where a dry run is asked for, "" if nowhere; whether as JSON), read apart from the other
    settings: a bad one elsewhere must never turn a dry run into a submission. Nothing turns a
    dry run off once asked, so any layer counts. Raises :class:`WbOptionError` when the value
    meant to say yes or no cannot be read (``WATTBATCH_DRY_RUN=maybe``, ``dry-run=yes``)."""
    asked: list[tuple[str, str]] = []          # (where, key)
    for name, value in cli_words:
        opt = BY_NAME.get(name)
        if opt is not None and opt.key in DRY_RUN_KEYS:
            _apply({}, {}, "command line", name, value)       # raises on a value
            asked.append(("command line", opt.key))
    for lineno, text in script_lines:
        where = f"script line {lineno}"
        try:
            words = _script_words(lineno, text)
        except WbOptionError:                   # malformed: its plain words still count here
            words = [(w.removeprefix("--wb-").partition("=")[0], None)
                     for w in text.partition("#")[0].split()]
        for name, value in words:
            opt = BY_NAME.get(name)
            if opt is not None and opt.key in DRY_RUN_KEYS:
                _apply({}, {}, where, name, value)
                asked.append((where, opt.key))
    for opt in WB_OPTIONS:
        if opt.key in DRY_RUN_KEYS and opt.env in environ and _flag_env(opt.env, environ[opt.env]):
            asked.append((f"${opt.env}", opt.key))
    return (asked[0][0] if asked else ""), any(key == "json" for _, key in asked)


def help_text() -> str:
    heads = [f"--wb-{o.name}" + ("=VALUE" if o.parse else "") for o in WB_OPTIONS]
    width = max(map(len, heads))
    rows = "\n".join(f"  {h:<{width}}  {o.help}" for h, o in zip(heads, WB_OPTIONS))
    return ("Usage: wattbatch [sbatch options] [wattbatch options] [script [args...]]\n"
            "A drop-in sbatch: every sbatch option is passed to sbatch unchanged.\n\n"
            f"wattbatch options:\n{rows}\n\n"
            "They can also be set by '#WATTBATCH NAME[=VALUE] ...' lines above the first\n"
            "command of the script, and by WATTBATCH_<NAME> variables (WATTBATCH_DRY_RUN=1).\n"
            "Precedence: command line > #WATTBATCH > environment > site config.\n")
