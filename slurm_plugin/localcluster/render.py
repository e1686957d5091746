"""Render the local cluster's config files from the packaged templates (pure)."""

from __future__ import annotations

import re
import shlex
import socket
import sys
from pathlib import Path

import jinja2

from .spec import EMULATED_GPUS, Spec

TEMPLATES = {
    "slurm.conf": "slurm.conf.j2",
    "gres.conf": "gres.conf.j2",
    "slurmdbd.conf": "slurmdbd.conf.j2",
    "my.cnf": "my.cnf.j2",
    "influxdb.conf": "influxdb.conf.j2",
    "topology.conf": "topology.conf.j2",
}
# Slurm 24.11 and 26.05 read cgroup.conf even with proctrack/linuxproc and task/none, and
# slurmd stops when it finds no cgroup filesystem it can use; 22.05 needs no cgroup.conf.
CGROUP_CONF_FROM = (24, 11)
# etc/prolog.sh, etc/epilog.sh: the node hooks (job energy, the job's progress key)
HOOKS = ("prolog", "epilog")

_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).parent)),
                          undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                          trim_blocks=True, lstrip_blocks=True)
_ENV.filters["shquote"] = lambda v: shlex.quote(str(v))


def node_range(spec: Spec, first: int = 1, last: int | None = None) -> str:
    last = spec.nodes if last is None else last
    return f"gpu[{first}-{last}]" if last > first else f"gpu{first}"


def type_prefix(model: str) -> str:
    """The GRES type prefix of a model's GPUs: "" for the site default, else the catalogue
    entry as Slurm's AutoDetect spells a type (``H100-80GB-HBM3`` -> ``h100_80gb_hbm3_``)."""
    return re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_") + "_" if model else ""


def node_gres(spec: Spec, model: str = "") -> str:
    """``gpu:g0:1,...,shard:g0:4,...``: each GPU its own type so shares can be pinned; the
    type names the model where one is chosen (``gpu:h100_80gb_hbm3_g0:1``)."""
    pre = type_prefix(model)
    gpus = [f"gpu:{pre}g{i}:1" for i in range(spec.gpus_per_node)]
    shares = [f"{spec.share_gres}:{pre}g{i}:{spec.share_count}"
              for i in range(spec.gpus_per_node)]
    return ",".join(gpus + shares)


def node_lines(spec: Spec) -> list[dict[str, str | int]]:
    """One slurm.conf NodeName / gres.conf group per run of nodes of one model."""
    return [{"range": node_range(spec, first, last), "first": first, "last": last,
             "gres": node_gres(spec, model), "type_prefix": type_prefix(model), "model": model,
             "feature": (type_prefix(model).split("_", 1)[0] if model else "v100")}
            for first, last, model in spec.node_groups]


NODES_PER_SWITCH = 2


def leaf_switches(spec: Spec) -> list[tuple[str, str]]:
    """(switch, its nodes) of the test cluster's network: leaf switches of two nodes each."""
    out = []
    for k, first in enumerate(range(1, spec.nodes + 1, NODES_PER_SWITCH)):
        last = min(spec.nodes, first + NODES_PER_SWITCH - 1)
        out.append((f"s{k}", f"gpu[{first}-{last}]" if last > first else f"gpu{first}"))
    return out


def render(template: str, spec: Spec, **extra: object) -> str:
    host = socket.gethostname().split(".")[0]
    return _ENV.get_template(template).render(spec=spec, host=host, node_range=node_range(spec),
                                              node_lines=node_lines(spec),
                                              leaf_switches=leaf_switches(spec), **extra)


def render_all(spec: Spec, db_password: str,
               slurm_version: tuple[int, int] = (22, 5)) -> dict[str, str]:
    """Every file of ``<state>/etc`` by name, for the installed Slurm's (major, minor)."""
    files = {name: render(t, spec, db_password=db_password) for name, t in TEMPLATES.items()}
    for hook in HOOKS:     # run by slurmd with this Python and this checkout's package
        files[f"{hook}.sh"] = render("hook.sh.j2", spec, hook=hook, python=sys.executable,
                                     pythonpath=str(Path(__file__).resolve().parents[2]))
    from ..node.emulated import emulated_profile_csv
    files[EMULATED_GPUS] = emulated_profile_csv(spec.cluster_name, spec.gpu_keys,
                                                spec.variability_seed)
    files["job_submit.lua"] = (Path(__file__).with_name("job_submit.lua")).read_text()
    if tuple(slurm_version) >= CGROUP_CONF_FROM:
        files["cgroup.conf"] = render("cgroup.conf.j2", spec)
    return files
