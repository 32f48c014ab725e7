"""Bounding untrusted values (a model's output, a server's reply): valid Unicode, capped text, clamped counts, safe JSON."""

from __future__ import annotations

import json
import math
import re
from typing import Any, Optional

SURROGATE_RX = re.compile("[\ud800-\udfff]")
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


def valid_text(text: str) -> str:
    """Valid Unicode: every lone surrogate (half an emoji, an undecodable byte of a file name) becomes U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return SURROGATE_RX.sub("\ufffd", text)


def is_valid_text(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def capped(text: str, cap: int) -> str:
    """At most `cap` characters, with a note of how many were cut."""
    if len(text) <= cap:
        return text
    return text[:cap] + f"\n[truncated: {len(text)} characters in all]"


def count(value: Any) -> Optional[int]:
    """A finite non-negative integer (an integral float counts), else None: what a token count must be to be believed."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            return None
        value = int(value)
    if not isinstance(value, int) or value < 0:
        return None
    return value


def clamp(value: int, bounds: tuple[int, int]) -> int:
    return min(max(value, bounds[0]), bounds[1])


def loads(text: str | bytes) -> Any:
    """json.loads that reports nesting too deep for the parser as a ValueError (a RecursionError otherwise)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deep") from None


def depth(value: Any, limit: int) -> int:
    """Nesting depth of parsed JSON, counting no further than limit + 1 (so a deep value costs little)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            if deepest > limit:
                return deepest
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def json_safe(value: Any, text_cap: Optional[int] = None, _level: int = 0) -> Any:
    """A JSON-able copy a strict writer cannot choke on: valid text (capped if asked), int64 integers, finite floats or None."""
    if _level > 64:
        return "[nested too deep]"
    if isinstance(value, str):
        value = valid_text(value)
        return capped(value, text_cap) if text_cap else value
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return clamp(value, INT64)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {valid_text(str(k)): json_safe(v, text_cap, _level + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, text_cap, _level + 1) for v in value]
    return json_safe(str(value), text_cap, _level + 1)
