"""A forged hint or a forged progress point changes no decision about another user's job.

Alice's job (alexnet) shares a GPU; Mallory's job joins it later. What Mallory declares as
her class (the ``app=`` of her comment, any text she likes) and any progress point she writes
for Alice's job must not move, shrink or requeue Alice's job."""

from __future__ import annotations

import json
from types import MappingProxyType

import pytest
import test_eaco_shapes as shapes

from slurm_plugin import progress_key
from slurm_plugin.model import Cluster, Progress
from slurm_plugin.physics.classes import class_names
from slurm_plugin.policy.eaco.decide import Eaco
from slurm_plugin.record import replace
from slurm_plugin.formats.admin_comment import app_from_comment
from slurm_plugin.telemetry.influx import parse_results
from slurm_plugin.telemetry.readers import latest_progress

T0 = shapes.NOW
ALICE, MALLORY = "1", "2"


def shared_gpu(mallory_comment: str) -> Cluster:
    base = shapes.one_gpu({ALICE: "alexnet", MALLORY: "alexnet"})
    alice = replace(shapes.running(ALICE, "alexnet", [("a", 0)], shards=1, submit_s=T0 - 500,
                                   user="alice"), comment="wb:policy=eaco;app=alexnet")
    mallory = replace(shapes.running(MALLORY, app_from_comment(mallory_comment), [("a", 0)],
                                     shards=1, submit_s=T0 - 100, user="mallory"),
                      comment=mallory_comment)
    return Cluster(base.nodes, MappingProxyType({ALICE: alice, MALLORY: mallory}), T0)


def honest_progress(job_id: str) -> Progress:
    return Progress(job_id=job_id, step=5, samples_per_s=3.2, epoch=0, steps_per_epoch=10,
                    total_steps=100, taken_s=T0, started_s=T0 - 50)


HONEST = {ALICE: honest_progress(ALICE), MALLORY: honest_progress(MALLORY)}


def decisions(cluster: Cluster, progress: dict[str, Progress] | None = None):
    return Eaco().reconcile(shapes.context(cluster, progress=HONEST if progress is None
                                           else progress))


@pytest.mark.parametrize("forged", [*class_names(), "unknown-class", "x" * 500, ""])
def test_a_forged_class_never_moves_another_users_job(forged):
    comment = f"wb:policy=eaco;app={forged}"
    acted = [a for a in decisions(shared_gpu(comment)) if a.kind != "observe"]
    assert all(a.job_id != ALICE for a in acted), acted


def test_forging_the_class_that_hurts_alice_moves_only_mallory():
    honest = [a for a in decisions(shared_gpu("app=resnet18")) if a.kind != "observe"]
    forged = [a for a in decisions(shared_gpu("app=lstm")) if a.kind != "observe"]
    assert honest == []                                # alexnet + resnet18 share well
    assert [(a.kind, a.job_id) for a in forged] == [("move_exclusive", MALLORY)]


def _progress_store(points):
    doc = {"results": [{"statement_id": 0, "series": [
        {"name": "job_progress", "tags": {"job_id": job}, "columns": ["time", *sorted(f)],
         "values": [[int(t * 1e9), *(f[k] for k in sorted(f))]]} for job, t, f in points]}]}

    class Store:
        def query(self, influxql):
            return parse_results(json.dumps(doc).encode(), "GET test/query")
    return Store()


def test_a_forged_progress_point_changes_no_decision():
    site_key = b"k" * 32
    verifier = progress_key.Verifier(site_key)
    fields = {"step": 50, "samples_per_s": 3.2, "total_steps": 100, "steps_per_epoch": 10,
              "epoch": 5, "started_s": T0 - 400}
    # Mallory writes a point for Alice's job claiming she crawls (1 step): unsigned, then
    # signed with Mallory's own job key
    own_key = progress_key.job_key(site_key, MALLORY).hex().encode()
    forged = [(ALICE, T0, {**fields, "step": 1}),
              (ALICE, T0 + 1, {**fields, "step": 1,
                               "sig": progress_key.sign(own_key, ALICE, T0 + 1,
                                                        {**fields, "step": 1})})]
    for point in forged:
        warnings: list[str] = []
        read = latest_progress(_progress_store([point]), T0 + 5, job_ids=[ALICE, MALLORY],
                               verify=verifier.ok, warnings=warnings)
        assert read == {} and warnings
        cluster = shared_gpu("app=resnet18")
        assert decisions(cluster, {**HONEST, **read}) == decisions(cluster, HONEST)


@pytest.mark.parametrize("admin, comment, app", [
    ("wb:uid=1000;declared_app=bert;tagged=1", "wb:policy=eaco;app=lstm", "bert"),
    ("wb:uid=1000;declared_app=;tagged=0", "app=lstm", ""),
    ("", "wb:policy=eaco;app=lstm", "lstm"),                 # no job_submit.lua: the comment
    ("set by an admin", "app=lstm", "lstm")])
def test_class_comes_from_what_job_submit_lua_recorded(admin, comment, app):
    from slurm_plugin.slurm.parse import declared_app
    assert declared_app(admin, comment) == app
