"""Time as an input: policies get ``now_s`` from a Clock, never from ``time.time()``."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_s(self) -> float: ...


class WallClock:
    def now_s(self) -> float:
        return time.time()


class SimClock:
    """Advanced by the simulator's event loop."""

    def __init__(self, start_s: float = 0.0) -> None:
        self._now_s = start_s

    def now_s(self) -> float:
        return self._now_s

    def advance_to(self, t_s: float) -> None:
        if t_s < self._now_s:
            raise ValueError(f"clock: cannot go back from {self._now_s} to {t_s}")
        self._now_s = t_s
