"""``@record``: the frozen, slotted value classes of the model and the wrapper."""

from __future__ import annotations

import copy
import pickle

import pytest

from slurm_plugin.record import FrozenInstanceError, asdict, field, fields, record, replace


@record
class Point:
    """A point."""
    x: int
    y: int = 0
    tags: tuple = ()
    extra: dict = field(default_factory=dict)

    @property
    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)


@record
class Pair:
    a: int
    b: str = ""


@record(frozen=False)
class Box:
    items: list = field(default_factory=list)


def test_init_defaults_factories_and_value_semantics():
    p = Point(1)
    assert (p.x, p.y, p.tags, p.extra) == (1, 0, (), {})
    assert Point(1).extra is not Point(1).extra                  # a new dict each time
    assert p == Point(1, 0) and p != Point(2)
    assert repr(Point(1, 2)) == "Point(x=1, y=2, tags=(), extra={})"
    assert p.norm1 == 1 and Point.__doc__ == "A point."
    assert fields(p) == fields(Point) == ("x", "y", "tags", "extra")
    with pytest.raises(TypeError):
        Point()                                                   # x is required
    with pytest.raises(TypeError):
        Point(1, bogus=2)


def test_frozen_slotted_and_hashable_by_value():
    p = Point(3, 4, ("a",))
    with pytest.raises(FrozenInstanceError):
        p.x = 5
    with pytest.raises(AttributeError):
        p.__dict__                                                # slotted
    q = Point(3, 4, ("a",))
    assert hash(Pair(3, "x")) == hash(Pair(3, "x")) and {Pair(3): 1}[Pair(3)] == 1
    assert Pair(1) != Point(1)                                   # another class is never equal
    assert q == p and (p == (3, 4)) is False


def test_replace_asdict_copy_and_pickle():
    p = Point(1, 2, (Point(5),))
    assert replace(p, y=9) == Point(1, 9, (Point(5),))
    with pytest.raises(TypeError, match="no field 'z'"):
        replace(p, z=1)
    assert asdict(p) == {"x": 1, "y": 2, "tags": ({"x": 5, "y": 0, "tags": (), "extra": {}},),
                         "extra": {}}
    assert pickle.loads(pickle.dumps(p)) == p and copy.deepcopy(p) == p


def test_mutable_record_is_unhashable():
    b = Box()
    b.items.append(1)
    b.items = [2]
    assert b == Box([2]) and Box.__hash__ is None


def test_a_required_field_after_a_default_is_refused():
    with pytest.raises(TypeError, match="without a default follows"):
        @record
        class Bad:
            a: int = 0
            b: int
