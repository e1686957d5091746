"""The cluster view (``cluster_view``, ``view_codec``): what the reconciler writes is what every
user's wattbatch reads back; a view that cannot be trusted or decided from is refused with the
reason, and the submission reads Slurm instead."""

from __future__ import annotations

import json
import os
import time
from types import MappingProxyType

import pytest

from slurm_plugin import cluster_view
from slurm_plugin.model import GpuReading, Job, Progress, Readings, Resident
from slurm_plugin.record import replace
from slurm_plugin.slurm.parse import plain


class Cfg(dict):
    def __init__(self, **over):
        super().__init__({"cluster.name": "wattbatch", "view.max_age_s": 180.0,
                          "view.owner": "", "view.hide_job_owners": False, **over})


def _golden(golden_dir, release, taken_s):
    from slurm_plugin.slurm.snapshot import build_cluster
    d = golden_dir / "slurm" / release
    return build_cluster(json.loads((d / "nodes.json").read_text()),
                         json.loads((d / "squeue.json").read_text()), "wattbatch", taken_s)


READINGS = Readings(
    gpus=MappingProxyType({("gpu1", 0): GpuReading("gpu1", 0, 120.5, 1e6, 55.0, 4096.0, 300.0,
                                                   10.0, (Resident("7", 2, 40.0, "vgg16"),),
                                                   "V100")}),
    progress=MappingProxyType({"7": Progress("7", 120, 33.0, 2, 60, 600, 9.0, 1.0, 256)}),
    carbon_g_per_kwh=210.0, carbon_forecast=((3600.0, 200.0), (7200.0, 150.0)),
    cluster_power_w=4000.0, period_spent_g=(0.0, 12.5, MappingProxyType({"physics": 12.5})),
    taken_s=10.0, warnings=("x",))


@pytest.mark.parametrize("release", ["22.05", "24.11", "26.05"])
def test_what_is_published_is_read_back(tmp_path, golden_dir, release):
    now = time.time()
    cluster = _golden(golden_dir, release, now - 5)
    path = str(tmp_path / "view" / "cluster.json")
    cluster_view.publish(path, Cfg(), cluster, READINGS)
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"
    assert os.listdir(tmp_path / "view") == ["cluster.json"]      # no temporary file left
    got, readings = cluster_view.read(path, Cfg(), now)
    want = replace(cluster, jobs=MappingProxyType(
        {k: replace(j, comment="") for k, j in cluster.jobs.items()}),
        pending_count=sum(j.pending for j in cluster.jobs.values()))   # counted as read
    assert plain(got) == plain(want)
    assert readings == READINGS


def _reordered(table: dict, name: str, drop: str, add: str) -> None:
    """The ``name`` table as another release of wattbatch might write it: fields in reverse
    order, ``drop`` unknown to it, ``add`` unknown to us."""
    fields = list(table[f"{name}_fields"])
    keep = [f for f in reversed(fields) if f != drop]
    table[f"{name}_fields"] = keep + [add]
    rows = table["jobs"] if name == "job" else table["gpus"]
    rows[:] = [[row[fields.index(f)] for f in keep] + ["?"] for row in rows]


def test_a_view_whose_records_have_other_fields_is_read_by_name(tmp_path, golden_dir):
    """A view written by another wattbatch release: fields in another order, one we do not
    know (left out), one it did not know (our default)."""
    now = time.time()
    cluster = _golden(golden_dir, "24.11", now - 5)
    path = tmp_path / "v.json"
    cluster_view.publish(str(path), Cfg(), cluster, READINGS)
    doc = json.loads(path.read_text())
    _reordered(doc["snapshot"], "job", "array_tasks", "future_field")
    _reordered(doc["readings"], "reading", "model", "future_field")
    snapshot = doc["snapshot"]
    fields = snapshot["gpu_fields"]
    snapshot["gpu_fields"] = fields[::-1]
    for node in snapshot["nodes"]:
        node[5] = [row[::-1] for row in node[5]]
    path.write_text(json.dumps(doc))
    got, readings = cluster_view.read(str(path), Cfg(), now)
    want = {k: replace(j, comment="", array_tasks=1) for k, j in cluster.jobs.items()}
    assert plain(dict(got.jobs)) == plain(want)
    assert got.nodes == cluster.nodes
    assert readings == replace(READINGS, gpus=MappingProxyType(
        {k: replace(g, model="") for k, g in READINGS.gpus.items()}))


def test_a_site_that_hides_jobs_owners_publishes_none(tmp_path, golden_dir):
    cluster = _golden(golden_dir, "24.11", time.time())
    path = str(tmp_path / "v.json")
    cluster_view.publish(path, Cfg(**{"view.hide_job_owners": True}), cluster, None)
    got, readings = cluster_view.read(path, Cfg(), time.time())
    assert readings is None and got.jobs
    assert all(j.user == j.account == j.name == j.comment == "" for j in got.jobs.values())


def _view(tmp_path, **changes):
    path = tmp_path / "v.json"
    cluster_view.publish(str(path), Cfg(), replace(_golden_plain(), taken_s=time.time()), None)
    doc = json.loads(path.read_text())
    doc.update(changes)
    path.write_text(json.dumps(doc))
    return str(path)


def _golden_plain():
    from slurm_plugin.model import Cluster, Gpu, Node
    return Cluster(nodes=(Node("gpu1", gpus=(Gpu("gpu1", 0),)),),
                   jobs=MappingProxyType({"5": Job("5", "RUNNING", comment="secret")}))


@pytest.mark.parametrize("change, reason", [
    ({"cluster": "other"}, "of cluster 'other', this site is 'wattbatch'"),
    ({"version": 99}, f"format version 99, this wattbatch reads version {cluster_view.VERSION}"),
    ({"format": "x"}, "not a wattbatch cluster view"),
])
def test_a_view_of_another_cluster_or_format_is_refused(tmp_path, change, reason):
    path = _view(tmp_path, **change)
    with pytest.raises(cluster_view.ViewRefused, match=reason) as got:
        cluster_view.read(path, Cfg(), time.time())
    assert path in str(got.value)


def test_a_view_cut_short_from_the_future_stale_or_missing_is_refused(tmp_path):
    path = _view(tmp_path)
    whole = open(path, "rb").read()
    with open(path, "wb") as fh:
        fh.write(whole[: len(whole) // 2])
    with pytest.raises(cluster_view.ViewRefused, match="not whole JSON"):
        cluster_view.read(path, Cfg(), time.time())
    path = _view(tmp_path)
    with pytest.raises(cluster_view.ViewRefused, match="in the future"):
        cluster_view.read(path, Cfg(), time.time() - 3600)
    with pytest.raises(cluster_view.ViewRefused, match="s old, over view.max_age_s = 180"):
        cluster_view.read(path, Cfg(), time.time() + 600)
    with pytest.raises(cluster_view.ViewRefused, match="missing"):
        cluster_view.read(str(tmp_path / "none.json"), Cfg(), time.time())


@pytest.mark.skipif(os.getuid() != 0, reason="changing a file's owner needs root")
def test_a_view_another_user_wrote_or_may_write_is_refused(tmp_path):
    path = _view(tmp_path)
    os.chmod(tmp_path, 0o755)
    os.chown(path, 65534, 65534)                 # nobody's
    with pytest.raises(cluster_view.ViewRefused, match="belongs to uid 65534.*not trusted"):
        cluster_view.read(path, Cfg(), time.time())
    assert cluster_view.read(path, Cfg(**{"view.owner": "nobody"}), time.time())
    os.chown(path, 0, 0)
    os.chmod(path, 0o666)
    with pytest.raises(cluster_view.ViewRefused, match="may be written by others"):
        cluster_view.read(path, Cfg(), time.time())
    os.chmod(path, 0o644)
    os.chmod(tmp_path, 0o777)
    with pytest.raises(cluster_view.ViewRefused, match="its directory may be written by others"):
        cluster_view.read(path, Cfg(), time.time())
    os.chmod(tmp_path, 0o755)


def test_a_crash_mid_write_leaves_the_previous_view(tmp_path, monkeypatch):
    path = _view(tmp_path)
    before = open(path, "rb").read()

    def crash(*a, **k):
        raise KeyboardInterrupt("killed mid-write")
    monkeypatch.setattr(cluster_view.os, "fsync", crash)
    with pytest.raises(KeyboardInterrupt):
        cluster_view.publish(path, Cfg(), replace(_golden_plain(), taken_s=time.time()), None)
    assert open(path, "rb").read() == before
    assert sorted(os.listdir(tmp_path)) == ["v.json"]


def test_the_next_pass_removes_what_a_killed_one_left(tmp_path):
    path = _view(tmp_path)
    old, new = tmp_path / ".view-killed.tmp", tmp_path / ".view-writing.tmp"
    old.write_text("{")
    new.write_text("{")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    cluster_view.publish(path, Cfg(), replace(_golden_plain(), taken_s=time.time()), None)
    assert sorted(os.listdir(tmp_path)) == [".view-writing.tmp", "v.json"]


def test_the_users_jobs_since_the_view_are_remembered_newest_kept(tmp_path):
    for k in range(cluster_view.PLACED_KEEP + 5):
        cluster_view.remember(str(tmp_path), Job(str(k), "PENDING", gpus=1), 100.0 + k)
    got = cluster_view.placed(str(tmp_path), 100.0 + cluster_view.PLACED_KEEP)
    assert [j.job_id for j in got] == [str(k) for k in range(cluster_view.PLACED_KEEP,
                                                             cluster_view.PLACED_KEEP + 5)]
    assert cluster_view.placed(None, 0.0) == []


def test_jobs_older_than_any_acceptable_view_are_forgotten(tmp_path):
    for k in range(10):
        cluster_view.remember(str(tmp_path), Job(str(k), "PENDING", gpus=1), 100.0 * k, 250.0)
    # at 900 s, a view accepted is at most 250 s old: the jobs of 700 s and later are kept
    assert [j.job_id for j in cluster_view.placed(str(tmp_path), 0.0)] == ["7", "8", "9"]


# ---------------------------------------------------------------- the view kept decoded
def test_a_kept_view_is_decided_from_only_while_it_is_the_same_file(tmp_path):
    path = _view(tmp_path)
    assert cluster_view.keep(path) and not cluster_view.keep(path)   # decoded once
    kept, _ = cluster_view.kept(path)
    got, _ = cluster_view.read(path, Cfg(), time.time())
    assert got is kept                                  # not decoded again
    cluster_view.publish(path, Cfg(), replace(_golden_plain(), taken_s=time.time(),
                                              name="next pass"), None)
    got, _ = cluster_view.read(path, Cfg(), time.time())
    assert got is not kept and got.name == "next pass"   # the new file, read
    assert cluster_view.kept(path)[0] is kept            # kept only by keep()
    assert cluster_view.keep(path) and cluster_view.kept(path)[0].name == "next pass"


def test_a_kept_view_is_checked_as_any_other(tmp_path):
    path = _view(tmp_path, cluster="other")
    assert cluster_view.keep(path)                      # keep asks no site config
    with pytest.raises(cluster_view.ViewRefused, match="of cluster 'other'"):
        cluster_view.read(path, Cfg(), time.time())
    with pytest.raises(cluster_view.ViewRefused, match="s old, over view.max_age_s"):
        cluster_view.read(path, Cfg(**{"cluster.name": "other"}), time.time() + 600)
    if os.getuid() == 0:
        os.chown(path, 65534, 65534)                    # nobody's, since it was kept
        with pytest.raises(cluster_view.ViewRefused, match="not trusted"):
            cluster_view.read(path, Cfg(**{"cluster.name": "other"}), time.time())


def test_keeping_what_is_no_view_keeps_nothing(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert not cluster_view.keep(str(bad)) and cluster_view.kept(str(bad)) is None
    assert not cluster_view.keep(str(tmp_path / "none.json"))


def test_a_view_counts_its_pending_jobs(tmp_path):
    from slurm_plugin.model import Cluster, Node
    jobs = {"1": Job("1", "PENDING"), "2": Job("2", "RUNNING"), "3": Job("3", "PENDING")}
    path = str(tmp_path / "v.json")
    cluster_view.publish(path, Cfg(), Cluster(nodes=(Node("n1"),), jobs=MappingProxyType(jobs),
                                              taken_s=time.time()), None)
    got, _ = cluster_view.read(path, Cfg(), time.time())
    assert got.pending_count == 2 and got.pending_at_least(5) == 2


@pytest.mark.parametrize("carbon_read, carbon, asks_influx", [
    (True, None, False),      # the pass looked for carbon and found none: nothing to ask again
    (False, None, True),      # the pass never looked (its policy plans without carbon)
    (False, 250.0, False),    # a view that holds it (or one an older wattbatch wrote)
])
def test_a_carbon_policy_takes_the_views_readings_when_the_pass_looked(
        tmp_path, monkeypatch, carbon_read, carbon, asks_influx):
    from slurm_plugin.model import Cluster, Node
    from wrapper import cli
    path = str(tmp_path / "v.json")
    cluster_view.publish(path, Cfg(), Cluster(nodes=(Node("n1"),), taken_s=time.time()),
                         Readings(carbon_g_per_kwh=carbon, carbon_read=carbon_read))
    got, readings = cluster_view.read(path, Cfg(), time.time())
    assert readings.carbon_read is carbon_read
    monkeypatch.setitem(cli._VIEW_READINGS, path, readings)
    asked = []
    import slurm_plugin.telemetry.readers as readers
    monkeypatch.setattr(readers, "read_readings", lambda *a, **k: asked.append(1) or Readings())
    from slurm_plugin.config import load
    cfg = load(environ={"WATTBATCH_INFLUX_SKIP_AFTER_TIMEOUT_S": "0"})
    cli._influx_readings(cfg, replace(got, source=f"view {path}"), time.time(), carbon=True)
    assert bool(asked) is asks_influx
