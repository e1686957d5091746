"""``ones``'s population: ``Room.fits`` answers as a release and a place would; without a queued
job the running schedule refilled is the answer (no draws); a generation that finds nothing
fitter ends the evolution; a seed gives one schedule."""

from __future__ import annotations

import random

from slurm_plugin.policy.ones.evolve import Plan, Room, evolve


def test_fits_agrees_with_release_then_place():
    rng = random.Random(7)
    for _ in range(2000):
        gpn = rng.choice((4, 8))
        room = Room({f"n{i}": rng.randint(0, gpn) for i in range(rng.randint(1, 6))}, gpn)
        names = list(room.free)
        picked = rng.sample(names, rng.randint(0, min(2, len(names))))
        uses = {nm: rng.randint(1, gpn) for nm in picked}
        uses = {nm: min(c, gpn - room.free[nm]) for nm, c in uses.items()}
        uses = {nm: c for nm, c in uses.items() if c > 0}
        n = rng.randint(1, 3 * gpn)
        expect = room.copy()
        expect.release(uses)
        assert room.fits(uses, n) == (expect.place(n) is not None), (room.free, uses, n)


def _plan(i: int, running: bool, counts=(1, 2, 4)) -> Plan:
    opts = [(c, None, 1e-4 * c ** 0.8) for c in counts]
    uses = {f"n{i}": 1} if running else {}
    return Plan(str(i), running, False, opts, 0 if running else -1, 1.0, 90.0, (i, str(i)), uses)


def test_without_a_queued_job_the_refilled_seed_is_the_answer_and_nothing_is_drawn():
    plans = [_plan(i, True) for i in range(3)]
    rng = random.Random(1)
    state = rng.getstate()
    seed, best = evolve(plans, Room({"n0": 3, "n1": 3, "n2": 3}, 4), 8, 4, 0.3, 0.3, rng)
    assert seed == best and rng.getstate() == state
    assert seed[1] == (2, 2, 2)        # each grew into its node's free GPUs


def test_a_generation_that_finds_nothing_fitter_ends_the_evolution():
    # one queued job and no free GPU: every schedule is the seed, so one generation runs
    plans = [_plan(0, True, (1,)), _plan(1, False)]
    draws = []

    class Counting(random.Random):
        def random(self):
            draws.append(1)
            return super().random()

    evolve(plans, Room({"n0": 0}, 4), 4, 10, 0.3, 0.3, Counting(3))
    one_generation = len(draws)
    draws.clear()
    evolve(plans, Room({"n0": 0}, 4), 4, 1, 0.3, 0.3, Counting(3))
    assert len(draws) == one_generation


def test_a_seed_gives_one_schedule():
    plans = [_plan(i, i < 4, (1, 2, 4, 8)) for i in range(10)]
    room = Room({f"n{i}": (i * 3) % 5 for i in range(6)}, 4)
    a = evolve(plans, room, 8, 4, 0.3, 0.3, random.Random("0:60.0"))
    b = evolve(plans, room, 8, 4, 0.3, 0.3, random.Random("0:60.0"))
    assert a == b
