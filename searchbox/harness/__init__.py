"""Harnesses: what drives the model over a run's tools. `native` is searchbox's own loop; another (Pi) registers here.

The table maps a `harness.kind` to its class ("module:Class", imported on first use), so config validation can
list the kinds without importing any harness.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..errors import ConfigError

if TYPE_CHECKING:
    from .base import Harness

KINDS: dict[str, str] = {
    "native": "searchbox.harness.native:NativeHarness",
}


def kinds() -> tuple[str, ...]:
    """The harness kinds `harness.kind` (and `harness=`, `--harness`) accepts."""
    return tuple(KINDS)


def load(kind: str) -> "Harness":
    """A new harness of this kind."""
    if kind not in KINDS:
        raise ConfigError(f"harness.kind={kind!r}: expected one of {', '.join(KINDS)}")
    module, name = KINDS[kind].split(":")
    return getattr(importlib.import_module(module), name)()
