"""Checking a message against its declaration: :func:`check` and :func:`decode`,
and :class:`ProtocolMismatch`, which names where a message differs."""

from __future__ import annotations

import functools
import re
import types
import typing
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

__all__ = [
    "ProtocolMismatch", "decode", "is_typeddict", "fields", "check",
]  # fmt: skip


R = TypeVar("R")
_NONE = type(None)
_PACKAGE = __name__.rpartition(".")[0]  # its modules' names are cut from types shown


class ProtocolMismatch(ValueError):
    """A message that does not have its declared shape; the message names where."""


def decode(tp: type[R], value: object, what: str = "message", strict: bool = False) -> R:
    """``value`` as a ``tp`` (a TypedDict, ``list[...]``...), once checked."""
    check(tp, value, what, strict)
    return typing.cast(R, value)


def is_typeddict(tp: object) -> bool:
    """True for a TypedDict class (``typing.is_typeddict`` is python >= 3.10)."""
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


@functools.cache
def fields(td: type) -> dict[str, Any]:
    """A TypedDict's keys and their types, evaluated (inherited keys too)."""
    return typing.get_type_hints(td)


def _name(tp: object) -> str:
    if tp is _NONE or tp is None:
        return "null"
    if isinstance(tp, type) and not get_args(tp):
        return tp.__name__
    return re.sub(rf"{re.escape(_PACKAGE)}\.\w+\.", "", repr(tp).replace("typing.", ""))


def _mismatch(tp: object, value: object, path: str) -> ProtocolMismatch:
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return ProtocolMismatch(f"{path}: expected {_name(tp)}, got {shown}")


def check(tp: object, value: object, path: str = "message", strict: bool = False) -> None:
    """Raise :class:`ProtocolMismatch` unless ``value`` is a ``tp``.

    ``tp`` is any type these declarations use: a TypedDict, ``list[X]``,
    ``dict[str, X]``, a ``Literal``, a union, ``int``/``float``/``str``/
    ``bool``, None, ``Any``.  Undeclared keys of a TypedDict value are
    ignored unless ``strict``.
    """
    origin = get_origin(tp)
    if tp is Any or tp is object:
        return
    if tp is None or tp is _NONE:
        if value is not None:
            raise _mismatch(tp, value, path)
    elif tp is bool or tp is str:
        if not isinstance(value, tp):
            raise _mismatch(tp, value, path)
    elif tp is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise _mismatch(tp, value, path)
    elif tp is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise _mismatch(tp, value, path)
    elif origin is Literal:
        if not any(value == v and type(value) is type(v) for v in get_args(tp)):
            raise _mismatch(tp, value, path)
    elif origin is Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        for arm in get_args(tp):
            try:
                check(arm, value, path, strict)
                return
            except ProtocolMismatch:
                continue
        raise _mismatch(tp, value, path)
    elif origin is list:
        if not isinstance(value, list):
            raise _mismatch(tp, value, path)
        (item,) = get_args(tp)
        for i, v in enumerate(value):
            check(item, v, f"{path}[{i}]", strict)
    elif origin is dict:
        if not isinstance(value, dict):
            raise _mismatch(tp, value, path)
        _, item = get_args(tp)
        for k, v in value.items():
            if not isinstance(k, str):
                raise ProtocolMismatch(f"{path}: key {k!r} is not a string")
            check(item, v, f"{path}.{k}", strict)
    elif is_typeddict(tp):
        _check_typeddict(typing.cast(type, tp), value, path, strict)
    else:
        raise TypeError(f"the protocol cannot check values of type {tp!r}")


def _check_typeddict(td: type, value: object, path: str, strict: bool) -> None:
    if not isinstance(value, dict):
        raise _mismatch(td, value, path)
    declared = fields(td)
    missing = [k for k in sorted(vars(td)["__required_keys__"]) if k not in value]
    if missing:
        raise ProtocolMismatch(f"{path}: {td.__name__} lacks {', '.join(missing)}")
    if strict:
        extra = sorted(k for k in value if k not in declared)
        if extra:
            raise ProtocolMismatch(f"{path}: {td.__name__} has no {', '.join(map(str, extra))}")
    for key, tp in declared.items():
        if key in value:
            check(tp, value[key], f"{path}.{key}", strict)
