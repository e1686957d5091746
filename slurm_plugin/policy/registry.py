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


def register(name: str, factory: Callable[[], Policy]) -> None:
    """Add a policy (a site's own, or a test's)."""
    _POLICIES[name] = factory


def policy_names() -> list[str]:
    return sorted(_POLICIES)


def builtin_policy_names() -> list[str]:
    """The policies wattbatch ships (not those a site or a test registered)."""
    return sorted(name for name, entry in _POLICIES.items() if isinstance(entry, str))


def get_policy(name: str, source: str = "policy name", key: str = "policy") -> Policy:
    """The policy named ``name``; an unknown one is a ConfigError naming ``source`` (where the
    name came from) and ``key`` (the setting or option that gave it)."""
    entry = _POLICIES.get(name)
    if entry is None:
        raise ConfigError(source, key, name, f"choose one of: {', '.join(policy_names())}")
    if callable(entry):
        return entry()
    module, cls = entry.split(":")
    return getattr(importlib.import_module(f".{module}", __package__), cls)()
