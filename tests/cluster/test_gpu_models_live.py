"""A local cluster of two GPU models (two V100 nodes, two H100 nodes): Slurm's GRES types
name each GPU's model, the snapshot reads it, the emulated GPUs draw that model's power, and
the collector's split of a shared H100 holds against the emulated truth.

The module brings the session's cluster down, runs its own (same ports, its own state
directory) and puts the session's back at the end."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from slurm_plugin import live
from slurm_plugin.localcluster import cancel_all_jobs, down, up
from slurm_plugin.localcluster.energy_check import compare, submit_group, truth, wait_records
from slurm_plugin.localcluster.render import type_prefix
from slurm_plugin.physics import idle_power_w

pytestmark = pytest.mark.cluster
MODELS = "V100:2,H100:2"
V100, H100 = "V100-SXM2-32GB", "H100-80GB-HBM3"


@pytest.fixture(scope="module")
def mixed(localcluster):
    main = localcluster.spec
    down(main, cancel_jobs=True)
    spec = dataclasses.replace(main, state_dir=Path(f"{main.state_dir}-models"),
                               gpu_model=MODELS)
    patch = pytest.MonkeyPatch()
    try:
        up(spec, install=False)
        for name, value in spec.env().items():
            patch.setenv(name, value)
        yield dataclasses.replace(
            localcluster, spec=spec, state_dir=spec.state_dir, slurm_conf=spec.slurm_conf,
            site_toml=spec.site_toml, env=spec.env())
    finally:
        patch.undo()
        cancel_all_jobs(spec)
        down(spec)
        up(main, install=False)


def test_each_gpu_is_read_as_its_model_and_draws_its_power(mixed):
    cfg = mixed.config()
    cluster = live.snapshot(cfg)
    models = {n.name: {g.model for g in n.gpus} for n in cluster.nodes}
    assert models == {"gpu1": {V100}, "gpu2": {V100}, "gpu3": {H100}, "gpu4": {H100}}
    assert {g.gres_type for g in cluster.nodes[2].gpus} == {
        f"{type_prefix(H100)}g{i}" for i in range(4)}
    client = mixed.influx(cfg["influx.database"])
    deadline = time.monotonic() + 30
    while True:          # the collector's idle readings: each node's own model's idle power
        series = client.query('SELECT last("power_w") FROM "gpu" WHERE time > now() - 20s '
                              'GROUP BY "node"')
        idle = {s.tags["node"]: s.values[0][1] for s in series}
        if set(idle) >= {"gpu1", "gpu3"} or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert idle["gpu1"] == pytest.approx(idle_power_w(V100))
    assert idle["gpu3"] == pytest.approx(idle_power_w(H100))
    assert idle_power_w(H100) != pytest.approx(idle_power_w(V100))


def test_a_shared_h100_is_split_as_its_truth(mixed):
    cfg = mixed.config()
    shared = submit_group(cfg, ["vgg16", "lstm"], "gpu3", f"{type_prefix(H100)}g1", 30)
    alone = submit_group(cfg, ["vgg16"], "gpu1", f"{type_prefix(V100)}g0", 30)   # on a V100
    records = wait_records(cfg, shared + alone, timeout_s=120)
    assert set(records) == set(shared + alone), records
    true_j = truth(cfg)
    group = compare({j: records[j] for j in shared}, true_j)
    assert group["max_abs_error"] <= 0.05, group
    assert group["splits"] == ["util-class"]
    assert records[alone[0]]["energy_j"] == pytest.approx(true_j[alone[0]], rel=0.1)
