"""Checkpoints of typed state: a dataclass tree to JSON-able data and back, whole, every field by its declaration.

Nothing is copied by hand: a field added to a state class is checkpointed and restored with no other change.
Fields marked transient (metadata {"transient": True}) are left out and take their default on restore; fields marked
added (metadata {"added": "why"}) came after checkpoints were written, and one that lacks them takes the default; a
dataclass with a `frozen()` method is checkpointed as what that returns (a clock's reading so far).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, TypeVar

T = TypeVar("T")


def _kept(cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if not f.metadata.get("transient")]


def dump(value: Any) -> Any:
    """JSON-able data for a value holding dataclasses, lists, dicts and plain values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if hasattr(value, "frozen"):
            value = value.frozen()
        return {f.name: dump(getattr(value, f.name)) for f in _kept(type(value))}
    if isinstance(value, (list, tuple)):
        return [dump(v) for v in value]
    if isinstance(value, dict):
        return {k: dump(v) for k, v in value.items()}
    return value


def load(cls: type[T], data: Any) -> T:
    """The dataclass `cls` from dump()'s output; a field missing or unknown is an error (the checkpoint is another shape)."""
    if not isinstance(data, dict):
        raise ValueError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
    kept = _kept(cls)
    names = {f.name for f in kept}
    later = {f.name for f in kept if f.metadata.get("added")}  # may be missing: the checkpoint predates them
    unknown, missing = sorted(set(data) - names), sorted(names - set(data) - later)
    if unknown or missing:
        raise ValueError(f"{cls.__name__}: checkpoint has unknown fields {unknown} and lacks {missing}")
    hints = typing.get_type_hints(cls)
    values = {}
    for f in kept:
        if f.name not in data:  # an `added` field an older checkpoint lacks: its default
            continue
        try:
            values[f.name] = _load(hints[f.name], data[f.name])
        except ValueError as exc:
            raise ValueError(f"{cls.__name__}.{f.name}: {exc}") from None
    return cls(**values)


_PLAIN = {int: (int,), float: (int, float), str: (str,), bool: (bool,), list: (list,), dict: (dict,)}


def _load(tp: Any, value: Any) -> Any:
    """value as the field type tp: a checkpoint of another shape (a count given as text, a list for an object) is a
    ValueError here, not a TypeError deep in a resumed loop after it wrote."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _load(options[0], value) if len(options) == 1 else value
    if dataclasses.is_dataclass(tp):
        return load(tp, value)
    allowed = _PLAIN.get(origin or tp)
    if allowed is not None and (not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed)):
        raise ValueError(f"expected {getattr(origin or tp, '__name__', tp)}, got {type(value).__name__}")
    return float(value) if tp is float else value
