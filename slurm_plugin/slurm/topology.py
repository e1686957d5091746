"""The network's leaf switches, from Slurm's ``topology.conf`` (topology/tree).

Each node of the snapshot gets the feature ``switch=NAME`` of the leaf switch (the one whose
``Nodes=`` names it) that policies pack multi-node jobs on (GreenFlow's network packing). The
file is read next to the slurm.conf in use (``$SLURM_CONF``, else ``slurm.conf`` of the site
config, else Slurm's default), once per change of the file: no Slurm call. A site without the
file (or a configless one) has no switches: every node counts as on one switch. A
``topology.yaml`` (Slurm 24.11+) is not read.
"""

from __future__ import annotations

import os
from functools import lru_cache

from ..errors import InputError
from ..record import replace
from .parse import expand_hostlist

DEFAULT_SLURM_CONF = "/etc/slurm/slurm.conf"


def leaf_switches(text: str) -> dict[str, str]:
    """``topology.conf`` text -> {node: leaf switch}; lines it cannot read are skipped."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        words = dict(w.split("=", 1) for w in line.split("#", 1)[0].split() if "=" in w)
        keys = {k.lower(): v for k, v in words.items()}
        if "switchname" not in keys or "nodes" not in keys:
            continue
        try:
            nodes = expand_hostlist(keys["nodes"])
        except InputError:
            continue
        for node in nodes:
            out.setdefault(node, keys["switchname"])
    return out


def topology_path(slurm_conf: str) -> str:
    conf = os.environ.get("SLURM_CONF") or slurm_conf or DEFAULT_SLURM_CONF
    return os.path.join(os.path.dirname(conf), "topology.conf")


@lru_cache(maxsize=8)
def _read(path: str, mtime_ns: int) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return leaf_switches(fh.read())
    except OSError:
        return {}


def switches(slurm_conf: str) -> dict[str, str]:
    path = topology_path(slurm_conf)
    try:
        mtime_ns = os.stat(path).st_mtime_ns
    except OSError:
        return {}
    return _read(path, mtime_ns)


def with_switches(nodes: tuple, switch_of: dict[str, str]) -> tuple:
    """``nodes`` with the ``switch=NAME`` feature of their leaf switch added."""
    if not switch_of:
        return nodes
    return tuple(replace(n, features=(*n.features, f"switch={switch_of[n.name]}"))
                 if n.name in switch_of else n for n in nodes)
