"""Claude Code (@anthropic-ai/claude-code) as the harness `claude-code`: its own loop and system prompt, driven through
its print mode over JSON lines inside the run's box; its model calls (Anthropic's Messages API) and the run's tools
(over MCP) through the channel the harness owns (see loop.py for the protocol, launch.py for what Claude Code is
given, wire.py for the translation to the run's OpenAI endpoint).
"""

from __future__ import annotations

from ...config import RunConfig
from ..base import CliHarness


class ClaudeCodeHarness(CliHarness):
    """Claude Code under the reference protocol; `check` refuses before any run when it cannot run."""

    kind = "claude-code"

    def identity(self, cfg: RunConfig) -> dict:
        from .launch import identity

        return identity(cfg)

    def run_class(self):
        from .loop import ClaudeCodeRun

        return ClaudeCodeRun
