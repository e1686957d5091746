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


def _number(cast, lo: float, strict: bool, hi: float | None, what: str):
    """An argparse type: ``cast(text)``, finite, at least (above, with ``strict``) ``lo`` and at
    most ``hi``; the message says what to give."""
    def check(text: str):
        try:
            v = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'an integer' if cast is int else 'a number'}") from None
        if not math.isfinite(v) or v < lo or (strict and v == lo) or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"{text!r}: give {what}")
        return v
    return check


positive_int = _number(int, 1, False, None, "an integer >= 1")
nonneg_int = _number(int, 0, False, None, "an integer >= 0")
share = _number(float, 0.0, False, 1.0, "a share from 0 to 1")
nonneg_float = _number(float, 0.0, False, None, "a number >= 0")
positive_float = _number(float, 0.0, True, None, "a number > 0")


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


def read_traces(ap: argparse.ArgumentParser, pollux: list[Path], philly: str | None) -> None:
    """Every trace read once before any run: a bad one is one error line, exit status 2."""
    from slurm_plugin.sim.trace import read_trace
    with input_errors(ap):
        for p in pollux:
            read_trace(p, "pollux")
        if philly:
            read_trace(philly, "philly")
