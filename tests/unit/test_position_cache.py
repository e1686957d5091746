"""``PositionCache``: the least value by key (per group) read from lazy heaps is the least of
the values held now, whatever was made, dropped and made again; and PAL's one-node pick read
from it is the best fit under the threshold of every candidate, as when scanned."""

from __future__ import annotations

import random
from operator import itemgetter

from slurm_plugin.policy.pal.decide import _LEFT, _SLOWEST, _pick_one
from slurm_plugin.policy.view_changes import PositionCache


class Opaque:
    """A value part that cannot be ordered: a heap comparing two values would raise."""

    def __lt__(self, other):
        raise AssertionError("values compared")


def test_least_is_the_least_held_per_group():
    rng = random.Random(3)
    for _ in range(60):
        n = rng.randint(1, 50)
        cache = PositionCache(n, key=itemgetter(0, 2), group=itemgetter(1))

        def make(pos: int):
            if rng.random() < 0.25:
                return None
            # few distinct keys: a position made again often gets the key it had
            return (rng.choice([1.0, 2.0, 3.0]), rng.randint(0, 2), pos, Opaque())

        for _ in range(40):
            values = cache.refresh(make)
            for g in range(3):
                held = [v for v in values.values() if v[1] == g]
                want = min(held, key=itemgetter(0, 2)) if held else None
                assert cache.least(g) is want
            cache.stale.update(rng.sample(range(n), rng.randint(0, n)))
        assert cache.entries <= 2 * len(cache.values) + 64 + n   # rebuilt when mostly stale


def test_without_a_group_the_least_of_all():
    cache = PositionCache(4, key=itemgetter(0, 1))
    got = cache.refresh(lambda pos: (10 - pos, pos))
    assert cache.least() is got[3]
    cache.stale.add(3)
    cache.refresh(lambda pos: None)         # position 3 has nothing now
    assert cache.least() is got[2]
    assert PositionCache(0, key=itemgetter(0)).least() is None


def _scanned(cands: list, tolerance: float) -> tuple[tuple, float]:
    """PAL's one-node pick over every candidate: the best fit (fewest GPUs left, then the
    lowest slowdown, then position) of those under the lowest slowdown plus the tolerance."""
    limit = min(cands)[0] * (1.0 + tolerance) + 1e-12
    return min([c for c in cands if c[0] <= limit], key=itemgetter(1, 0, 2)), limit


def test_pal_pick_one_is_the_scanned_best_fit():
    rng = random.Random(1)
    for _ in range(200):
        n = rng.randint(1, 40)
        cache = PositionCache(n, _SLOWEST, _LEFT)

        def make(pos: int):
            if rng.random() < 0.3:
                return None
            slow = rng.choice([1.0, 1.02, 1.2, 1.0 + rng.random()])
            return slow, rng.randint(0, 3), pos, Opaque(), []

        for _ in range(20):
            cands = list(cache.refresh(make).values())
            got = _pick_one(cache, 0.05)
            if not cands:
                assert got is None
                continue
            best, limit = _scanned(cands, 0.05)
            assert got is not None and got[0][0] is best and got[1] == limit
            cache.stale.update(rng.sample(range(n), rng.randint(0, n)))
