"""The loads a calibration job (``calibrate_job.py``) puts on its GPU.

Both give stepped load levels (``levels``), hold one while the job reads the GPU (``hold``,
calling ``tick`` about every ``interval_s``), and run one fixed workload and time it
(``run_fixed``: the same work every call, so its time under a cap over its time uncapped is
the cap's slowdown). For the co-located pair (``calibrate_pair.py``) each names the level it
pairs (``pair_level``) and the level of that workload alone or as two copies sharing the GPU
in a mode (``pair``), which ``apply`` and ``run_fixed`` take like any other.

- ``EmulatedLoad``: an emulated GPU draws what the job classes on it draw (``node/emulated.py``),
  so a level is a job class: the job declares it in its own AdminComment (``JobTag``) and the
  emulated source computes the GPU's utilisation and power from it. A class draws its own
  measured offset from the power curve (``classes.JobClass.power_at``), the level's
  ``load_scale``. The fixed workload sleeps steps as ``emulated_train`` does, each times the
  slowdown the emulated source writes for the job (its power cap's, its pair's). A pair is
  declared as the job's app too (``emulated.pair_app``).
- ``TorchLoad`` (a real GPU; not tested on hardware): a half-precision matmul loop at duty
  cycles 10-100 % (``load_scale`` 1: this load's power defines the curve), the fixed workload a
  number of matmuls found to take ``fixed_s`` uncapped; a pair level runs them in one or two
  processes of their own (``calibrate_pair.run_copies``: MPS through a daemon of the job's own).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Protocol

from ..model import GpuReading

FIXED_STEPS = 10          # steps of an emulated fixed workload
DUTY_PERIOD_S = 0.1       # one busy-then-idle period of the real duty-cycle load


class JobTag(Protocol):
    """The job's own record in Slurm that the node side reads: its class and power cap."""

    def set_app(self, app: str) -> None: ...

    def set_cap(self, power_cap_w: float | None) -> None: ...


class Load(Protocol):
    mode: str

    def levels(self) -> list[str]: ...

    def load_scale(self, level: str) -> float: ...

    def apply(self, level: str) -> None: ...

    def is_on(self, reading: GpuReading, level: str) -> bool: ...

    def hold(self, seconds: float, tick: Callable[[], None]) -> None: ...

    def run_fixed(self, tick: Callable[[], None]) -> float: ...

    def pair_level(self, model: str, labels: list[str]) -> str | None: ...

    def pair(self, label: str, mode: str | None) -> str: ...


def class_load_scale(app: str, gpus: int) -> float:
    """A job class's dynamic power over the reference curve's at the class's utilisation on
    ``gpus`` GPUs: the offset it keeps on every model (``classes.JobClass.power_at``)."""
    from ..physics.classes import CLASS_GPU, job_class
    from ..physics.constants import gpu_constants
    cls = job_class(app)
    ref = gpu_constants(CLASS_GPU)
    u = cls.util_at(gpus)
    dynamic_w = cls.power_at(gpus, CLASS_GPU) - ref["idle_power_w"]
    return dynamic_w / (ref["dynamic_power_w"] * (u / 100.0) ** ref["util_gamma"])


class EmulatedLoad:
    mode = "emulated"

    def __init__(self, tag: JobTag, job_id: str, gpus: int, slowdown_file: Path,
                 fixed_s: float, interval_s: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._tag, self._job_id, self._gpus = tag, job_id, gpus
        self._slowdown_file, self._step_s = slowdown_file, fixed_s / FIXED_STEPS
        self._interval_s, self._clock, self._sleep = interval_s, clock, sleep

    def levels(self) -> list[str]:
        from ..physics import class_names
        return list(class_names())

    def load_scale(self, level: str) -> float:
        return class_load_scale(level, self._gpus)

    def apply(self, level: str) -> None:
        self._tag.set_app(level)

    def is_on(self, reading: GpuReading, level: str) -> bool:
        return any(r.job_id == self._job_id and r.app == level for r in reading.residents)

    def hold(self, seconds: float, tick: Callable[[], None]) -> None:
        end = self._clock() + seconds
        while True:
            tick()
            left = end - self._clock()
            if left <= 0:
                return
            self._sleep(min(self._interval_s, left))

    def pair_level(self, model: str, labels: list[str]) -> str | None:
        """The class to pair: of the levels ``labels``, the busiest class measured alone on
        one GPU (its utilisation alone is then the one the interference model takes) whose
        pair with itself ``model``'s shipped table of measured pairs lacks (its slowdown is
        then ``interference_k``'s, which the fit recovers); None when none is."""
        from ..physics.classes import job_class
        from ..physics.constants import catalogue_entry
        from ..physics.gpu_models import shipped
        table = shipped()["models"][catalogue_entry(model)]["colocation_pairs"]["value"]
        fit = [job_class(c) for c in labels
               if job_class(c).measured_gpus == 1 and f"{c}|{c}" not in table]
        return max(fit, key=lambda c: c.util_pct).name if fit else None

    def pair(self, label: str, mode: str | None) -> str:
        from .emulated import pair_app
        return label if mode is None else pair_app(label, mode)

    def run_fixed(self, tick: Callable[[], None]) -> float:
        """``FIXED_STEPS`` steps, each ``fixed_s / FIXED_STEPS`` times the slowdown in force,
        slept to absolute deadlines. The GPU is read in the first step and then only in steps
        with twice the last read's time to spare, so reading never adds to the time."""
        from ..emulated_train import slowdown
        start = target = self._clock()
        read_s = 0.0
        for k in range(FIXED_STEPS):
            target += self._step_s * slowdown(self._slowdown_file)
            if k == 0 or target - self._clock() > 2 * read_s:
                before = self._clock()
                tick()
                read_s = self._clock() - before
            left = target - self._clock()
            if left > 0:
                self._sleep(left)
        return self._clock() - start


class TorchLoad:
    """A matmul loop on CUDA device 0 (the job's GPU). Not tested on hardware."""

    mode = "cuda"
    DUTIES_PCT = tuple(range(10, 101, 10))

    def __init__(self, torch, fixed_s: float, interval_s: float, size: int = 4096,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._torch, self._fixed_s, self._interval_s = torch, fixed_s, interval_s
        self._clock, self._sleep, self._size = clock, sleep, size
        dev = torch.device("cuda:0")
        self._a = torch.randn(size, size, device=dev, dtype=torch.float16)
        self._b = torch.randn(size, size, device=dev, dtype=torch.float16)
        self._duty = 1.0
        self._iterations: int | None = None
        self._pairs: dict[str, tuple[int, str | None]] = {}   # pair level -> copies, mode
        self._pair: tuple[int, str | None] | None = None

    def levels(self) -> list[str]:
        return [f"{d}%" for d in self.DUTIES_PCT]

    def load_scale(self, level: str) -> float:
        return 1.0

    def apply(self, level: str) -> None:
        self._pair = self._pairs.get(level)
        if self._pair is None:
            self._duty = float(level.rstrip("%")) / 100.0

    def pair_level(self, model: str, labels: list[str]) -> str | None:
        """The fixed workload's own level: its matmuls run back to back (100 % duty)."""
        return f"{self.DUTIES_PCT[-1]}%"

    def pair(self, label: str, mode: str | None) -> str:
        level = f"{label} alone" if mode is None else f"{label} x2 {mode}"
        self._pairs[level] = (1, None) if mode is None else (2, mode)
        return level

    def is_on(self, reading: GpuReading, level: str) -> bool:
        return True

    def _matmul(self) -> None:
        self._a = (self._a @ self._b) * 1e-3

    def _busy(self, seconds: float) -> None:
        end = self._clock() + seconds
        while self._clock() < end:
            self._matmul()
            self._torch.cuda.synchronize()

    def hold(self, seconds: float, tick: Callable[[], None]) -> None:
        end = self._clock() + seconds
        next_tick = self._clock()
        while self._clock() < end:
            start = self._clock()
            self._busy(self._duty * DUTY_PERIOD_S)
            rest = DUTY_PERIOD_S - (self._clock() - start)
            if rest > 0:
                self._sleep(rest)
            if self._clock() >= next_tick:
                tick()
                next_tick += self._interval_s

    def run_fixed(self, tick: Callable[[], None]) -> float:
        """The first call counts the matmuls that take ``fixed_s``; every call times that
        many, reading the GPU between them about every ``interval_s`` (a pair level, after
        that first call: in processes of their own, ``calibrate_pair.run_copies``)."""
        if self._pair is not None:
            from .calibrate_pair import run_copies
            copies, mode = self._pair
            return run_copies(copies, self._iterations, self._size, mode, self._fixed_s, tick,
                              self._interval_s, self._clock, self._sleep)
        start = next_tick = self._clock()
        if self._iterations is None:
            n = 0
            while self._clock() - start < self._fixed_s:
                self._matmul()
                self._torch.cuda.synchronize()
                n += 1
                if self._clock() >= next_tick:
                    tick()
                    next_tick += self._interval_s
            self._iterations = n
            return self._clock() - start
        for _ in range(self._iterations):
            self._matmul()
            self._torch.cuda.synchronize()
            if self._clock() >= next_tick:
                tick()
                next_tick += self._interval_s
        return self._clock() - start
