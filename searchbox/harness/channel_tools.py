"""One dataroom tool call that came over the channel (an agent's MCP bridge or Pi's extension), run and accounted.

The agent harnesses (pi/, claudecode/, codex/) each decide which model call a channel call answers (Pi sends the
model's call id; the MCP bridges send none, so Claude Code's and Codex's harnesses match by name and arguments). From
there on every harness does the same, and does it here: the call runs through the run's Toolset under the run's tool
lock (one tool at a time, as the native loop runs them), its time and counters go to the turn in progress, its
outcome is kept for the turn's reply, and the harness writes the ToolRow from what ran, never from what the agent
reports. A backend failure (the index gone, the embedder dead) is a row and the run's stop.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

from ..errors import BackendError
from ..record.record import ToolRow
from .base import Stop
from .channel import Reply


def run_channel_call(run: Any, name: str, args: Any, call_id: str, arguments: Optional[str], turn: int, step: int,
                     settled: Callable[[], None] = lambda: None) -> Reply:
    """Run one matched call for `run` (a harness's run object: ctx, lock, tool_lock, stats, s.ledger, outcomes,
    answered, rowed, rec and _refuse) and answer the channel. `arguments`: the model's own argument text, when the
    harness has it; `settled` runs once the call is over, whichever way (a harness's own in-flight bookkeeping)."""
    with run.tool_lock:
        try:
            out = run.ctx.toolset.call(name, args)
        except BackendError as exc:
            settled()
            with run.lock:
                run.rec.tool_call(ToolRow(turn, step, call_id, str(name), arguments or json.dumps(args, default=str),
                                          [], [], 0.0, 0.0, False, str(exc), 0, "", False))
                return run._refuse(Stop("tool_error", str(exc)), "the tool's backend failed; the run stops", 500)
    with run.lock:
        counters = run.stats if run.stats is not None else run.s.ledger.cum
        counters.tool_calls += 1
        counters.tool_s += out.duration_ms / 1000
        counters.setup_s += out.setup_ms / 1000
        counters.malformed_calls += int(out.malformed)
        run.outcomes[call_id] = out
        run.answered[call_id] = (out.tool, out.output)
        run.rowed.add(call_id)
        settled()
        run.rec.tool_call(ToolRow(turn, step, call_id, out.tool, arguments or out.arguments, list(out.programs), list(out.paths),
                                  out.duration_ms, out.setup_ms, out.ok, out.error, out.output_chars, out.delivered, out.malformed,
                                  out.opened))
    return Reply(200, {"ok": out.ok, "text": out.output})
