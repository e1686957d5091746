"""Points that could not reach InfluxDB, kept on the node until a later pass sends them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from ..errors import TelemetryError
from ..telemetry.lineproto import Point

SPOOL_DIR = "spool"


def keep(state_dir: str | os.PathLike, name: str, points: Iterable[Point]) -> Path:
    """Store ``points`` as line protocol in ``<state_dir>/spool/<name>.lp``."""
    path = Path(state_dir) / SPOOL_DIR / f"{name}.lp"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(p.to_line() + "\n" for p in points))
    os.replace(tmp, path)
    return path


def flush(state_dir: str | os.PathLike, client) -> int:
    """Send every spooled file (removed once InfluxDB took it); returns the lines sent.
    Stops at the first failure: the rest wait for the next pass."""
    sent = 0
    for path in sorted((Path(state_dir) / SPOOL_DIR).glob("*.lp")):
        lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
        try:
            sent += client.write_lines(lines) if lines else 0
        except TelemetryError:
            break
        path.unlink(missing_ok=True)
    return sent
