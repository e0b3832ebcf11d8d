"""Dataclasses to plain JSON data and back, driven by type hints.

Every probe returns plain dataclasses; reports are saved as JSON and read back
on another machine, so the round trip must be exact and must not depend on
pickling or on the classes' module paths.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import types
import typing
from typing import Any, TypeVar, get_args, get_origin, get_type_hints

T = TypeVar("T")


def to_data(obj: Any) -> Any:
    """Convert dataclasses (recursively), enums, tuples and sets to JSON-ready data."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_data(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): to_data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_data(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return [to_data(v) for v in sorted(obj)]
    return obj


class SchemaError(ValueError):
    """The data does not fit the dataclass it is read into."""


def from_data(cls: type[T], data: Any, path: str = "$") -> T:
    """Build ``cls`` from data made by :func:`to_data`.

    Unknown keys are ignored (a newer minor version may add fields); missing
    keys take the field's default, so older reports still load.
    """
    return _convert(cls, data, path)


def _hints(cls: type) -> dict[str, Any]:
    module = sys.modules.get(cls.__module__)
    return get_type_hints(cls, globalns=vars(module) if module else None)


def _convert(tp: Any, data: Any, path: str) -> Any:
    if tp is Any or tp is object:
        return data
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = get_args(tp)
        if data is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, data, path)
            except (SchemaError, TypeError, ValueError) as exc:
                errors.append(str(exc))
        raise SchemaError(f"{path}: {_short(data)} fits none of {tp}: {'; '.join(errors)}"[:400])
    if origin is typing.Literal:
        if data not in get_args(tp):
            raise SchemaError(f"{path}: {_short(data)} is not one of {get_args(tp)}")
        return data
    if origin in (list, typing.List, tuple, set, frozenset):
        if not isinstance(data, list):
            raise SchemaError(f"{path}: expected a list, got {type(data).__name__}")
        args = get_args(tp)
        item = args[0] if args else Any
        items = [_convert(item, v, f"{path}[{i}]") for i, v in enumerate(data)]
        if origin is tuple:
            return tuple(items)
        return items if origin in (list, typing.List) else origin(items)
    if origin is dict:
        if not isinstance(data, dict):
            raise SchemaError(f"{path}: expected an object, got {type(data).__name__}")
        args = get_args(tp)
        val = args[1] if len(args) == 2 else Any
        return {k: _convert(val, v, f"{path}.{k}") for k, v in data.items()}
    if dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise SchemaError(f"{path}: expected an object for {tp.__name__}, got {type(data).__name__}")
        hints = _hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if not f.init:
                continue
            if f.name in data:
                kwargs[f.name] = _convert(hints[f.name], data[f.name], f"{path}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise SchemaError(f"{path}: missing required field {f.name!r} of {tp.__name__}")
        return tp(**kwargs)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(data)
        except ValueError as exc:
            raise SchemaError(f"{path}: {exc}") from None
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise SchemaError(f"{path}: expected a number, got {_short(data)}")
        return float(data)
    if tp is int:
        # JSON has one number type: 4.0 is the integer 4 (JSON Schema agrees), as other writers print it.
        if isinstance(data, float) and data.is_integer():
            return int(data)
        if isinstance(data, bool) or not isinstance(data, int):
            raise SchemaError(f"{path}: expected an integer, got {_short(data)}")
        return data
    if tp in (str, bool):
        if not isinstance(data, tp):
            raise SchemaError(f"{path}: expected {tp.__name__}, got {_short(data)}")
        return data
    if tp is type(None):
        if data is not None:
            raise SchemaError(f"{path}: expected null, got {_short(data)}")
        return None
    return data


def _short(data: Any, limit: int = 60) -> str:
    """A value as an error message shows it: never the whole (possibly huge) object."""
    if isinstance(data, dict):
        return "an object"
    if isinstance(data, list):
        return "a list"
    text = repr(data)
    return text if len(text) <= limit else text[: limit - 1] + "…"
