"""Name -> policy factory. Every policy a site or the simulator can name is listed here."""

from __future__ import annotations

from typing import Callable

from ..errors import ConfigError
from .base import Policy
from .baseline import SlurmDefault

_FACTORIES: dict[str, Callable[[], Policy]] = {
    "slurm-default": SlurmDefault,
    "baseline": SlurmDefault,
}


def register(name: str, factory: Callable[[], Policy]) -> None:
    _FACTORIES[name] = factory


def policy_names() -> list[str]:
    return sorted(_FACTORIES)


def get_policy(name: str, source: str = "policy name") -> Policy:
    try:
        return _FACTORIES[name]()
    except KeyError:
        raise ConfigError(source, "policy", name,
                          f"choose one of: {', '.join(policy_names())}") from None
