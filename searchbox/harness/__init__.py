"""Harnesses: what drives the model over a run's tools. `native` is searchbox's own loop; another (Pi) registers here.

The table maps a `harness.kind` to its class ("module:Class", imported on first use), so config validation can
list the kinds without importing any harness.

A harness that runs its own loop (Pi over JSON-lines RPC in the box) plugs in as a Harness subclass:
`check` refuses before any run when it is not installed, `identity` returns what the run key needs beyond the
config (its version, the extension and prompts searchbox adds), `run`/`resume` get the same RunContext as the
native loop. Its channel forwards each chat request through `accounting.Accountant` over the run's Ledger
(`begin_turn`/`end_turn` per prompt-to-idle, `check_deadlines`, `chat`, `account`, `check_token_budget`,
`check_budget_after_turn`, `stop_of`, `fill`), and its tool calls through `ctx.toolset.call`, so tokens, time,
stops, tool rows (`record.ToolRow`) and turn rows (`record.TurnRow`) mean what they mean for the native loop.
Its checkpoint is `ctx.recorder.checkpoint({"harness": kind, ...})` with its own state dumped by `state.dump`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..config import HARNESS_KINDS as KINDS
from ..errors import ConfigError

if TYPE_CHECKING:
    from .base import Harness



def kinds() -> tuple[str, ...]:
    """The harness kinds `harness.kind` (and `harness=`, `--harness`) accepts."""
    return tuple(KINDS)


def load(kind: str) -> "Harness":
    """A new harness of this kind."""
    if kind not in KINDS:
        raise ConfigError(f"harness.kind={kind!r}: expected one of {', '.join(KINDS)}")
    module, name = KINDS[kind].split(":")
    return getattr(importlib.import_module(module), name)()
