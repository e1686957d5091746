"""The simulator's caches and indexes answer as a straightforward computation would."""

from __future__ import annotations

import random

import pytest

from slurm_plugin.policy import get_policy
from slurm_plugin.sim.carbon import load_carbon
from slurm_plugin.sim.cluster import ClusterSpec
from slurm_plugin.sim.engine import Simulator
from slurm_plugin.sim.state import BOOT, ON
from slurm_plugin.sim.trace import read_trace


@pytest.mark.parametrize("seed", range(4))
def test_carbon_integral_with_its_last_lookup_kept_equals_one_computed_afresh(seed):
    rng = random.Random(seed)
    start_s = 1_700_000_000.0
    carbon = load_carbon(None, "GB", start_s)
    t_s = start_s
    for _ in range(2000):
        if rng.random() < 0.8:      # back-to-back intervals, as the event loop asks
            t0_s, t1_s = t_s, t_s + rng.choice([0.0, rng.expovariate(1 / 600)])
            t_s = t1_s
        else:                       # an interval elsewhere in between (a policy's question)
            t0_s = start_s + rng.uniform(0, 60 * 86400)
            t1_s = t0_s + rng.uniform(0, 86400)
        want = carbon._integral_at(t1_s) - carbon._integral_at(t0_s)
        assert carbon.integral_h(t0_s, t1_s) == want


def _scanned_reservation(sim, head):
    """EASY's reservation computed straight from every node: the shadow time of ``head`` and,
    per reserved node, its GPUs left spare then."""
    g_need, pinned, now = head.per_node, set(head.pin_nodes), sim.now
    cands = []
    for n in sim.nodes:
        if pinned and n.name not in pinned:
            continue
        t = sim._avail(n)[g_need - 1]
        if n.power == ON:
            base = now
        else:
            base = max(now, n.ready_s) if n.power == BOOT else now + sim.spec.resume_delay_s
        cands.append((max(t, base), n.pos, n))
    if len(cands) < head.num_nodes:
        return (float("inf"), {})
    chosen = sorted(cands)[:head.num_nodes]
    shadow = chosen[-1][0]
    return (shadow, {n.name: sum(1 for x in sim._avail(n) if x <= shadow) - g_need
                     for _, _, n in chosen})


class _CheckedReservations(Simulator):
    """Asserts at every reservation that the indexed answer is the scanned one."""

    checked = 0

    def _reserve(self, head):
        res = super()._reserve(head)
        assert res == _scanned_reservation(self, head)
        self.checked += 1
        return res


@pytest.mark.parametrize("case", range(8))
def test_reservations_from_the_avail_columns_equal_a_scan_of_every_node(tmp_path, case,
                                                                         make_trace):
    rng = random.Random(3000 + case)
    spec = ClusterSpec(nodes=rng.randint(2, 8), gpus_per_node=rng.choice([2, 4, 8]),
                       bf_interval_s=rng.choice([2.0, 30.0]),
                       suspend_time_s=rng.choice([None, 600.0]))
    jobs = read_trace(make_trace(tmp_path / "t.csv", rng, 200, spec.gpu_count), "canonical")
    name = ("slurm-default", "gandiva", "tiresias", "fifo-packed")[case % 4]
    sim = _CheckedReservations(jobs, spec, get_policy(name), seed=case)
    assert sim.run()["jobs_finished"] == len(jobs)
    assert sim.checked > 0
