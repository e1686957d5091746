"""Frozen value records for the model and the wrapper: the part of ``dataclasses`` they use.

``wattbatch`` runs once per submission, so its start-up is its latency. Making a class with
``@dataclass(frozen=True, slots=True)`` compiles six methods and imports ``inspect``; over the
~30 classes a submission loads that was a third of its added latency. ``@record`` compiles
only ``__init__`` (the simulator builds many model objects, so it stays a real function), and
only when the first record of the class is made (a submission makes few of the classes it
loads); it shares one ``__eq__``, ``__hash__``, ``__repr__`` and frozen ``__setattr__`` between all
records. Semantics follow frozen, slotted dataclasses: fields are the class's annotations in
order, defaults and ``field(default_factory=...)`` as there, equality and hashing by value
within one class. ``replace``, ``fields`` and ``asdict`` stand in for the ``dataclasses``
functions.
"""

from __future__ import annotations

from operator import attrgetter

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Any, Callable

_MISSING = object()


class FrozenInstanceError(AttributeError):
    """Assigning to a field of a record."""


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


def field(*, default_factory: Callable[[], Any]) -> Any:
    """A field whose default is made anew for each record."""
    return _Factory(default_factory)


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return self._values(self) == self._values(other)


def _hash(self: Any) -> int:
    return hash(self._values(self))


def _repr(self: Any) -> str:
    inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__record_fields__)
    return f"{type(self).__qualname__}({inner})"


def _setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _reduce(self: Any) -> tuple:
    return (type(self), self._values(self))


_SHARED = {"__eq__": _eq, "__hash__": _hash, "__repr__": _repr, "__setattr__": _setattr,
           "__delattr__": _delattr, "__reduce__": _reduce}


def _values_getter(names: tuple[str, ...]) -> Callable[[Any], tuple]:
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        return lambda o, _n=names[0]: (getattr(o, _n),)
    return lambda o: ()


def record(cls: Any = None, *, frozen: bool = True) -> Any:
    """Make ``cls`` a slotted value class, frozen unless ``frozen=False`` (then unhashable,
    like a dataclass with ``eq=True``); see the module docstring."""
    if cls is None:
        return lambda c: _make(c, frozen)
    return _make(cls, frozen)


def _make(cls: Any, frozen: bool) -> Any:
    names = tuple(cls.__dict__.get("__annotations__", {}))
    _init_source(cls, names)             # checks the field order now, compiles on first use
    ns = {k: v for k, v in cls.__dict__.items()
          if k not in names and k not in ("__dict__", "__weakref__")}
    made_cls: Any = None

    def compile_now() -> Callable[..., None]:
        if made_cls.__dict__["__init__"] is not __init__:
            return made_cls.__dict__["__init__"]           # compiled already
        real = _compile_init(cls, names, made_cls)
        made_cls.__init__ = real
        return real

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        compile_now()(self, *args, **kwargs)
    ns["__init__"] = __init__
    _PENDING.append(compile_now)
    for k, v in _SHARED.items():
        ns.setdefault(k, v)
    if not frozen:
        for k in ("__setattr__", "__delattr__"):
            if ns[k] is _SHARED[k]:
                del ns[k]
        if ns["__hash__"] is _hash:
            ns["__hash__"] = None
    ns["__slots__"] = names
    ns["__record_fields__"] = names
    ns["__match_args__"] = names
    ns["_values"] = staticmethod(_values_getter(names))
    made_cls = type(cls)(cls.__name__, cls.__bases__, ns)
    return made_cls


_PENDING: list[Callable[[], Any]] = []


def compile_all() -> None:
    """Compile every record's ``__init__`` now (a process that forks a child per task does
    it once, before forking)."""
    while _PENDING:
        _PENDING.pop()()


def _init_source(cls: Any, names: tuple[str, ...],
                 made_cls: Any = None) -> tuple[str, dict[str, Any]]:
    """The ``__init__`` source; each field set through its slot's own setter where
    ``made_cls`` has one (about half the time of ``object.__setattr__`` by name)."""
    env: dict[str, Any] = {"_set": object.__setattr__, "_M": _MISSING}
    params, body, seen_default = [], [], False
    for n in names:
        slot = made_cls.__dict__.get(n) if made_cls is not None else None
        if slot is not None:
            env[f"_s_{n}"] = slot.__set__
            put = f" _s_{n}(self, "
        else:
            put = f" _set(self, {n!r}, "
        d = cls.__dict__.get(n, _MISSING)
        if d is _MISSING:
            if seen_default:
                raise TypeError(f"{cls.__name__}: field {n!r} without a default follows one "
                                "with a default")
            params.append(n)
            body.append(f"{put}{n})")
        elif isinstance(d, _Factory):
            seen_default = True
            env[f"_f_{n}"] = d.make
            params.append(f"{n}=_M")
            body.append(f"{put}_f_{n}() if {n} is _M else {n})")
        else:
            seen_default = True
            env[f"_d_{n}"] = d
            params.append(f"{n}=_d_{n}")
            body.append(f"{put}{n})")
    src = f"def __init__(self, {', '.join(params)}):\n" + ("\n".join(body) or " pass") + "\n"
    return src, env


def _compile_init(cls: Any, names: tuple[str, ...], made_cls: Any) -> Callable[..., None]:
    src, env = _init_source(cls, names, made_cls)
    made: dict[str, Any] = {}
    exec(compile(src, f"<record {cls.__qualname__}>", "exec"), env, made)
    init = made["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def fields(obj: Any) -> tuple[str, ...]:
    """The field names of a record (instance or class), in order."""
    return obj.__record_fields__


_INDEX: dict[type, dict[str, int]] = {}     # record class -> field name -> position


def replace(obj: Any, **changes: Any) -> Any:
    """A copy of ``obj`` with ``changes``; an unknown name is a TypeError, as in dataclasses.
    (The values are read in one C call and passed by position: the simulator replaces job
    views hundreds of thousands of times a run.)"""
    cls = type(obj)
    index = _INDEX.get(cls)
    if index is None:
        index = _INDEX[cls] = {n: i for i, n in enumerate(cls.__record_fields__)}
    values = list(obj._values(obj))
    for name, value in changes.items():
        i = index.get(name)
        if i is None:
            raise TypeError(f"{cls.__name__} has no field {name!r}")
        values[i] = value
    return cls(*values)


def asdict(obj: Any) -> dict[str, Any]:
    """Field name -> value, recursing into records, lists and tuples (as dataclasses does)."""
    def conv(v: Any) -> Any:
        if hasattr(v, "__record_fields__") and not isinstance(v, type):
            return {n: conv(getattr(v, n)) for n in v.__record_fields__}
        if isinstance(v, (list, tuple)):
            return type(v)(conv(x) for x in v)
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        return v
    return conv(obj)
