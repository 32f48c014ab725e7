"""The channel's side of an agent CLI's run (cli_run.CliRun): the agent's model calls and tool calls, on the channel's threads.

A model call goes to the run's endpoint only, through the run's Accountant, as the native loop's: deadlines, usage
(estimated and marked when missing), timings, the token budget, the stops. A stop decided here refuses the agent's
call (it retries nothing) and leaves the stop in `pending` for the main thread, which ends the turn or the run. A tool
call runs through the run's Toolset (channel_tools.run_channel_call), and its row is made from what ran. The trace
gets every message in the canonical OpenAI shape: the system prompt and the tool results as the agent sent them to
the model (`_log_seen`), the model's answers as the server gave them.
"""

from __future__ import annotations

from typing import Any, Optional

from ..errors import ModelError
from ..model.llm import Usage
from ..record.record import ToolRow
from .agent import OVERFLOW_RX, visible_text
from .base import EndTurn, Stop
from .channel import Reply, error
from .channel_tools import run_channel_call
from .pi.wire import assistant

RESULT_CAP = 2000  # characters of a refused call's text kept in its row


def add_usage(into: Usage, usage: Usage) -> None:
    """`usage` added to the running sum `into`."""
    for part in ("prompt", "completion", "cached"):
        setattr(into, part, getattr(into, part) + getattr(usage, part))


class ChannelSide:
    """The agent's calls at the channel; it shares the run's state, ledger, recorder and locks (CliRun.__init__). The
    hooks are the agent's API: `_upstream` (its request as the endpoint's, what it shows the model logged), `_message`,
    `_reply` and `_error` (its shapes), `_overflow`, `_side_call`, `_billed`, `_claim` (which model call a tool call is)."""

    TOOLS: str = "the run's dataroom tools"  # the tools the agent may call, as a refusal names them
    SIDE_CALLS: str = "compaction"  # what its model calls without tools are

    # ---- model calls -------------------------------------------------------------------------------------
    def _model_call(self, body: dict, agent: bool) -> Reply:
        """One model call of the agent's (`agent`: one with tools, a step of the turn), accounted as the native loop's."""
        with self.chat_lock:
            with self.lock:
                if not self.open:
                    return self._error(409, "searchbox: no turn is in progress; the model cannot be called now")
                if agent and self.s.step >= self.h.max_steps_per_turn:
                    return self._refuse(EndTurn("max_steps"), f"this turn reached its limit of {self.h.max_steps_per_turn} model calls")
                try:
                    self.acct.check_deadlines()
                except (EndTurn, Stop) as cut:
                    return self._refuse(cut, "the turn or the run is past its deadline")
                payload = self._upstream(body, agent)
                if isinstance(payload, Reply):
                    return payload
                before = self.stats.context_tokens if self.stats is not None else 0
            try:
                resp = self.acct.chat(self.ctx.client, payload)
            except (EndTurn, Stop) as cut:
                with self.lock:
                    return self._refuse(cut, "the turn or the run passed its deadline during the call")
            except ModelError as exc:
                with self.lock:
                    if OVERFLOW_RX.search(str(exc)):
                        return self._overflow(exc)
                    return self._refuse(Stop(*self.acct.stop_of(exc)), "the model endpoint failed", 502)
            with self.lock:
                return self._answer(body, payload, resp, agent, before)

    def _answer(self, body: dict, payload: dict, resp, agent: bool, before: int) -> Reply:
        s = self.s
        usage = self.acct.account(resp, payload)
        message = self._message(resp) if not resp.malformed else {"role": "assistant", "content": None}
        if agent:
            s.step += 1
            s.first_prompt_tokens = s.first_prompt_tokens or usage.prompt
            for call in message.get("tool_calls") or []:
                self._note_call(call)
            said = visible_text(message.get("content") or "")
            if said:
                self._note_words(said)
        else:
            self._side_call(usage, before)
        self._event("message", message=message, purpose="agent" if agent else self.SIDE_CALLS, step=s.step if agent else None,
                    usage={"prompt": usage.prompt, "completion": usage.completion, "cached": usage.cached, "estimated": usage.estimated,
                           "latency_s": round(resp.latency_s, 4), "finish_reason": resp.finish_reason, "timings": resp.timings})
        try:
            self.acct.check_token_budget()
        except Stop as stop:
            s.withheld += 1
            return self._refuse(stop, "the run's token budget is spent")
        if resp.malformed:
            if self.stats is not None:
                self.stats.malformed += 1
            self._event("malformed", step=s.step, error=resp.malformed)
            return self._error(502, f"the model's reply could not be taken: {resp.malformed}")
        self._billed(usage, agent)
        return self._reply(body, message, resp)

    def _message(self, resp) -> dict:
        """The model's answer in the canonical OpenAI shape, every call with an id."""
        return assistant(resp.message, f"call_{self.s.turn}_{self.s.step + 1}")

    def _note_call(self, call: dict) -> None:
        self.calls[call["id"]] = {"name": call["function"]["name"], "arguments": call["function"]["arguments"], "step": self.s.step}

    def _note_words(self, said: str) -> None:
        """The model's last own words, what the backstop writes. A reply that came after the turn closed (a stop came
        first, the agent was killed or gone) is billed but never read, for every agent: as under the native loop,
        where a call past its deadline gives no reply. Pi and Claude Code once took it, Codex not."""
        if self.open:
            self.s.last_text = said

    def _side_call(self, usage: Usage, before: int) -> None:
        """A model call without tools: the agent compacting."""
        s = self.s
        if self.stats is not None:
            self.stats.context_tokens = before  # a compaction call says nothing of the conversation's size
        s.compaction_calls += 1
        add_usage(s.compaction_usage, usage)

    def _billed(self, usage: Usage, agent: bool) -> None:
        """The billed usage of the agent answers the agent got: its own records sum to this."""
        if agent and not usage.estimated:
            add_usage(self.s.agent_usage, usage)

    def _refuse(self, cut: BaseException, why: str, status: int = 409) -> Reply:
        """The channel's side of a stop or a turn's end: the agent's call is refused, the main thread ends the turn or run."""
        self.open = False
        if not isinstance(self.pending, Stop):
            self.pending = cut
        return self._error(status, f"searchbox: {why}")

    def _error(self, status: int, message: str, kind: str = "searchbox_error") -> Reply:
        return error(status, message, kind)

    def _log_seen(self, system: Optional[str], results: list[dict]) -> None:
        """What the request shows the model that the trace lacks: the agent's system prompt (once), the tool results
        (a result of a call that never reached the channel is the agent's refusal, and gets its row here)."""
        if system is not None and not self.system_logged:
            self.system_logged = True
            self.s.system_chars = len(system)
            self._event("message", message={"role": "system", "content": system}, harness=self.KIND)
        for message in results:
            call_id = message["tool_call_id"]
            if call_id not in self.logged:
                if call_id not in self.outcomes:
                    self._refused_row(call_id, message["content"])
                self._log_tool(message, (self.calls.get(call_id) or {}).get("name") or "")

    def _log_tool(self, message: dict, name: str) -> None:
        message = {**message, "name": name}
        out = self.outcomes.get(message["tool_call_id"])
        if out is not None and out.data is not None:
            message["data"] = out.data  # for programs reading the trace, as the native loop keeps it
        self.logged.add(message["tool_call_id"])
        self._event("message", message=message)

    def _log_unsent_results(self) -> None:
        """Tool results the model never got (the turn or the run ended first): into the trace as the channel answered."""
        for call_id, (name, text) in self.answered.items():
            if call_id not in self.logged:
                self._log_tool({"role": "tool", "tool_call_id": call_id, "content": text}, name)

    def _refused_row(self, call_id: str, text: str) -> bool:
        """A row for a call the model made that the agent refused before it reached the channel (a tool the run does
        not have, arguments that are no JSON object or fail the schema): the model's call as the server gave it, the
        refusal as the request shows it to the model. Whether it made one."""
        info = self.calls.get(call_id)
        if info is None or call_id in self.rowed:
            return False
        self.rowed.add(call_id)
        self.rec.tool_call(ToolRow(self.s.turn, int(info["step"]), call_id, info["name"], info["arguments"], [], [], 0.0, 0.0, False,
                                   text[:RESULT_CAP], len(text), "", True))
        counters = self.stats if self.stats is not None else self.s.ledger.cum
        counters.tool_calls += 1
        counters.malformed_calls += 1
        return True

    # ---- the run's tools ---------------------------------------------------------------------------------
    def _tools(self) -> Reply:
        return Reply(200, self.ctx.spec.harness["channel_tools"])

    def _call(self, body: Any) -> Reply:
        if not isinstance(body, dict):
            return self._error(400, "a tool call is a JSON object")
        name, args = body.get("name"), body.get("arguments")
        with self.lock:
            if not self.open:
                return self._error(409, "searchbox: no turn is in progress; tools cannot be called now")
            if name not in self.channel_names:
                return Reply(200, {"ok": False, "text": f"Error: {str(name)[:100]!r} is not one of {self.TOOLS} "
                                                        f"({', '.join(sorted(self.channel_names)) or 'none'})"})
            claimed = self._claim(body, name, args)
            if isinstance(claimed, Reply):
                return claimed
            call_id, info = claimed
            turn, step = self.s.turn, int(info.get("step", self.s.step))
        return run_channel_call(self, name, args, call_id, info.get("arguments"), turn, step, lambda: self._settled(call_id))

    def _claim(self, body: dict, name: str, args: Any) -> tuple[str, dict] | Reply:
        """The model's call this tool call answers (its id, what the model wrote), or the channel's answer instead: here
        the call id it came with (Pi's extension sends the model's)."""
        call_id = str(body.get("id") or "")
        return call_id, self.calls.get(call_id) or {}

    def _settled(self, call_id: str) -> None:
        """A tool call is over, whichever way."""

    # ---- the agent's own ----------------------------------------------------------------------------------
    def _upstream(self, body: dict, agent: bool) -> dict | Reply:
        """The request to the run's endpoint (with what it shows the model logged), or the channel's refusal."""
        raise NotImplementedError

    def _overflow(self, exc: ModelError) -> Reply:
        """The server refused the conversation as longer than its context."""
        raise NotImplementedError

    def _reply(self, body: dict, message: dict, resp) -> Reply:
        """The model's answer in the agent's API's shape."""
        raise NotImplementedError
