"""Job classes: measured V100 trainings with memory, utilisation, power and GPU-count scaling.
On another GPU model a class keeps its utilisation, memory and speed, and its power follows
that model's power curve (``JobClass.power_at``; docs/physics.md, "Other GPU models").

Each class is one training of the Haghshenas nvidia-smi logs. A trace job without an ``app``
gets a class with ``assign_class``: uniform over the class names of a workload mix (all the
measured classes unless a ``ClassMix`` says otherwise) in sorted order, drawn from
``random.Random(f"{seed}:{job_id}")`` (like Gavel's and EaCO's random job-type assignment),
so a job's class depends only on the seed, its id and the mix, not on the order jobs are read.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..errors import InputError
from .constants import constants, gpu_constants, reference_constants
from .seeded import seeded

# The GPU model every class was measured on (the Haghshenas logs: SXM2 V100s, physics.json's
# "V100"); on another model a class keeps its utilisation, memory and step time (docs/physics.md).
CLASS_GPU = "V100"


@dataclass(frozen=True, slots=True)
class JobClass:
    name: str
    util_pct: float          # mean GPU utilisation per GPU at ``measured_gpus``
    power_w: float           # mean power per GPU at ``measured_gpus``, uncapped
    memory_mib: int          # peak GPU memory per GPU
    measured_gpus: int
    scaling_alpha: float     # speedup(n) = n ** scaling_alpha
    variability_class: str   # PAL class A-D
    # speedup on n GPUs over one at index n-1, measured (Pollux profiles); () : n ** alpha
    speedup_table: tuple[float, ...] = ()

    def util_at(self, gpus: int) -> float:
        """Per-GPU utilisation on ``gpus`` GPUs (fitted exponent, VGG16 on 1-8 GPUs)."""
        e = constants()["scaling"]["util_exponent"]
        return min(100.0, max(0.5, self.util_pct * (max(1, gpus) / self.measured_gpus) ** e))

    def power_at(self, gpus: int, model: str = "V100") -> float:
        """Per-GPU power on ``gpus`` GPUs of ``model``: the dynamic part scales with utilisation.

        On another model than the one the class was measured on (``CLASS_GPU``), the class's
        measured dynamic power is scaled by the ratio of the two models' power curves at the
        class's utilisation ``u``: ``dyn_m(u) / dyn_ref(u)`` with ``dyn(u) = dynamic_power_w *
        (u/100) ** util_gamma`` (the utilisation through that model's curve, keeping the class's
        measured offset from the reference curve as a ratio), at most the model's top limit."""
        c = gpu_constants(model)
        ref = reference_constants()          # the board the class was measured on
        if c is ref:
            idle = c["idle_power_w"]
            return idle + (self.power_w - idle) * self.util_at(gpus) / self.util_pct
        u = self.util_at(gpus)
        dyn = (self.power_w - ref["idle_power_w"]) * u / self.util_pct
        return min(c["max_power_w"], c["idle_power_w"] + dyn * curve_ratio(c, ref, u))

    def dynamic_power_at(self, gpus: int, model: str = "V100") -> float:
        return self.power_at(gpus, model) - gpu_constants(model)["idle_power_w"]

    def speedup(self, gpus: int) -> float:
        """Throughput on ``gpus`` GPUs relative to one GPU."""
        t = self.speedup_table
        if t:
            return t[min(max(1, gpus), len(t)) - 1]
        return max(1, gpus) ** self.scaling_alpha


def curve_ratio(c: dict, ref: dict, util_pct: float) -> float:
    """Dynamic power of the curve of constants ``c`` over that of ``ref`` at ``util_pct``."""
    u = max(1e-9, min(100.0, util_pct)) / 100.0
    return (c["dynamic_power_w"] / ref["dynamic_power_w"]) * u ** (c["util_gamma"]
                                                                    - ref["util_gamma"])


@lru_cache(maxsize=1)
def _table() -> dict[str, JobClass]:
    out = {}
    for name, c in constants()["classes"].items():
        out[name] = JobClass(name, c["util_pct"], c["power_w"], c["memory_mib"],
                             c["measured_gpus"], c["scaling_alpha"], c["variability_class"])
    return out


def class_names() -> tuple[str, ...]:
    return tuple(sorted(_table()))


def job_class(name: str) -> JobClass:
    """The class called ``name`` (case-insensitive); InputError lists the known ones."""
    table = _table()
    cls = table.get(name.lower())
    if cls is None:
        cls = _pollux_class(name.lower())
    if cls is None:
        raise InputError(f"physics: app {name!r} is not a known job class; "
                         f"choose one of: {', '.join(class_names())}")
    return cls


@lru_cache(maxsize=64)
def _pollux_class(name: str) -> JobClass | None:
    """A Pollux application (cifar10, bert, ...) as the measured class of its power model, under
    its own name, scaling as its profile (not among ``class_names``: seeded draws are unchanged)."""
    from .pollux import POWER_CLASS, class_prior
    base = _table().get(POWER_CLASS.get(name, ""))
    prior = class_prior(name) if base is not None else None
    if base is None or prior is None:
        return None
    return JobClass(name, base.util_pct, base.power_w, base.memory_mib, base.measured_gpus,
                    base.scaling_alpha, base.variability_class, prior)


# Named workload mixes; None: every measured class. ``eaco-paper``: the measured classes among
# the EaCO paper's workloads (AlexNet, ResNet-18, ResNet-50, VGG-16; ResNet-50 was not measured).
MIXES: dict[str, tuple[str, ...] | None] = {
    "all": None,
    "eaco-paper": ("alexnet", "resnet18", "vgg16"),
}


@dataclass(frozen=True, slots=True)
class ClassMix:
    """The classes a trace job without an ``app`` is drawn from (uniformly, in sorted order)."""
    name: str
    classes: tuple[str, ...]


def class_mix(spec: str = "all") -> ClassMix:
    """A named mix (``all``, ``eaco-paper``) or comma-separated class names, case-insensitive;
    InputError names an unknown or repeated class and lists the known ones."""
    key = spec.strip().lower()
    if key in MIXES:
        return ClassMix(key, MIXES[key] or class_names())
    names = [n.strip().lower() for n in key.split(",") if n.strip()]
    known = class_names()
    hint = f"give named mix {' or '.join(MIXES)}, or comma-separated classes of: {', '.join(known)}"
    if not names:
        raise InputError(f"physics: class mix {spec!r} names no class; {hint}")
    for n in names:
        if n not in known:
            raise InputError(f"physics: class mix {spec!r}: {n!r} is not a known job class; {hint}")
        if names.count(n) > 1:
            raise InputError(f"physics: class mix {spec!r}: class {n!r} is named twice; "
                             "give each class once")
    classes = tuple(sorted(names))
    return ClassMix(",".join(classes), classes)


def assign_class(job_id: str, seed: int, mix: ClassMix | None = None) -> str:
    """The seeded class of a trace job that names none, from ``mix`` (default: every class)."""
    names = mix.classes if mix is not None else class_names()
    return names[seeded(f"{seed}:{job_id}").randrange(len(names))]
