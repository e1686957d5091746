"""Render the final batch script: a pure function of the user's script and the plan.

The user's bytes are kept as they are: wattbatch only inserts its block (from
``templates/*.sbatch.j2``) above the script's first command, the one line where shell code may
go without hiding any ``#SBATCH`` line from sbatch. Every value a template prints is shell-quoted
(``shlex.quote``) by the environment's ``finalize`` hook; only the user's own text passes
through as it is.
"""

from __future__ import annotations

import re
import shlex
from functools import lru_cache

from slurm_plugin.resources import templates_dir

from .sbatch_args import header_end

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Any, Sequence

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh"})
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


class Verbatim(str):
    """Text printed as is (the user's script, checked variable names); all else is quoted."""


def _finalize(value: Any) -> str:
    if isinstance(value, Verbatim):
        return value
    return shlex.quote(str(value))


@lru_cache(maxsize=1)
def _environment() -> Any:
    import jinja2   # lazy: ~25 ms, paid only when a script needs a block

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())), autoescape=False,
        finalize=_finalize, keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True,
        undefined=jinja2.StrictUndefined, bytecode_cache=_bytecode_cache(jinja2))


def _bytecode_cache(jinja2: Any) -> Any:
    """Compiled templates kept in the user's wattbatch cache directory (beside the site-config
    cache), so a submission loads them instead of compiling (~10 ms each); jinja2 checks each
    against its template's source. None when that directory cannot be made."""
    import os

    from slurm_plugin.config import cache_dir
    where = os.path.join(cache_dir(), "templates")
    try:
        os.makedirs(where, mode=0o700, exist_ok=True)
    except OSError:
        return None
    return jinja2.FileSystemBytecodeCache(where) if os.access(where, os.W_OK) else None


def warm_templates() -> None:
    """Load jinja2 and the templates now (while Slurm and InfluxDB are being asked)."""
    env = _environment()
    for name in env.list_templates(extensions=["j2"]):
        env.get_template(name)


def interpreter(script: str) -> list[str]:
    """The shebang's words (``["/usr/bin/env", "bash"]``); ``[]`` without a shebang."""
    first = script.split("\n", 1)[0]
    return first[2:].split() if first.startswith("#!") else []


def is_shell_script(script: str) -> bool:
    words = interpreter(script)
    if not words:
        return False
    prog = words[1] if words[0].endswith("/env") and len(words) > 1 else words[0]
    return prog.rsplit("/", 1)[-1] in SHELLS


def _mps_values(share_mode: str, gpus: int, cap: int | None,
                fraction: float | None) -> dict[str, Any]:
    limit = ",".join(f"{i}={cap}M" for i in range(max(1, gpus))) if cap else ""
    pct = max(1, min(100, round(100 * fraction))) if fraction else 100
    return {"mps_mem_limit": limit, "mps_thread_pct": pct} if share_mode == "mps" else {}


def render(script: str, template: str, env: Sequence[tuple[str, str]], *,
           share_mode: str = "exclusive", gpus: int = 1, mem_cap_mib: int | None = None,
           mem_fraction: float | None = None) -> str:
    """The user's ``script`` with wattbatch's block from ``template`` above its first command.

    ``template == ""`` returns the script unchanged."""
    if not template:
        return script
    lines = script.split("\n")
    k = header_end(lines)
    head = "\n".join(lines[:k]) + ("\n" if k < len(lines) else "")
    tail = "\n".join(lines[k:])
    for name, _ in env:
        if not _ENV_NAME.fullmatch(name):
            raise ValueError(f"render: invalid environment variable name {name!r}")
    values = {
        "head": Verbatim(head), "tail": Verbatim(tail),
        "newline_if_needed": Verbatim("" if not head or head.endswith("\n") else "\n"),
        "env": [(Verbatim(n), v) for n, v in env],
        "batch_advice": any(n == "WATTBATCH_BATCH_RANGE" for n, _ in env),
        "share_mode": share_mode, "mem_fraction": f"{mem_fraction:g}" if mem_fraction else "",
        "interpreter": Verbatim(" ".join(shlex.quote(w) for w in interpreter(script))),
        **_mps_values(share_mode, gpus, mem_cap_mib, mem_fraction),
    }
    return _environment().get_template(template).render(values)
