"""The node's running jobs as Slurm lists them, asked at most every ``refresh_s``: the GPU
source needs each resident job's class and shares, and the power caps each job's cap.

One ``squeue`` per ``refresh_s``, and sooner (at most every ``NEW_JOB_REFRESH_S``) when a job
shows on a GPU that the last answer did not list, so a starting job gets its class within a
few seconds. A failed ask is raised to every caller until the next ask is due, so a Slurm
outage costs one attempt per interval, not one per GPU or per pass.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable, Sequence

from ..errors import WattError
from ..model import Job

NEW_JOB_REFRESH_S = 10.0


class CachedJobs:
    """``fetch()`` (the node's running jobs) remembered for ``refresh_s`` seconds; 0: never
    asked (no jobs)."""

    def __init__(self, fetch: Callable[[], Sequence[Job]], refresh_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._fetch, self.refresh_s, self._clock = fetch, refresh_s, clock
        self._at_s: float | None = None
        self._jobs: tuple[Job, ...] = ()
        self._ids: frozenset[str] = frozenset()
        self._error: WattError | None = None

    def __call__(self, seen: Iterable[str] = ()) -> tuple[Job, ...]:
        """The node's jobs; asked again when the answer is ``refresh_s`` old, or
        ``NEW_JOB_REFRESH_S`` old and ``seen`` names a job it lacks. Raises the ``WattError``
        of a failed ask until it is asked again."""
        if self.refresh_s <= 0:
            return ()
        now_s = self._clock()
        age_s = None if self._at_s is None else now_s - self._at_s
        unseen = age_s is not None and not set(seen) <= self._ids
        if age_s is None or age_s >= self.refresh_s or (unseen and age_s >= NEW_JOB_REFRESH_S):
            self._at_s = now_s
            try:
                self._jobs, self._error = tuple(self._fetch()), None
                self._ids = frozenset(j.job_id for j in self._jobs)
            except WattError as exc:
                self._error = exc
        if self._error is not None:
            raise self._error
        return self._jobs
