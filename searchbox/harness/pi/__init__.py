"""Pi (@mariozechner/pi-coding-agent), the reference design's agent, as the harness `pi`: its own loop and compaction,
driven over its RPC mode inside the run's box, its model calls and the run's dataroom tools through a channel the
harness owns (see loop.py for the protocol, launch.py for what Pi is given, channel.py for the way out).
"""

from __future__ import annotations

from pathlib import Path

from ...config import RunConfig
from ...errors import SearchboxError
from ..base import Harness, RunContext


class PiHarness(Harness):
    """Pi under the reference protocol; `check` refuses before any run when Pi (or Node) is not installed."""

    kind = "pi"

    def check(self, cfg: RunConfig) -> None:
        from .install import require_pi

        self.refuse_control(cfg)
        require_pi()

    def identity(self, cfg: RunConfig) -> dict:
        from .launch import identity

        return identity(cfg)

    def protocol(self, spec) -> str:
        return "native"  # Pi calls tools the OpenAI way, whatever the config's protocol

    def run(self, ctx: RunContext) -> None:
        from .install import require_pi
        from .loop import PiRun

        PiRun(ctx, require_pi()).run()

    def restore(self, checkpoint: dict):
        from .loop import restore

        return restore(checkpoint)

    def resume(self, ctx: RunContext, checkpoint: dict) -> None:
        from .install import require_pi
        from .loop import PiRun, restore

        state = restore(checkpoint)
        session = None
        if state.turn > 0:
            path = Path(ctx.workspace.run_dir) / "pi" / "checkpoint-session.jsonl"
            if not path.is_file() or path.is_symlink():
                raise SearchboxError(f"{ctx.workspace.run_dir}: cannot resume: Pi's session as of turn {state.turn} ({path.name}) is missing")
            session = path.read_bytes()
        PiRun(ctx, require_pi(), state).run(resumed=True, session=session)
