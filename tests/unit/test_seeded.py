"""``seeded(text)`` draws exactly what ``random.Random(text)`` draws (the simulator's class,
time-limit, slack and elastic draws keep their values)."""

from __future__ import annotations

import random

from slurm_plugin.physics.seeded import seeded


def test_the_same_draws_as_a_generator_seeded_with_the_text():
    for text in ["0:1", "limit:3:52849", "slack:0:x#2", "7:elastic:é", "", "9" * 200]:
        want = random.Random(text)
        got = seeded(text)
        assert [got.random() for _ in range(5)] == [want.random() for _ in range(5)]
        assert seeded(text).randrange(8) == random.Random(text).randrange(8)
        assert seeded(text).gauss(0, 1) == random.Random(text).gauss(0, 1)
