"""GPU power caps: where a job's cap is recorded, what limit a GPU gets, how NVML is set, and
what an emulated GPU draws and how fast its job runs under it."""

from __future__ import annotations

import pytest

from slurm_plugin.errors import InputError, TelemetryError
from slurm_plugin.model import Gpu, GpuUse, Job
from slurm_plugin.node.emulated import gpu_state
from slurm_plugin.node.power_cap import apply_caps, desired_caps, gpu_cap_w
from slurm_plugin.node.source import NvmlSource
from slurm_plugin.physics import max_power_w
from slurm_plugin.physics.job_cap import capped_job
from slurm_plugin.formats.admin_comment import recorded_cap, with_cap


@pytest.mark.parametrize("admin_comment,cap_w", [
    ("wb:uid=0;declared_app=x;tagged=1;policy=greenflow;cap=200", 200.0),
    ("wb:uid=0;cap=150.5 wb-energy:kwh=1", 150.5), ("wb-energy:cap=100 wb:uid=0", None),
    ("wb:uid=0;policy=eaco", None), ("", None), ("wb:cap=abc", None), ("wb:cap=-5", None),
    ("wb:cap=nan", None), ("wb:cap=1e9", None), ("cap=200", None)])
def test_the_cap_is_read_from_the_wb_word_of_the_admin_comment(admin_comment, cap_w):
    assert recorded_cap(admin_comment) == cap_w


def test_the_slack_is_read_from_the_same_record():
    from slurm_plugin.formats.admin_comment import recorded_slack
    assert recorded_slack("wb:uid=0;declared_app=x;tagged=1;policy=greenflow;slack=21600") == 21600
    assert recorded_slack("wb:uid=0;policy=greenflow") is None
    assert recorded_slack("wb:slack=-1") is None


def test_recorded_nice_reads_the_jobs_own_nice_from_admin_comment_then_comment():
    from slurm_plugin.formats.admin_comment import recorded_nice
    assert recorded_nice("wb:uid=0;declared_app=x;tagged=1;policy=pal;nice=7") == 7
    assert recorded_nice("wb:uid=0;policy=pal", "mine wb:policy=pal;nice=-5") == -5
    assert recorded_nice("wb:uid=0;nice=3", "wb:nice=9") == 3
    assert recorded_nice("wb:uid=0;policy=pal", "nice=4 wb:policy=pal") == 0
    assert recorded_nice("wb:nice=lots") == 0 and recorded_nice("") == 0


@pytest.mark.parametrize("old", ["", "wb:uid=0;declared_app=bert;tagged=1;policy=greenflow",
                                 "wb:uid=0;cap=100;policy=g wb-energy:kwh=1", "other words"])
def test_setting_a_cap_keeps_every_other_word_and_key(old):
    new = with_cap(old, 250.0)
    assert recorded_cap(new) == 250.0
    assert with_cap(new, 250.0) == new                       # idempotent
    back = with_cap(new, None)
    assert recorded_cap(back) is None
    assert [w for w in back.split()] == [w for w in with_cap(old, None).split()]
    assert "declared_app=bert" in new if "bert" in old else True
    assert "wb-energy:kwh=1" in new if "wb-energy" in old else True


def test_a_gpu_is_capped_only_when_every_job_on_it_asks_and_then_at_the_highest_ask():
    assert gpu_cap_w([200.0]) == 200.0
    assert gpu_cap_w([200.0, 250.0]) == 250.0
    assert gpu_cap_w([200.0, None]) is None                  # a co-located job asked none
    assert gpu_cap_w([]) is None
    assert gpu_cap_w([10.0]) == gpu_cap_w([1.0]) > 10.0      # clamped to the board's range


def _job(job_id, cap_w, *uses, state="RUNNING", app="nas"):
    return Job(job_id=job_id, state=state, uses=tuple(GpuUse("n1", i, s) for i, s in uses),
               power_cap_w=cap_w, app=app)


def test_desired_caps_follow_the_running_jobs_of_the_node():
    jobs = [_job("1", 200.0, (0, 0)), _job("2", 180.0, (1, 2)), _job("3", None, (1, 2)),
            _job("4", 150.0, (2, 0), state="PENDING"),
            Job(job_id="5", state="RUNNING", uses=(GpuUse("n2", 3, 0),), power_cap_w=120.0)]
    assert desired_caps(jobs, "n1", range(4)) == {0: 200.0, 1: None, 2: None, 3: None}
    assert desired_caps(jobs, "n1", range(4), leaving="3")[1] == 180.0


class Board:
    """A scripted NVML with settable limits (100-300 W, default 300 W)."""

    def __init__(self, fail_set=False):
        self.limits = {0: 300.0, 1: 250.0}
        self.sets, self.fail_set = [], fail_set

    def count(self): return 2
    def power_limit_range_w(self, i): return 100.0, 300.0
    def default_power_limit_w(self, i): return 300.0
    def power_limit_w(self, i): return self.limits[i]

    def set_power_limit_w(self, i, w):
        if self.fail_set:
            raise TelemetryError(f"nvml: set power limit on GPU {i}: Insufficient Permissions")
        self.sets.append((i, w))
        self.limits[i] = w

    def power_w(self, i): return 90.0
    def energy_j(self, i): return 1e6
    def util_pct(self, i): return 50.0
    def mem_used_mib(self, i): return 100.0
    def compute_pids(self, i): return ()
    def process_util_pct(self, i, since_us): return {}


def test_limits_are_set_where_they_differ_and_reset_to_the_default():
    board = Board()
    assert apply_caps(board, {0: 200.0, 1: None}) == []
    assert board.sets == [(0, 200.0), (1, 300.0)]
    assert apply_caps(board, {0: 200.0, 1: None}) == [] and len(board.sets) == 2   # level
    assert apply_caps(board, {0: 50.0}) == [] and board.limits[0] == 100.0         # clamped


def test_a_limit_that_cannot_be_set_is_reported_not_raised():
    failed = apply_caps(Board(fail_set=True), {0: 200.0})
    assert len(failed) == 1 and "Insufficient Permissions" in failed[0]


def test_the_nvml_source_sets_caps_every_refresh_and_reads_the_new_limit(capsys):
    board, now = Board(), [100.0]
    asks = {0: 200.0, 1: None}
    source = NvmlSource("n1", board, clock=lambda: now[0], job_of=lambda pid: None,
                        caps=lambda indexes: {i: asks[i] for i in indexes}, cap_refresh_s=60)
    assert [r.power_limit_w for r in source.read()] == [200.0, 300.0]
    asks[0] = 150.0
    now[0] = 130.0
    assert source.read()[0].power_limit_w == 200.0             # not yet: every 60 s
    now[0] = 161.0
    assert source.read()[0].power_limit_w == 150.0

    def broken(indexes):
        raise InputError("slurm: squeue failed")
    now[0] = 300.0
    NvmlSource("n1", board, clock=lambda: now[0], job_of=lambda pid: None, caps=broken).read()
    assert "power caps not read: slurm: squeue failed" in capsys.readouterr().err


def _gpu(*holders):
    return Gpu(node="n1", index=0, shards_total=4, shards_used=len(holders),
               shard_jobs=tuple(holders))


def test_an_emulated_gpu_under_a_cap_draws_less_and_its_job_runs_slower():
    free = gpu_state(_gpu("1"), {"1": _job("1", None, (0, 1))})
    capped = gpu_state(_gpu("1"), {"1": _job("1", 150.0, (0, 1))})
    power_w, slow = capped_job("nas", 1, 150.0)        # draws ~254 W uncapped
    assert free.power_limit_w == max_power_w() and capped.power_limit_w == 150.0
    assert capped.power_w <= 150.0 < free.power_w
    assert capped.power_w == pytest.approx(min(150.0, power_w), rel=0.02)
    assert capped.slowdown["1"] == pytest.approx(free.slowdown["1"] * slow)
    assert slow > 1.0


def test_an_emulated_shared_gpu_is_not_capped_for_a_job_that_asked_none():
    jobs = {"1": _job("1", 120.0, (0, 1)), "2": _job("2", None, (0, 1))}
    state = gpu_state(_gpu("1", "2"), jobs)
    assert state.power_limit_w == max_power_w()
    assert state.slowdown == gpu_state(_gpu("1", "2"), {**jobs, "1": _job("1", None, (0, 1))}
                                       ).slowdown
