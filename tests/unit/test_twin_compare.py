"""Comparing a live run with a simulated one: start order, JCT summary, counter windows."""

from __future__ import annotations

import itertools
import random

import pytest

from slurm_plugin.errors import InputError
from slurm_plugin.sim.twin import (JobTimes, common_order, integrate, moved_jobs,
                                   order_agreement, pairwise_agreement, start_order, summary)


def _brute_lcs(a: list[str], b: list[str]) -> int:
    best = 0
    for r in range(len(a) + 1):
        for keep in itertools.combinations(a, r):
            if [x for x in b if x in keep] == list(keep):
                best = max(best, r)
    return best


def test_start_order_breaks_ties_by_submit_then_id():
    jobs = [JobTimes("c", 2.0, 10.0, 20.0), JobTimes("a", 1.0, 10.0, 30.0),
            JobTimes("b", 0.0, 12.0, 15.0), JobTimes("d", 1.0, 10.0, 11.0)]
    assert start_order(jobs) == ["a", "d", "c", "b"]


def test_identical_orders_agree_fully():
    order = list("abcdefghij")
    assert order_agreement(order, order) == 1.0
    assert pairwise_agreement(order, order) == 1.0
    assert moved_jobs(order, order) == []


def test_one_job_moved_to_the_front_costs_one_job_not_all_ranks():
    a = list("abcdefghij")
    b = ["j"] + a[:-1]            # every job's rank differs, but only "j" moved
    assert order_agreement(a, b) == pytest.approx(0.9)
    assert moved_jobs(a, b) == ["j"]
    assert pairwise_agreement(a, b) == pytest.approx(1 - 9 / 45)


def test_reversed_order_keeps_one_job():
    a = list("abcde")
    assert order_agreement(a, a[::-1]) == pytest.approx(1 / 5)
    assert pairwise_agreement(a, a[::-1]) == 0.0


def test_common_order_is_a_longest_common_subsequence():
    rng = random.Random(3)
    for _ in range(200):
        a = [str(i) for i in range(rng.randint(0, 7))]
        b = a[:]
        rng.shuffle(b)
        lcs = common_order(a, b)
        assert len(lcs) == _brute_lcs(a, b)
        assert [x for x in a if x in lcs] == lcs == [x for x in b if x in lcs]


def test_orders_of_different_jobs_are_refused():
    with pytest.raises(InputError, match="different jobs.*c"):
        order_agreement(["a", "b"], ["a", "c"])
    with pytest.raises(InputError, match="twice"):
        pairwise_agreement(["a", "a"], ["a", "a"])


def test_summary_averages_and_makespan():
    jobs = [JobTimes("1", 0.0, 0.0, 10.0), JobTimes("2", 5.0, 10.0, 30.0)]
    s = summary(jobs)
    assert s["avg_jct_s"] == pytest.approx((10 + 25) / 2)
    assert s["avg_queue_s"] == pytest.approx(2.5)
    assert s["avg_run_s"] == pytest.approx(15.0)
    assert s["makespan_s"] == pytest.approx(30.0)
    with pytest.raises(InputError):
        summary([])


def test_integral_of_power_samples_is_trapezoids_clipped_to_the_window():
    samples = [(0.0, 100.0), (2.0, 100.0), (4.0, 300.0), (4.0, 300.0), (6.0, 300.0)]
    assert integrate(samples, 0.0, 2.0) == pytest.approx(200.0)
    assert integrate(samples, 2.0, 4.0) == pytest.approx(400.0)       # the ramp 100 -> 300
    assert integrate(samples, 3.0, 5.0) == pytest.approx(250.0 + 300.0)
    assert integrate(samples, 1.0, 1.0) == 0.0
    assert integrate(samples, 0.0, 6.0) == pytest.approx(200.0 + 400.0 + 600.0)


def test_integral_refuses_a_window_the_samples_do_not_cover():
    with pytest.raises(InputError, match="not covered"):
        integrate([(0.0, 1.0), (2.0, 1.0)], 1.0, 2.5)
    with pytest.raises(InputError, match="no samples"):
        integrate([], 0.0, 1.0)
    with pytest.raises(InputError, match="not covered"):
        integrate([(0.0, 1.0), (2.0, 1.0)], 1.5, 1.0)
