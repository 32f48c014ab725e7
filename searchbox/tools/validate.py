"""A call's arguments as the model sent them, checked before any tool runs: the catalog's schema and its global rules.

Everything refused here is the model's doing: the Toolset answers it as a tool error (InvalidCall) and counts it
as a malformed call. The bounds live in the catalog (catalog.py), the single source.
"""

from __future__ import annotations

import json
import math
from typing import Any

from jsonschema import Draft202012Validator, validators

from ..bounds import depth, is_valid_text
from .catalog import MAX_ARGUMENT_CHARS, MAX_DEPTH, ToolSpec
from .context import InvalidCall

ERROR_CHARS = 300  # of one schema error's message (it quotes the value, which may be huge)


def _is_integer(checker, instance) -> bool:
    """An integer is an int: 2.0 is not one (slicing and ranges refuse floats)."""
    return isinstance(instance, int) and not isinstance(instance, bool)


StrictValidator = validators.extend(Draft202012Validator,
                                    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer))


def validator(spec: ToolSpec) -> Any:
    return StrictValidator(spec.schema(limits=True)["parameters"])


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def parse(text: Any) -> dict:
    """The arguments object from the text the model sent; InvalidCall when it is not one within the bounds."""
    if text is None:
        return {}
    if not isinstance(text, str):
        raise InvalidCall("arguments must be a JSON object")
    if len(text) > MAX_ARGUMENT_CHARS:
        raise InvalidCall(f"arguments are {len(text)} characters; at most {MAX_ARGUMENT_CHARS} are accepted")
    if not text.strip():
        return {}
    try:
        args = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise InvalidCall(f"arguments are nested too deep (at most {MAX_DEPTH} levels)") from None
    except ValueError as exc:
        raise InvalidCall(f"arguments are not valid JSON ({str(exc)[:ERROR_CHARS]})") from None
    if not isinstance(args, dict):
        raise InvalidCall("arguments must be a JSON object")
    if depth(args, MAX_DEPTH) > MAX_DEPTH:
        raise InvalidCall(f"arguments are nested too deep (at most {MAX_DEPTH} levels)")
    return args


def _where(path: list) -> str:
    return ".".join(map(str, path)) or "arguments"


def check_values(value: Any, path: list | None = None) -> None:
    """The rules every value follows whatever the tool: finite numbers, valid Unicode, no NUL (keys included)."""
    path = path or []
    if isinstance(value, str):
        if not is_valid_text(value):
            raise InvalidCall(f"{_where(path)}: not valid Unicode (a lone surrogate, such as half of an emoji)")
        if "\x00" in value:
            raise InvalidCall(f"{_where(path)}: contains a NUL character")
    elif isinstance(value, float) and not math.isfinite(value):
        raise InvalidCall(f"{_where(path)}: {value} is not a finite number")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_values(key, path)
            check_values(item, path + [key])
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_values(item, path + [i])


def _describe(err) -> str:
    where = _where(list(err.absolute_path))
    if err.validator == "maxLength":
        return f"{where}: {len(err.instance)} characters, more than the {err.validator_value} allowed"
    if err.validator == "maxItems":
        return f"{where}: {len(err.instance)} items, more than the {err.validator_value} allowed"
    message = err.message if len(err.message) <= ERROR_CHARS else err.message[:ERROR_CHARS] + "..."
    return f"{where}: {message}" if err.absolute_path else message


def arguments(spec: ToolSpec, text: Any, checker: Any = None) -> dict:
    """Parsed, checked arguments for `spec`, or InvalidCall saying what is wrong (at most three problems)."""
    args = parse(text)
    check_values(args)
    errors = sorted((checker or validator(spec)).iter_errors(args), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        raise InvalidCall("invalid arguments: " + "; ".join(_describe(e) for e in errors[:3]))
    return args
