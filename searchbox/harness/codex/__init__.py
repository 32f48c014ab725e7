"""OpenAI's Codex CLI (@openai/codex) as the harness `codex`: its own loop, driven through `codex exec --json` inside
the run's box, its Responses API calls translated and accounted at a channel the harness owns, the run's tools over
MCP (see loop.py for the protocol, launch.py for what Codex is given, wire.py for the translation).
"""

from __future__ import annotations

from ...config import RunConfig
from ...errors import ConfigError
from ..base import CliHarness


class CodexHarness(CliHarness):
    """Codex under the reference protocol; `check` refuses before any run when Codex (or Node) is not installed."""

    kind = "codex"

    def refuse(self, cfg: RunConfig) -> None:
        if cfg.harness.sandbox == "none":
            raise ConfigError("harness=codex runs only in the box (its loopback forwarder needs the box's network namespace); "
                              "harness.sandbox=none is refused")

    def identity(self, cfg: RunConfig) -> dict:
        from .launch import identity

        return identity(cfg)

    def run_class(self):
        from .loop import CodexRun

        return CodexRun
