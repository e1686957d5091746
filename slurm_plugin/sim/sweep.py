"""Sweeps: a grid of simulations from one TOML file, one JSON line per cell, a summary with the
spread over seeds. Pure parts (grid, cell files, summary); running is in ``sweep_run``.

```toml
[sweep]
output = "sweep-out"             # directory: cells/, results.jsonl, summary.txt (relative: to the file)
traces = ["philly-2017-09-10.csv"]   # absent: the built-in slice
trace_format = "philly"
policies = ["slurm-default", "eaco"]
seeds = [0, 1, 2]
zones = ["GB"]
class_mixes = ["all"]
limit_jobs = 2000                # optional
backend = "local"                # or "slurm": one job array on the site's cluster
workers = 2                      # local: cells at once (default: the machine's cores)

[[sweep.clusters]]               # one table per cluster shape: any [cluster] keys
nodes = 64
gpus_per_node = 8

[sweep.slurm]                    # the slurm backend
submit = "sbatch"                # or "wattbatch" (its policy places the array's tasks)
options = ["--time=01:00:00"]    # more sbatch options
max_parallel = 16                # array throttle (%N)
```

Every value of the grid is checked before any cell runs (the checks of a single ``wattctl
simulate``: cluster keys as ``--cluster``, policies, class mixes, zones with a built-in carbon
series, traces readable and no job larger than a cluster); an error names the file, the key and
the value. A cell is one (trace, cluster, policy, class mix, zone, seed). Its result is a file
``cells/<index>-<key>.json`` (the key: a hash of the cell's parameters), so a rerun skips the
cells already done and a changed grid never mixes old results in.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, InputError
from .cluster import ClusterSpec, check_cluster, read_table
from .trace import FORMATS

BACKENDS = ("local", "slurm")
SUMMARY_FIELDS = ("energy_kwh", "avg_jct_s", "avg_queue_s", "gpu_alloc_of_powered",
                  "sharing_factor", "sm_util_of_powered", "energy_over_shared_oracle")
_LISTS = ("traces", "policies", "seeds", "zones", "class_mixes")


@dataclass(frozen=True)
class Cell:
    index: int
    trace: str                 # "" for the built-in slice
    cluster: dict[str, Any]
    policy: str
    class_mix: str
    zone: str
    seed: int

    def params(self) -> dict[str, Any]:
        return {"trace": self.trace, "cluster": self.cluster, "policy": self.policy,
                "class_mix": self.class_mix, "zone": self.zone, "seed": self.seed}

    @property
    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.params(), sort_keys=True).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Sweep:
    path: Path
    output: Path
    cells: tuple[Cell, ...]
    trace_format: str = "philly"
    limit_jobs: int | None = None
    backend: str = "local"
    workers: int | None = None
    submit: str = "sbatch"
    sbatch_options: tuple[str, ...] = ()
    max_parallel: int | None = None

    def cell_file(self, cell: Cell) -> Path:
        return self.output / "cells" / f"{cell.index}-{cell.key}.json"

    def missing(self) -> list[Cell]:
        return [c for c in self.cells if not self.cell_file(c).exists()]


def _fail(path: Path, key: str, value: Any, fix: str) -> ConfigError:
    return ConfigError(str(path), f"sweep.{key}", value, fix)


def load_sweep(path: str | Path) -> Sweep:
    """Read and check a sweep file; errors name the file, key and value."""
    p = Path(path).resolve()
    body = read_table(p, "sweep")
    known = set(_LISTS) | {"output", "trace_format", "limit_jobs", "backend", "workers",
                           "clusters", "slurm"}
    for key in body:
        if key not in known:
            raise _fail(p, key, body[key], f"unknown key; valid keys: {', '.join(sorted(known))}")
    lists = {}
    defaults = {"traces": [""], "policies": ["slurm-default"], "seeds": [0], "zones": ["GB"],
                "class_mixes": ["all"]}
    for key in _LISTS:
        value = body.get(key, defaults[key])
        want = int if key == "seeds" else str
        if not isinstance(value, list) or not value or \
                not all(isinstance(v, want) and not isinstance(v, bool) for v in value):
            raise _fail(p, key, value, f"expected a non-empty list of {want.__name__}s")
        lists[key] = value
    lists["traces"] = [str((p.parent / t).resolve()) if t else "" for t in lists["traces"]]
    clusters = body.get("clusters", [{}])
    if not isinstance(clusters, list) or not clusters or not all(isinstance(c, dict) for c in clusters):
        raise _fail(p, "clusters", clusters, "expected [[sweep.clusters]] tables")
    specs = [check_cluster(str(p), c, "sweep.clusters") for c in clusters]
    trace_format = body.get("trace_format", "philly")
    if trace_format not in FORMATS:
        raise _fail(p, "trace_format", trace_format, f"choose one of: {', '.join(FORMATS)}")
    backend = body.get("backend", "local")
    if backend not in BACKENDS:
        raise _fail(p, "backend", backend, f"choose one of: {', '.join(BACKENDS)}")
    slurm = body.get("slurm", {})
    if not isinstance(slurm, dict):
        raise _fail(p, "slurm", slurm, "expected a [sweep.slurm] table")
    submit = slurm.get("submit", "sbatch")
    if submit not in ("sbatch", "wattbatch"):
        raise _fail(p, "slurm.submit", submit, "choose sbatch or wattbatch")
    options = slurm.get("options", [])
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise _fail(p, "slurm.options", options, "expected a list of sbatch options")
    for key, v in (("workers", body.get("workers")), ("limit_jobs", body.get("limit_jobs")),
                   ("slurm.max_parallel", slurm.get("max_parallel"))):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise _fail(p, key, v, "expected a whole number of at least 1")
    _check_grid(p, lists, specs, trace_format, body.get("limit_jobs"))
    grid = itertools.product(lists["traces"], clusters, lists["policies"], lists["class_mixes"],
                             lists["zones"], lists["seeds"])
    cells = tuple(Cell(i, t, dict(c), pol, mix, zone, seed)
                  for i, (t, c, pol, mix, zone, seed) in enumerate(grid))
    out = Path(body.get("output", f"{p.stem}-out"))
    return Sweep(path=p, output=out if out.is_absolute() else p.parent / out, cells=cells,
                 trace_format=trace_format,
                 limit_jobs=body.get("limit_jobs"), backend=backend, workers=body.get("workers"),
                 submit=submit, sbatch_options=tuple(options),
                 max_parallel=slurm.get("max_parallel"))


def _check_grid(p: Path, lists: dict[str, list], specs: list[ClusterSpec], trace_format: str,
                limit_jobs: int | None) -> None:
    """Every value of the grid, with the checks a single ``wattctl simulate`` makes, before any
    cell runs: a bad value fails the whole sweep at once, not each of its cells."""
    from ..physics.classes import class_mix
    from ..policy import get_policy
    from .carbon import load_carbon
    from .run import Inputs, default_trace, load_jobs

    for name in lists["policies"]:
        try:
            get_policy(name)
        except ConfigError as exc:
            raise _fail(p, "policies", name, exc.fix) from None
    for mix in lists["class_mixes"]:
        try:
            class_mix(mix)
        except InputError as exc:
            raise _fail(p, "class_mixes", mix, str(exc)) from None
    for zone in lists["zones"]:
        try:
            load_carbon(None, zone, 0.0)       # a cell runs on the zone's built-in series
        except InputError as exc:
            raise _fail(p, "zones", zone, str(exc).replace("; or give --carbon FILE", "")) \
                from None
    for trace in lists["traces"]:
        for i, spec in enumerate(specs):
            try:
                load_jobs(Inputs(trace=Path(trace) if trace else default_trace(),
                                 trace_format=trace_format, spec=spec, zone="",
                                 limit_jobs=limit_jobs))
            except InputError as exc:
                where = f" (on [[sweep.clusters]] number {i + 1})" if len(specs) > 1 else ""
                why = re.sub(r"give a larger cluster \(.*?\)",
                             "give a larger cluster in [[sweep.clusters]]", str(exc))
                raise _fail(p, "traces", trace or "(built-in)", f"{why}{where}") from None


def cell_line(cell: Cell, result: dict[str, Any]) -> dict[str, Any]:
    """One JSON line: the cell's parameters, then its metrics."""
    return {"cell": cell.index, "key": cell.key, **cell.params(),
            "result": {k: v for k, v in result.items() if k != "classes"}}


def read_cells(sweep: Sweep) -> list[dict[str, Any]]:
    """The finished cells' lines, in grid order."""
    return [json.loads(sweep.cell_file(c).read_text()) for c in sweep.cells
            if sweep.cell_file(c).exists()]


def _label(line: dict[str, Any]) -> tuple:
    cluster = ",".join(f"{k}={v}" for k, v in sorted(line["cluster"].items())) or "default"
    return (Path(line["trace"]).name or "built-in", cluster, line["policy"], line["class_mix"],
            line["zone"])


def summary(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per cell less its seed: the number of seeds, and the mean and standard deviation (over
    seeds, n - 1 in the denominator; 0 for one seed) of each ``SUMMARY_FIELDS`` figure."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for line in lines:
        groups.setdefault(_label(line), []).append(line["result"])
    out = []
    for label, results in groups.items():
        row: dict[str, Any] = dict(zip(("trace", "cluster", "policy", "class_mix", "zone"), label))
        row["seeds"] = len(results)
        for f in SUMMARY_FIELDS:
            vals = [r[f] for r in results if isinstance(r.get(f), (int, float))]
            if not vals:
                continue
            mean = sum(vals) / len(vals)
            sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
            row[f] = {"mean": mean, "sd": sd}
        out.append(row)
    return out


def summary_table(rows: list[dict[str, Any]]) -> str:
    """The summary as text: mean ± sd per figure."""
    head = ["trace", "cluster", "policy", "class_mix", "zone", "seeds", *SUMMARY_FIELDS]
    body = []
    for r in rows:
        cells = [str(r[k]) for k in head[:6]]
        for f in SUMMARY_FIELDS:
            v = r.get(f)
            cells.append("-" if v is None else f"{v['mean']:.4g} ± {v['sd']:.2g}")
        body.append(cells)
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths)) for b in body]
    return "\n".join(lines)


def array_spec(indexes: list[int], max_parallel: int | None = None) -> str:
    """Slurm's ``--array`` value for these task indexes (runs of consecutive ones as ranges)."""
    parts = []
    for _, run in itertools.groupby(enumerate(sorted(indexes)), key=lambda x: x[1] - x[0]):
        run = [v for _, v in run]
        parts.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ",".join(parts) + (f"%{max_parallel}" if max_parallel else "")


def array_script(python: str, sweep_file: Path, log_dir: Path) -> str:
    """The batch script of the array: each task runs the cell of its index."""
    return (f"#!/bin/bash\n#SBATCH --job-name=wattctl-sweep\n"
            f"#SBATCH --output={log_dir}/%A_%a.out\n"
            f"exec {python} -m slurm_plugin.cli simulate --sweep {sweep_file} "
            f"--sweep-cell \"$SLURM_ARRAY_TASK_ID\"\n")
