"""Pi (@mariozechner/pi-coding-agent), the reference design's agent, as the harness `pi`: its own loop and compaction,
driven over its RPC mode inside the run's box, its model calls and the run's dataroom tools through a channel the
harness owns (see loop.py for the protocol, launch.py for what Pi is given, channel.py for the way out).
"""

from __future__ import annotations

from ...config import RunConfig
from ..base import CliHarness


class PiHarness(CliHarness):
    """Pi under the reference protocol; `check` refuses before any run when Pi (or Node) is not installed."""

    kind = "pi"

    def identity(self, cfg: RunConfig) -> dict:
        from .launch import identity

        return identity(cfg)

    def run_class(self):
        from .loop import PiRun

        return PiRun
