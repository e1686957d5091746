"""The simulator's caches and indexes answer as a straightforward computation would."""

from __future__ import annotations

import random

import pytest

from slurm_plugin.sim.carbon import load_carbon


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
