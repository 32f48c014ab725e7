"""Claude Code (@anthropic-ai/claude-code) as the harness `claude-code`: its own loop and system prompt, driven through
its print mode over JSON lines inside the run's box; its model calls (Anthropic's Messages API) and the run's tools
(over MCP) through the channel the harness owns (see loop.py for the protocol, launch.py for what Claude Code is
given, wire.py for the translation to the run's OpenAI endpoint).
"""

from __future__ import annotations

from pathlib import Path

from ...config import RunConfig
from ...errors import ConfigError, SearchboxError
from ..base import Harness, RunContext


class ClaudeCodeHarness(Harness):
    """Claude Code under the reference protocol; `check` refuses before any run when it cannot run."""

    kind = "claude-code"

    def check(self, cfg: RunConfig) -> None:
        from .install import require

        self.refuse_control(cfg)
        if cfg.model.protocol not in ("native", "auto"):
            raise ConfigError(f"harness=claude-code needs the server's own tool calls (model.protocol=native); "
                              f"model.protocol={cfg.model.protocol!r} is the native loop's")
        require()

    def identity(self, cfg: RunConfig) -> dict:
        from .launch import identity

        return identity(cfg)

    def protocol(self, spec) -> str:
        return "native"  # Claude Code calls tools as the API's tool_use blocks: the server's own tool calls

    def run(self, ctx: RunContext) -> None:
        from .install import require
        from .loop import ClaudeCodeRun

        ClaudeCodeRun(ctx, require()).run()

    def restore(self, checkpoint: dict):
        from .loop import restore

        return restore(checkpoint)

    def resume(self, ctx: RunContext, checkpoint: dict) -> None:
        from .install import require
        from ..cli_run import CHECKPOINT_SESSION
        from .loop import ClaudeCodeRun, restore

        state = restore(checkpoint)
        session = None
        if state.turn > 0:
            path = Path(ctx.workspace.run_dir) / "claude-code" / CHECKPOINT_SESSION
            if not path.is_file() or path.is_symlink():
                raise SearchboxError(f"{ctx.workspace.run_dir}: cannot resume: Claude Code's session as of turn {state.turn} ({path.name}) is missing")
            session = path.read_bytes()
        ClaudeCodeRun(ctx, require(), state).run(resumed=True, session=session)
