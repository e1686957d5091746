"""Draws keyed by text (a job's id and the seed): ``random.Random(text)``, as Python seeds it
from a str, without building a generator or its Python-level wrapper each time. The simulator
draws a class, a time limit and a slack per job, a million times at a year's scale."""

from __future__ import annotations

import random
from hashlib import sha512

_RNG = random.Random()
_SEED = random.Random.__mro__[1].seed      # _random.Random.seed: the C generator's own


def seeded(text: str) -> random.Random:
    """A generator in the state ``random.Random(text)`` starts in (seed version 2: the text's
    bytes and their SHA-512, as one big-endian integer). One shared generator: draw from it
    at once, never keep it."""
    b = text.encode()
    _SEED(_RNG, int.from_bytes(b + sha512(b).digest(), "big"))
    _RNG.gauss_next = None
    return _RNG
