"""Name -> policy. Every policy a site or the simulator can name is listed here.

Entries are ``module:Class`` strings imported on first use, so ``wattbatch`` with the
baseline policy never pays for importing the others (and their physics tables).
"""

from __future__ import annotations

import importlib

from ..errors import ConfigError
from .base import Policy

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Callable

_POLICIES: dict[str, str | Callable[[], Policy]] = {
    "slurm-default": "baseline:SlurmDefault",
    "baseline": "baseline:SlurmDefault",
    "fifo-packed": "fifo_packed:FifoPacked",
    "gandiva": "gandiva:Gandiva",
    "oracle-bound": "oracle:OracleBound",
    "slurm-powersave": "powersave:SlurmPowersave",
    "eaco": "eaco.decide:Eaco",
    "carbon-threshold": "carbon_threshold:CarbonThreshold",
    "greenflow": "greenflow.decide:GreenFlow",
    "elastic": "elastic.decide:Elastic",
    "elastic-restart": "elastic.decide:TerminationElastic",
    "pal": "pal.decide:Pal",
    "packed-sticky": "packed_sticky:PackedSticky",
    "ones": "ones.decide:Ones",
    "tiresias": "tiresias.decide:Tiresias",
}
# The kinds of stage each policy offers in a stack (``stages.py``), kept here so that a site's
# stack is checked at config load without importing the policies
_KINDS: dict[str, tuple[str, ...]] = {
    "slurm-default": (), "baseline": (), "slurm-powersave": (),
    "fifo-packed": ("sharing", "placement"),
    "gandiva": ("sharing", "placement"),
    "oracle-bound": ("timing",),
    "eaco": ("sharing", "placement"),
    "carbon-threshold": ("timing",),
    "greenflow": ("sizing", "timing", "placement"),
    "elastic": ("sizing",),
    "elastic-restart": ("sizing",),
    "pal": ("placement",),
    "packed-sticky": ("placement",),
    "ones": ("sizing",),
    "tiresias": ("timing",),
}


def register(name: str, factory: Callable[[], Policy], kinds: tuple[str, ...] = ()) -> None:
    """Add a policy (a site's own, or a test's), offering the stage ``kinds`` in a stack."""
    _POLICIES[name] = factory
    _KINDS[name] = tuple(kinds)


def stage_kinds(name: str) -> tuple[str, ...]:
    """The kinds of stage policy ``name`` offers in a stack."""
    return _KINDS.get(name, ())


def check_stack(name: str, source: str = "policy name", key: str = "policy"
                ) -> dict[str, str] | None:
    """For a stack name (``pal+eaco``): kind -> the policy that runs it; None for one policy
    name (known or not: ``get_policy`` says). A ConfigError naming ``source``, ``key`` and
    the value for an unknown name in it, or names that cannot stack (``stages.plan``)."""
    from .stages import StackError, plan, split
    names = split(name)
    if len(names) == 1:
        return None
    unknown = [n for n in names if n not in _POLICIES]
    if unknown:
        raise ConfigError(source, key, name, f"unknown policy {', '.join(map(repr, unknown))}; "
                          f"choose from: {', '.join(policy_names())}")
    try:
        return plan(names, {n: _KINDS.get(n, ()) for n in names})
    except StackError as exc:
        raise ConfigError(source, key, name, f"cannot stack: {exc}") from None


def policy_names() -> list[str]:
    return sorted(_POLICIES)


def builtin_policy_names() -> list[str]:
    """The policies wattbatch ships (not those a site or a test registered)."""
    return sorted(name for name, entry in _POLICIES.items() if isinstance(entry, str))


_KEPT: dict[str, Policy] = {}


def kept_policy(name: str, source: str = "policy name", key: str = "policy") -> Policy:
    """``get_policy``, one instance per name in this process: where a process decides again
    and again (the warm server, whose forked calls inherit it), what the policy keeps between
    calls (its caches of node views) is made once. A policy's results never depend on it."""
    got = _KEPT.get(name)
    if got is None:
        got = _KEPT[name] = get_policy(name, source, key)
    return got


def get_policy(name: str, source: str = "policy name", key: str = "policy") -> Policy:
    """The policy named ``name``; an unknown one is a ConfigError naming ``source`` (where the
    name came from) and ``key`` (the setting or option that gave it)."""
    kinds = check_stack(name, source, key)
    if kinds is not None:
        from .stages import Stack, split
        names = split(name)
        return Stack(name, {n: get_policy(n, source, key) for n in names}, kinds,
                     {n: _KINDS.get(n, ()) for n in names})
    entry = _POLICIES.get(name)
    if entry is None:
        raise ConfigError(source, key, name, f"choose one of: {', '.join(policy_names())}")
    if callable(entry):
        return entry()
    module, cls = entry.split(":")
    return getattr(importlib.import_module(f".{module}", __package__), cls)()
