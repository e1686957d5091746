"""EaCO's predictor: co-location slowdowns (history first, else physics), run times, deadlines
and the objective ``alpha * energy + (1 - alpha) * time per epoch`` against an exclusive GPU.

History keys (``Context.history``, kept by the reconciler from ``observe`` actions):
- ``pair:<appA>+<appB>[+...]`` (apps sorted): the observed slowdown of that group, the worst of
  its jobs; it overrides the physics for every job of the group.
- ``pair:<apps>:predicted``: the prediction that observation tested (for the log).
- ``job:<repeat_key>:slowdown``: a repeated job's observed slowdown when it shared a GPU; a
  floor on that job's predicted slowdown.
- ``job:<repeat_key>:solo_s``: its run time alone; ``job:<repeat_key>:solo_rate``: its
  samples/s alone. Both are optional seeds (else the time limit stands in for the run time).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from ...errors import InputError
from ...model import Job, Progress
from ...physics import (JobClass, colocated_slowdown, job_class, shared_gpu_power_w,
                        shared_gpu_throttle)


def group_key(apps: Sequence[str]) -> str:
    return "pair:" + "+".join(sorted(apps))


def deadline_of(job: Job, solo_s: float, factor: float) -> float:
    """A running job's deadline: its own (``sbatch --deadline``), else submit + ``factor`` x
    its run time alone."""
    return job.deadline_s if job.deadline_s is not None else job.submit_s + factor * solo_s


def repeat_key_of(job: Job) -> str:
    """The repeat key of a running job, as the simulator and wattbatch set it: ``user:app``."""
    return f"{job.user}:{job.app}"


@lru_cache(maxsize=256)
def known_class(app: str) -> JobClass | None:
    """The physics class of ``app``, or None when the app is not a known class."""
    if not app:
        return None
    try:
        return job_class(app)
    except InputError:
        return None


@lru_cache(maxsize=1024)
def solo_util_pct(app: str, gpus: int) -> float:
    """Per-GPU utilisation of ``app`` alone on ``gpus`` GPUs (0 for an unknown app)."""
    cls = known_class(app)
    return cls.util_at(gpus) if cls else 0.0


def pair_slowdown(app: str, other: str, history: Mapping[str, float], model: str = "V100",
                  share_gres: str = "shard") -> tuple[float, str]:
    """Slowdown of ``app`` next to ``other`` on a GPU of ``model`` shared as ``share_gres``
    says (``EacoSettings.share_gres``: ``"mps"`` through MPS, else time-sliced) and where the
    figure came from."""
    seen = history.get(group_key((app, other)))
    if seen is not None:
        return max(1.0, float(seen)), "history"
    mode = "mps" if share_gres == "mps" else "time-sliced"
    return colocated_slowdown(app, other, model, mode)[0], "physics"


def group_slowdowns(apps: Sequence[str], history: Mapping[str, float],
                    own: Sequence[float | None] = (), model: str = "V100",
                    share_gres: str = "shard") -> tuple[tuple[float, ...], str]:
    """Predicted slowdown of each job of a group sharing one GPU of ``model`` (shared as
    ``share_gres`` says: ``pair_slowdown``), and the source.

    A history figure for the whole group wins; else each job's slowdown is ``1 +`` the sum of
    its pairwise excess slowdowns (pair history, else physics), as the physics composes groups.
    ``own[i]``, a repeated job's own observed slowdown (with whatever partner), is a floor:
    a job known to suffer when sharing is never predicted to suffer less."""
    n = len(apps)
    if n < 2:
        return (1.0,) * n, "alone"
    seen = history.get(group_key(apps))
    if seen is not None:
        return (max(1.0, float(seen)),) * n, "history"
    sources, out = set(), []
    for i, a in enumerate(apps):
        extra = 0.0
        for j, b in enumerate(apps):
            if i != j:
                s, src = pair_slowdown(a, b, history, model, share_gres)
                extra += s - 1.0
                sources.add(src)
        mine = own[i] if i < len(own) else None
        if mine is not None and mine > 1.0 + extra:
            out.append(float(mine))
            sources.add("job history")
        else:
            out.append(1.0 + extra)
    return tuple(out), "+".join(sorted(sources))


def solo_time_s(repeat_key: str, time_limit_s: float | None,
                history: Mapping[str, float]) -> float | None:
    """Expected run time alone: the job's history, else its time limit, else unknown."""
    seen = history.get(f"job:{repeat_key}:solo_s") if repeat_key else None
    if seen:
        return float(seen)
    return time_limit_s if time_limit_s and time_limit_s > 0 else None


def remaining_solo_s(job: Job, progress: Progress | None, solo_s: float, now_s: float,
                     slowdown_now: float) -> float:
    """Work left of a running job, in seconds alone: from its progress, else from its age."""
    if progress is not None and progress.total_steps > 0:
        return solo_s * max(0.0, 1.0 - progress.step / progress.total_steps)
    if job.start_s is not None:
        return max(0.0, solo_s - (now_s - job.start_s) / max(1.0, slowdown_now))
    return solo_s


@dataclass(frozen=True, slots=True)
class Gain:
    energy_ratio: float    # energy per unit of progress, shared over exclusive
    time_ratio: float      # mean time per epoch of the jobs involved, shared over exclusive
    cost: float            # alpha * energy_ratio + (1 - alpha) * time_ratio; exclusive is 1


def objective(gpus: Sequence[tuple[Sequence[float], Sequence[float], Sequence[float]]],
              new_dyn_w: float, new_slowdown: float, static_w: float, alpha: float,
              model: str) -> Gain:
    """Compare sharing with the new job alone on a free GPU.

    ``gpus``: per GPU of the candidate set, (residents' dynamic power per GPU, their slowdowns
    now, their slowdowns with the new job). A busy GPU draws its idle power plus its jobs'
    dynamic power, plus ``static_w``, its share of the node's base power. The GPU the new job
    does not take is not charged: on a cluster that packs, idle GPUs are powered down with their
    node or serve a queued job. Progress counts each job's epochs at its own solo speed; a GPU
    whose jobs together would draw more than the board gives runs them all slower
    (``shared_gpu_throttle``)."""
    e_excl = e_share = w_excl = w_share = 0.0
    times: list[float] = []
    new_throttle = 1.0
    for dyn, old, new in gpus:
        old_rates = [1 / s for s in old]
        old_throttle = shared_gpu_throttle(dyn, old_rates, model=model) if len(dyn) > 1 else 1.0
        if dyn:   # a free GPU of the set costs nothing in the exclusive case
            e_excl += shared_gpu_power_w(dyn, old_rates, model=model) + static_w
        e_excl += shared_gpu_power_w([new_dyn_w], [1.0], model=model) + static_w
        rates = [1 / s for s in new] + [1 / new_slowdown]
        throttle = shared_gpu_throttle(list(dyn) + [new_dyn_w], rates, model=model) if dyn \
            else 1.0
        e_share += shared_gpu_power_w(list(dyn) + [new_dyn_w], rates, model=model) + static_w
        w_excl += sum(old_rates) / old_throttle + 1.0
        w_share += sum(rates) / throttle
        times += [n * throttle / (o * old_throttle) for n, o in zip(new, old)]
        new_throttle = max(new_throttle, throttle)
    times.append(new_slowdown * new_throttle)
    energy_ratio = (e_share / w_share) / (e_excl / w_excl)
    time_ratio = sum(times) / len(times)
    return Gain(energy_ratio, time_ratio, alpha * energy_ratio + (1 - alpha) * time_ratio)
