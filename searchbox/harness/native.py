"""The native harness: searchbox's own loop (agent.py) behind the harness interface."""

from __future__ import annotations

from .agent import Agent, LoopState, restore
from ..model.protocol import JsonProtocol, NativeProtocol, choose
from .base import Harness, RunContext


class NativeHarness(Harness):
    """Ask the model, run its tool calls through the run's Toolset, until a stop; one of two tool protocols on the wire."""

    kind = "native"

    def run(self, ctx: RunContext) -> None:
        protocol = choose(ctx.spec.protocol, ctx.client)  # resolved once, with the key: no second probe of the server
        Agent(ctx, protocol).run()

    def restore(self, checkpoint: dict) -> LoopState:
        return restore(checkpoint)

    def resume(self, ctx: RunContext, checkpoint: dict) -> None:
        state = restore(checkpoint)
        protocol = JsonProtocol() if state.protocol == "json" else NativeProtocol()
        ctx.record.protocol = protocol.name
        Agent(ctx, protocol, state).run(resumed=True)
