"""What a mini-swe-agent run checkpoints: the agent's own message history and searchbox's accounting, whole."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ...errors import SearchboxError
from ...tools import ToolsetState
from ..accounting import Ledger

STATE_VERSION = 1
ROLES = ("system", "user", "assistant", "exit")  # what DefaultAgent keeps in its history


@dataclass
class MiniState:
    """Everything a mini-swe-agent run changes: its DefaultAgent's history (with mini-swe-agent's own `extra` fields)
    and counters, and the harness's ledger, answer bookkeeping and toolset counters."""

    ledger: Ledger = field(default_factory=Ledger)
    messages: list = field(default_factory=list)  # DefaultAgent.messages as of the checkpoint
    turn: int = 0
    step: int = 0  # model calls in the turn in progress (DefaultAgent.n_calls)
    format_errors: int = 0  # DefaultAgent.n_consecutive_format_errors
    continues: int = 0
    compactions: int = 0  # mini-swe-agent does not compact: always 0 (the record's field)
    submissions: int = 0  # turns the agent ended with its submit sentinel
    submission: str = ""  # what the last one submitted (the lines after the sentinel)
    last_text: str = ""  # the model's last own words outside its action block (what the backstop writes)
    backstop_text: Optional[str] = None
    last_snapshot: Optional[str] = None
    answer_source: str = "none"
    first_prompt_tokens: int = 0
    tools: ToolsetState = field(default_factory=ToolsetState)


def check_messages(messages: list) -> None:
    """DefaultAgent's history as a resume will send it: objects with a known role and text content, the system message
    first (ValueError naming the first that is not)."""
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise ValueError(f"message {i} is not a mini-swe-agent message (role in {ROLES}, text content)")
        if not isinstance(m.get("extra", {}), dict):
            raise ValueError(f"message {i}: its extra is not an object")
    if messages and messages[0]["role"] != "system":
        raise ValueError("the history does not start with the system message")


def restore(checkpoint: dict) -> MiniState:
    """The state a checkpoint holds, checked whole before a resume writes anything (one line on damage)."""
    from ..state import load

    if not isinstance(checkpoint, dict) or checkpoint.get("version") != STATE_VERSION:
        version = checkpoint.get("version") if isinstance(checkpoint, dict) else None
        raise SearchboxError(f"cannot resume: mini-swe-agent checkpoint version {version!r} (expected {STATE_VERSION})")
    try:
        state = load(MiniState, checkpoint["state"])
        check_messages(state.messages)
        if state.turn < 0 or state.step < 0 or (state.turn > 0 and not state.messages):
            raise ValueError("its turn and step counters do not fit its history")
    except (KeyError, ValueError, TypeError) as exc:
        raise SearchboxError(f"cannot resume: the checkpoint does not hold a mini-swe-agent state ({exc})") from None
    return state
