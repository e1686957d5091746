"""What a local cluster looks like: state directory, ports, nodes, GPUs; and where files go.

A ``Spec`` is chosen at the first ``up`` (options, then ``$WATTBATCH_LOCALCLUSTER_*``, then
defaults) and saved as ``<state>/cluster.json`` so ``down``/``status`` act on the same cluster.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Mapping

from ..errors import ConfigError

DEFAULT_STATE_DIR = "/var/tmp/wattbatch-localcluster"
DEFAULT_PORTS: Mapping[str, int] = {
    "slurmctld": 16817, "slurmdbd": 16819, "slurmd": 16821, "mariadb": 13306, "influx": 18086,
    "influx_rpc": 18088,
}
SPEC_FILE = "cluster.json"
EMULATED_GPUS = "emulated-gpus.csv"
# how the collector reads the emulated GPUs (node.gpu_source): as they are, or through NVML
GPU_SOURCES = ("emulated", "emulated-nvml")


@dataclass(frozen=True)
class Spec:
    state_dir: Path
    ports: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_PORTS))
    nodes: int = 4
    gpus_per_node: int = 4
    shards_per_gpu: int = 4
    share_gres: str = "shard"          # "shard" or "mps" (never both)
    cluster_name: str = "wattbatch"
    partition: str = "gpu"
    influx_database: str = "wattbatch"
    # how the built-in Longhorn variability profile spreads over the emulated GPUs (PAL):
    # with 3, gpu1's GPU 0 (Slurm's first choice) is one of the slow ones for class A
    variability_seed: int = 3
    # the emulated GPUs' model: "" (the site default, node.gpu_model: V100, GRES types g0..),
    # one catalogued model for every node ("H100"), or groups in node order ("A100:2,H100:2")
    gpu_model: str = ""
    # "emulated", or "emulated-nvml": the emulated GPUs shown to the collector's NVML path
    gpu_source: str = "emulated"

    # --- names -------------------------------------------------------------------------
    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(f"gpu{i}" for i in range(1, self.nodes + 1))

    def slurmd_port(self, node_number: int) -> int:
        """Port of node ``gpuN`` (N from 1): consecutive from ports["slurmd"]."""
        return self.ports["slurmd"] + node_number - 1

    @property
    def share_count(self) -> int:
        """Shares of one GPU: shards, or MPS percent."""
        return self.shards_per_gpu if self.share_gres == "shard" else 100

    @property
    def node_groups(self) -> tuple[tuple[int, int, str], ...]:
        """(first, last node number, catalogue model or "") of each run of nodes of one model."""
        return node_groups(self.gpu_model, self.nodes)

    # --- paths -------------------------------------------------------------------------
    def path(self, *parts: str) -> Path:
        return self.state_dir.joinpath(*parts)

    @property
    def etc(self) -> Path:
        return self.path("etc")

    @property
    def slurm_conf(self) -> Path:
        return self.path("etc", "slurm.conf")

    @property
    def bin_dir(self) -> Path:
        """Symlinks named slurmctld/slurmd/slurmstepd: Slurm checks its own program name."""
        return self.path("bin")

    @property
    def run_dir(self) -> Path:
        return self.path("run")

    @property
    def log_dir(self) -> Path:
        return self.path("log")

    @property
    def dev_dir(self) -> Path:
        return self.path("dev")

    @property
    def mariadb_socket(self) -> Path:
        return self.path("run", "mariadb.sock")

    @property
    def emulated_gpus_csv(self) -> Path:
        """The emulated GPUs' speed per class (``node.emulated_variability``)."""
        return self.path("etc", EMULATED_GPUS)

    @property
    def gpu_keys(self) -> list[tuple[str, int]]:
        return [(n, i) for n in self.node_names for i in range(self.gpus_per_node)]

    @property
    def site_toml(self) -> Path:
        return self.path("site.toml")

    @property
    def env_sh(self) -> Path:
        return self.path("env.sh")

    @property
    def influx_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['influx']}"

    def pid_file(self, daemon: str) -> Path:
        return self.path("run", f"{daemon}.pid")

    def log_file(self, daemon: str) -> Path:
        return self.path("log", f"{daemon}.log")

    def env(self) -> dict[str, str]:
        """Environment a user or test exports to talk to this cluster."""
        return {"SLURM_CONF": str(self.slurm_conf), "WATTBATCH_SITE_CONFIG": str(self.site_toml)}

    # --- persistence -------------------------------------------------------------------
    def save(self) -> None:
        data = asdict(self)
        data["state_dir"] = str(self.state_dir)
        data["ports"] = dict(self.ports)
        self.path(SPEC_FILE).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def node_groups(text: str, nodes: int, source: str = "--gpu-model"
                ) -> tuple[tuple[int, int, str], ...]:
    """``"H100"`` or ``"A100:2,H100:2"`` -> ((1, 2, "A100-SXM4-80GB"), (3, 4, "H100-80GB-HBM3"));
    "" is every node of the site default. A model the catalogue lacks, a count that is not a
    positive integer, or counts that do not add up to ``nodes`` raise a ConfigError."""
    from ..physics.constants import catalogue_entry
    if not text.strip():
        return ((1, nodes, ""),)
    items = [part.strip() for part in text.split(",")]
    out, first = [], 1
    for item in items:
        name, sep, count = item.partition(":")
        if not sep and len(items) > 1:
            raise ConfigError(source, "gpu model", text, "give MODEL:NODES for each group "
                              "(A100:2,H100:2), or one MODEL for every node")
        n = nodes if not sep else (int(count) if count.strip().isdigit() else 0)
        if n < 1:
            raise ConfigError(source, f"nodes of {name}", count, "a positive number of nodes")
        try:
            model = catalogue_entry(name.strip())
        except ConfigError as exc:
            raise ConfigError(source, "gpu model", name, exc.fix) from None
        out.append((first, first + n - 1, model))
        first += n
    if first - 1 != nodes:
        raise ConfigError(source, "gpu model", text,
                          f"the groups hold {first - 1} nodes; the cluster has {nodes}")
    return tuple(out)


def _port(source: str, name: str, raw: str | int) -> int:
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = -1
    if not 1024 <= value <= 65535:
        raise ConfigError(source, f"port {name}", raw, "give a port number between 1024 and 65535")
    return value


def resolve(state_dir: str | os.PathLike | None = None,
            ports: Mapping[str, str | int] | None = None,
            share_gres: str | None = None,
            gpu_model: str | None = None,
            gpu_source: str | None = None,
            environ: Mapping[str, str] | None = None) -> Spec:
    """The spec for ``state_dir``: saved one if present, else options > environment > defaults.

    Environment: ``WATTBATCH_LOCALCLUSTER_DIR``, ``WATTBATCH_LOCALCLUSTER_PORT_<NAME>``
    (NAME in slurmctld, slurmdbd, slurmd, mariadb, influx, influx_rpc) and
    ``WATTBATCH_LOCALCLUSTER_SHARE_GRES`` (shard or mps), ``WATTBATCH_LOCALCLUSTER_GPU_MODEL``,
    ``WATTBATCH_LOCALCLUSTER_GPU_SOURCE`` (emulated or emulated-nvml).
    """
    environ = os.environ if environ is None else environ
    root = Path(state_dir or environ.get("WATTBATCH_LOCALCLUSTER_DIR") or DEFAULT_STATE_DIR)
    root = root.expanduser().resolve()
    saved = root / SPEC_FILE
    if saved.exists():
        try:
            data = json.loads(saved.read_text())
            spec = Spec(**{**data, "state_dir": root})
        except (ValueError, TypeError) as exc:
            raise ConfigError(str(saved), "(file)", str(exc),
                              "run `wattctl localcluster down` and remove the state dir") from None
    else:
        chosen = dict(DEFAULT_PORTS)
        for name in DEFAULT_PORTS:
            env_key = f"WATTBATCH_LOCALCLUSTER_PORT_{name.upper()}"
            if env_key in environ:
                chosen[name] = _port(f"${env_key}", name, environ[env_key])
        spec = Spec(state_dir=root, ports=chosen,
                    share_gres=environ.get("WATTBATCH_LOCALCLUSTER_SHARE_GRES", "shard"),
                    gpu_model=environ.get("WATTBATCH_LOCALCLUSTER_GPU_MODEL", ""),
                    gpu_source=environ.get("WATTBATCH_LOCALCLUSTER_GPU_SOURCE", "emulated"))
    for name, raw in (ports or {}).items():
        if name not in DEFAULT_PORTS:
            raise ConfigError("--port", name, raw,
                              f"unknown port name; choose from {', '.join(DEFAULT_PORTS)}")
        spec = replace(spec, ports={**spec.ports, name: _port("--port", name, raw)})
    if share_gres is not None:
        spec = replace(spec, share_gres=share_gres)
    if gpu_model is not None:
        spec = replace(spec, gpu_model=gpu_model)
    if gpu_source is not None:
        spec = replace(spec, gpu_source=gpu_source)
    node_groups(spec.gpu_model, spec.nodes)          # a ConfigError naming what is wrong
    if spec.share_gres not in ("shard", "mps"):
        raise ConfigError("localcluster", "share_gres", spec.share_gres, "choose shard or mps")
    if spec.gpu_source not in GPU_SOURCES:
        raise ConfigError("localcluster", "gpu_source", spec.gpu_source,
                          f"choose {' or '.join(GPU_SOURCES)}")
    return spec
