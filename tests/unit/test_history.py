"""The history file: running means, group bookkeeping dropped with its jobs, tolerant reads."""

from __future__ import annotations

from slurm_plugin.history import FILE_NAME, History, read_view


def test_values_are_running_means_and_survive_a_reload(tmp_path):
    h = History(tmp_path / FILE_NAME)
    h.add("pair:vgg16+vgg16", 1.0)
    h.add("pair:vgg16+vgg16", 2.0)
    h.add("pair:vgg16+vgg16", 3.0)
    h.save()
    assert dict(read_view(tmp_path)) == {"pair:vgg16+vgg16": 2.0}


def test_forget_groups_drops_marks_of_finished_groups_only(tmp_path):
    h = History(tmp_path / FILE_NAME)
    for key in ("mark:11+12:11:step", "mark:11+12:12:t", "seen:11+12",   # 12 still runs
                "mark:21+22:21:step", "seen:21+22",                          # both finished
                "pair:alexnet+resnet18", "job:u:vgg16:slowdown"):
        h.add(key, 1.0)
    assert h.forget_groups({"12", "99"}) == 2
    assert sorted(h.view()) == ["job:u:vgg16:slowdown", "mark:11+12:11:step",
                                "mark:11+12:12:t", "pair:alexnet+resnet18", "seen:11+12"]


def test_read_view_of_a_missing_or_corrupt_file_is_empty(tmp_path):
    assert dict(read_view(tmp_path / "nowhere")) == {}
    (tmp_path / FILE_NAME).write_text("{not json")
    assert dict(read_view(tmp_path)) == {}


def test_a_corrupt_file_is_kept_aside_when_the_reconciler_saves(tmp_path):
    (tmp_path / FILE_NAME).write_text("{not json")
    h = History(tmp_path / FILE_NAME)
    assert "not JSON" in h.warning
    h.add("pair:a+b", 1.5)
    h.save()
    assert (tmp_path / (FILE_NAME + ".corrupt")).read_text() == "{not json"
    assert dict(read_view(tmp_path)) == {"pair:a+b": 1.5}


def test_policy_state_keeps_the_last_value_as_in_the_simulator(tmp_path):
    h = History(tmp_path / FILE_NAME)
    for value in (100.0, 250.0):
        h.add("greenflow.spent_g", value)           # carbon spent so far: not a mean
        h.add("elastic:n:7", value)
    assert h.view()["greenflow.spent_g"] == 250.0 and h.view()["elastic:n:7"] == 250.0


def test_per_job_state_goes_with_its_job(tmp_path):
    h = History(tmp_path / FILE_NAME)
    for key in ("elastic:n:7", "elastic:run:7", "elastic:n:8", "greenflow.spent_g",
                "ones:f0:7", "tiresias:a:7"):
        h.add(key, 1.0)
    assert h.forget_groups({"8"}) == 4
    assert sorted(h.view()) == ["elastic:n:8", "greenflow.spent_g"]
