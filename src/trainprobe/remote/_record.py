"""``@record``: what ``@dataclass`` gives the engine's value types, without importing :mod:`dataclasses`.

``import dataclasses`` imports :mod:`inspect` (with ast, dis, tokenize...): about 10 ms, and creating each
dataclass compiles its methods: together more than the rest of a ``trainprobe run`` process imports, on every
run (measured with ``benchmarks/remote.py``). The types a single run builds (:class:`~.target.Target`, the
ssh, local, sudo and setting hops, :class:`~.hops.base.FarSettings`, :class:`~.session.Module`,
:class:`~.session.RunResult`, and :class:`~.fleet.FleetConfig`, which the CLI reads first) use this instead;
it reads the same and type-checks the same (PEP 681).

Supported, as in dataclasses: fields from class annotations in order (``ClassVar`` excluded), defaults,
``field(default=..., default_factory=..., compare=...)``, ``frozen=True``; generated ``__init__``,
``__repr__``, ``__eq__``, ``__hash__`` (frozen only, as dataclasses does), ``__match_args__``; and
:func:`replace`. Not supported: inheritance between records, ``InitVar``, ``__post_init__``, ordering.
"""

from __future__ import annotations

from collections.abc import Callable

TYPE_CHECKING = False  # not typing's: importing typing costs every run milliseconds
if TYPE_CHECKING:
    from typing import Any, TypeVar

    from typing_extensions import dataclass_transform

    T = TypeVar("T")
else:

    def dataclass_transform(**_: object) -> Callable[[object], object]:
        return lambda decorator: decorator


_MISSING: Any = object()


class FrozenInstanceError(AttributeError):
    """Assigning to a field of a frozen record."""


class _Field:
    __slots__ = ("compare", "default", "default_factory")

    def __init__(self, default: Any, default_factory: Callable[[], Any] | None, compare: bool) -> None:
        self.default = default
        self.default_factory = default_factory
        self.compare = compare


def field(
    *, default: Any = _MISSING, default_factory: Callable[[], Any] | None = None, compare: bool = True
) -> Any:
    """A field with options, as ``dataclasses.field``: a default or a factory, and whether ``==`` and
    ``hash()`` look at it."""
    return _Field(default, default_factory, compare)


@dataclass_transform(field_specifiers=(field,))
def record(*, frozen: bool = False) -> Callable[[type[T]], type[T]]:
    """Give the class an ``__init__``, ``__repr__`` and ``__eq__`` (and with ``frozen``, ``__hash__`` and
    no assignment) built from its annotated fields."""

    def build(cls: type[T]) -> type[T]:
        annotations = vars(cls).get("__annotations__", {})  # not inspect.get_annotations: no inspect
        names = tuple(
            n for n, kind in annotations.items() if not str(kind).startswith(("ClassVar", "typing.ClassVar"))
        )
        defaults: dict[str, Any] = {}
        factories: dict[str, Callable[[], Any]] = {}
        compared = []
        for name in names:
            value = cls.__dict__.get(name, _MISSING)
            spec = value if isinstance(value, _Field) else _Field(value, None, True)
            if spec.default is not _MISSING:
                defaults[name] = spec.default
                setattr(cls, name, spec.default)
            elif name in cls.__dict__:
                delattr(cls, name)
            if spec.default_factory is not None:
                factories[name] = spec.default_factory
            if spec.compare:
                compared.append(name)
        _install(cls, names, defaults, factories, tuple(compared), frozen)
        return cls

    return build


def _install(
    cls: type[Any],
    names: tuple[str, ...],
    defaults: dict[str, Any],
    factories: dict[str, Callable[[], Any]],
    compared: tuple[str, ...],
    frozen: bool,
) -> None:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(names):
            raise TypeError(f"{cls.__name__}() takes {len(names)} arguments but {len(args)} were given")
        values = dict(zip(names, args, strict=False))
        for name, value in kwargs.items():
            if name not in names:
                raise TypeError(f"{cls.__name__}() got an unexpected keyword argument {name!r}")
            if name in values:
                raise TypeError(f"{cls.__name__}() got multiple values for argument {name!r}")
            values[name] = value
        for name in names:
            if name not in values:
                if name in defaults:
                    values[name] = defaults[name]
                elif name in factories:
                    values[name] = factories[name]()
                else:
                    raise TypeError(f"{cls.__name__}() missing required argument: {name!r}")
            object.__setattr__(self, name, values[name])

    def __repr__(self: Any) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{type(self).__qualname__}({shown})"

    def key(self: Any) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in compared)

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return bool(key(self) == key(other))

    def __hash__(self: Any) -> int:
        return hash(key(self))

    def __setattr__(self: Any, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self: Any, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    methods: dict[str, Any] = {"__init__": __init__, "__repr__": __repr__, "__eq__": __eq__}
    methods["__match_args__"] = names
    methods["__hash__"] = None  # mutable and compared by value: unhashable, as dataclasses does
    if frozen:
        methods.update(__hash__=__hash__, __setattr__=__setattr__, __delattr__=__delattr__)
    for name, value in methods.items():
        setattr(cls, name, value)


def replace(obj: T, /, **changes: Any) -> T:
    """A copy of the record ``obj`` with ``changes`` applied, as ``dataclasses.replace``."""
    values = {name: getattr(obj, name) for name in type(obj).__match_args__}  # type: ignore[attr-defined]
    values.update(changes)
    return type(obj)(**values)
