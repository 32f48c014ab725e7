"""OpenAI's Codex CLI (@openai/codex) as the harness `codex`: its own loop, driven through `codex exec --json` inside
the run's box, its Responses API calls translated and accounted at a channel the harness owns, the run's tools over
MCP (see loop.py for the protocol, launch.py for what Codex is given, wire.py for the translation).
"""

from __future__ import annotations

from ...config import RunConfig
from ...errors import ConfigError
from ..base import Harness, RunContext


class CodexHarness(Harness):
    """Codex under the reference protocol; `check` refuses before any run when Codex (or Node) is not installed."""

    kind = "codex"

    def check(self, cfg: RunConfig) -> None:
        from .install import require_codex

        self.refuse_control(cfg)
        if cfg.model.protocol not in ("native", "auto"):
            raise ConfigError(f"harness=codex calls tools the OpenAI way only; model.protocol={cfg.model.protocol!r} runs under harness=native")
        if cfg.harness.sandbox == "none":
            raise ConfigError("harness=codex runs only in the box (its loopback forwarder needs the box's network namespace); "
                              "harness.sandbox=none is refused")
        require_codex()

    def identity(self, cfg: RunConfig) -> dict:
        from .launch import identity

        return identity(cfg)

    def protocol(self, spec) -> str:
        return "native"  # Codex calls tools the OpenAI way, whatever the config's protocol

    def run(self, ctx: RunContext) -> None:
        from .install import require_codex
        from .loop import CodexRun

        CodexRun(ctx, require_codex()).run()

    def restore(self, checkpoint: dict):
        from .loop import restore

        return restore(checkpoint)

    def resume(self, ctx: RunContext, checkpoint: dict) -> None:
        from .install import require_codex
        from .loop import CodexRun, restore, restore_home

        state = restore(checkpoint)
        restore_home(ctx.workspace.run_dir, state)
        CodexRun(ctx, require_codex(), state).run(resumed=True)
