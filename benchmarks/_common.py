"""Shared by the benchmark scripts (not a benchmark): the working tree on ``sys.path``, input
checks that end in one error line and exit status 2 (``argparse``'s ``ap.error``), and the
formatting of figures that may be missing (``n/a (why)``, never ``nan``) and of goal verdicts."""

from __future__ import annotations

import argparse
import math
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))       # the checkout's slurm_plugin, not an installed copy


def finite(x: object) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def num(x: float | None, fmt: str, why: str = "", width: int = 0) -> str:
    """``x`` formatted, or ``n/a`` (with ``(why)`` when given) for None/NaN/inf."""
    s = format(x, fmt) if finite(x) else ("n/a" + (f" ({why})" if why else ""))
    return f"{s:>{width}}" if width else s


def goal(name: str, ok: bool | None, value: str) -> str:
    """One verdict line: ``goal NAME: met (VALUE)``; ``ok`` None: no verdict (n/a)."""
    verdict = "n/a" if ok is None else "met" if ok else "not met"
    return f"goal {name}: {verdict} ({value})"


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give an integer >= 1")
    return v


def nonneg_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give an integer >= 0")
    return v


def share(text: str) -> float:
    """argparse type: a fraction in [0, 1]."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a share from 0 to 1")
    return v


def nonneg_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number >= 0")
    return v


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    v = nonneg_float(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number > 0")
    return v


def input_file(ap: argparse.ArgumentParser, option: str, value: str | Path, what: str) -> Path:
    p = Path(value)
    if not p.is_file():
        ap.error(f"{option} {value}: {'no such file' if not p.exists() else 'not a file'}; "
                 f"give {what}")
    return p


def input_dir(ap: argparse.ArgumentParser, option: str, value: str | Path, what: str) -> Path:
    p = Path(value)
    if not p.is_dir():
        ap.error(f"{option} {value}: {'no such folder' if not p.exists() else 'not a folder'}; "
                 f"give {what}")
    return p


def _workload_key(p: Path) -> tuple:
    m = re.fullmatch(r"workload-(\d+)", p.stem)
    return (0, int(m.group(1)), "") if m else (1, 0, p.name)


def workload_files(ap: argparse.ArgumentParser, option: str, value: str) -> list[Path]:
    """The Pollux workload files of a folder: every ``*.csv``, ``workload-N.csv`` first by N,
    then the others by name; none is an error."""
    d = input_dir(ap, option, value, "the folder of Pollux workload-1..8.csv files")
    files = sorted((p for p in d.glob("*.csv") if p.is_file()), key=_workload_key)
    if not files:
        ap.error(f"{option} {value}: no *.csv in it; give the folder of Pollux workload "
                 "files (workload-1..8.csv)")
    return files


@contextmanager
def input_errors(ap: argparse.ArgumentParser, prefix: str = "") -> Iterator[None]:
    """The package's InputError/ConfigError (also from a process pool's child) as one error
    line and exit status 2, no traceback."""
    from slurm_plugin.errors import ConfigError, InputError
    try:
        yield
    except (InputError, ConfigError) as exc:
        ap.error(f"{prefix}{exc}")


def pool_safe(fn):
    """A process pool's task that raises ConfigError as InputError (the same message):
    ConfigError does not survive the trip back to the parent (it cannot be unpickled)."""
    import functools

    @functools.wraps(fn)
    def task(*args, **kwargs):
        from slurm_plugin.errors import ConfigError, InputError
        try:
            return fn(*args, **kwargs)
        except ConfigError as exc:
            raise InputError(str(exc)) from None
    return task
