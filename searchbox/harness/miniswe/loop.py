"""mini-swe-agent's run: its DefaultAgent's loop over searchbox's Model and Environment, accounted as the native loop.

Imported only through `miniswe.load`, which keeps what importing mini-swe-agent does inside the run.

The protocol: the task (the native loop's system prompt for bash) is appended to mini-swe-agent's system message, the
question is its instance template's `task`; a turn is one run of its loop, until it exits (its submit sentinel, its
step limit = harness.max_steps_per_turn, its limit of consecutive format errors), or the turn's deadline passes. While
the budget lasts (force_budget) a bare `Continue.` is added to the same history and its loop runs again; else the run
stops after the first. After each turn the backstop fills ANSWER.md from the model's last own words (what it
submitted, else its last reply without the action block) unless the model wrote it.

Where the accounting happens: Model.query is one request through the Accountant (the deadlines, the chat, the usage,
the token budget, failed requests in the trace), exactly the native loop's order; Environment.execute runs the
command through the run's Toolset as the native loop's `bash` call (the same per-call box), and the harness writes
the tool row and the trace's tool message from what it ran. The trace holds the conversation in the canonical shape
(the model's action as a `bash` tool call, its output as the tool message); the observation mini-swe-agent rendered
from it (what the model read) is beside it as an `observation` event.
"""

from __future__ import annotations

import json
import re
import traceback
from typing import Any, Optional

import minisweagent
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.exceptions import FormatError
from minisweagent.models.utils.actions_text import format_observation_messages, parse_regex_actions

from ...errors import BackendError, ModelError
from ...model.protocol import text_of
from ...record.record import ToolRow
from ..accounting import Accountant, Clock, Ledger
from ..agent import OVERFLOW_RX, backstop, record_turn, visible_text
from ..base import CONTINUE, EndTurn, RunContext, Stop
from ..state import dump
from . import Templates, agent_config, system_vars, task
from .state import STATE_VERSION, MiniState

KIND = "mini-swe-agent"
# How its loop ended a turn (the exit message's exit_status) as the turn row's ended_by.
ENDED_BY = {"Submitted": "submitted", "LimitsExceeded": "max_steps", "RepeatedFormatError": "malformed_responses"}


class Model:
    """mini-swe-agent's Model protocol over the run's model: each query is one request through the run's Accountant."""

    def __init__(self, run: "MiniRun"):
        self.run = run
        t = run.t
        self.config = {"model_name": run.ctx.config.model.name, "observation_template": t.model["observation_template"],
                       "format_error_template": t.model["format_error_template"], "action_regex": t.action_regex}

    def query(self, messages: list[dict], **kwargs: Any) -> dict:
        return self.run.ask(messages)

    def format_message(self, **kwargs: Any) -> dict:
        return dict(kwargs)

    def format_observation_messages(self, message: dict, outputs: list[dict], template_vars: Optional[dict] = None) -> list[dict]:
        return format_observation_messages(outputs, observation_template=self.config["observation_template"],
                                           template_vars=template_vars, multimodal_regex="")

    def get_template_vars(self, **kwargs: Any) -> dict:
        return dict(self.config)

    def serialize(self) -> dict:
        return {"info": {"config": {"model": {"model_name": self.config["model_name"]}, "model_type": "searchbox"}}}


class Environment(LocalEnvironment):
    """mini-swe-agent's LocalEnvironment with each command run by the run's own `bash` tool (its box, its limits), and
    its submit sentinel checked as released (`_check_finished`)."""

    def __init__(self, run: "MiniRun"):
        super().__init__(cwd="", env={}, timeout=int(run.h.bash_timeout_s))
        self.run = run

    def execute(self, action: dict, cwd: str = "", *, timeout: Optional[int] = None) -> dict[str, Any]:
        output = self.run.bash(str(action.get("command", "")), str(action.get("call_id") or ""))
        self._check_finished(output)  # raises Submitted when the first line is the sentinel and the command succeeded
        return output

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        # LocalEnvironment's also hold the host's whole os.environ and its name: the templates read only these
        return {**self.config.model_dump(), **system_vars(), **kwargs}


class Agent(DefaultAgent):
    """DefaultAgent whose history can go on: its run() always starts afresh with the system and instance messages,
    so a turn after the first (and a resumed one) hands it the history to continue instead."""

    def __init__(self, run: "MiniRun", **config: Any):
        super().__init__(Model(run), Environment(run), **config)
        self.harness_run = run
        self.carried: Optional[list] = None

    def add_messages(self, *messages: dict) -> list[dict]:
        if self.carried is not None:  # run()'s first call: its system and instance message; the history stands for them
            self.messages, self.carried = self.carried, None
            return []
        added = super().add_messages(*messages)
        for m in added:
            self.harness_run.added(m)
        return added

    def go_on(self, history: list[dict], calls: int = 0, format_errors: int = 0) -> dict:
        self.carried = [m for m in history if m.get("role") != "exit"]
        self.n_calls, self.n_consecutive_format_errors = calls, format_errors  # its step limit is per turn
        return self.run(self.harness_run.ctx.question)


def own_words(content: str, action_regex: str) -> str:
    """A reply's text without its action blocks and reasoning: what the model said, not what it ran."""
    return visible_text(re.sub(action_regex, "", content or "", flags=re.DOTALL))


class MiniRun:
    """One mini-swe-agent run. `run()` always leaves complete logs and fills the run record, like the native loop."""

    def __init__(self, ctx: RunContext, templates: Templates, state: Optional[MiniState] = None):
        self.ctx, self.h, self.t = ctx, ctx.config.harness, templates
        self.rec, self.ws = ctx.recorder, ctx.workspace
        self.s = state or MiniState(ledger=Ledger(clock=Clock(started=ctx.started)))
        self.acct = Accountant(self.h, self.s.ledger, on_failure=lambda f: self._event("request_failed", step=self.s.step, **f))
        ctx.toolset.state = self.s.tools
        config = agent_config(ctx.config, templates)
        config["system_template"] = config["system_template"].rstrip("\n") + "\n\n" + task(ctx.config)
        self.agent = Agent(self, **config)
        self.agent.messages = list(self.s.messages)

    @property
    def stats(self):
        return self.s.ledger.turn

    # ---- the protocol -------------------------------------------------------------------------
    def run(self, resumed: bool = False) -> None:
        stop, detail = "interrupted", ""
        self.rec.write_record()
        try:
            s = self.s
            if not resumed:
                self._begin_turn()
                self._play(first=True)
            else:
                in_turn = self.stats is not None
                self.rec.truncate(s.turn - 1 if in_turn else s.turn, (s.turn, s.step + 1) if in_turn else (s.turn + 1, 0))
                self._event("resume", in_turn=in_turn, step=s.step)
                if in_turn:
                    self._play(calls=s.step, format_errors=s.format_errors)
                else:
                    self._after_turn()
                    self._next_turn()
            while True:
                self._end_turn()
                self._after_turn()
                self._next_turn()
        except KeyboardInterrupt:
            stop, detail = "interrupted", "KeyboardInterrupt"
        except Exception as exc:
            stop, detail = self.acct.stop_of(exc)
            if not isinstance(exc, (Stop, ModelError, BackendError)):  # a harness bug: keep the traceback
                self._event("error", traceback=traceback.format_exc())
        finally:
            if self.stats is not None and stop != "paused":  # a paused turn gets its row when --resume finishes it
                self.stats.ended_by = self.stats.ended_by or "stop"
                self._end_turn(checkpoint=False)  # the last step-boundary checkpoint stays where a resume picks up
            self._event("stop", reason=stop, detail=detail)
            self._update_record(stop, detail)

    def _begin_turn(self) -> None:
        s = self.s
        s.turn += 1
        s.step = s.format_errors = 0
        self.acct.begin_turn()

    def _play(self, first: bool = False, calls: int = 0, format_errors: int = 0) -> None:
        """mini-swe-agent's loop until it exits; a turn deadline ends the turn, anything else the run."""
        try:
            if first:
                self.agent.run(self.ctx.question)
            else:
                self.agent.go_on(self.agent.messages, calls, format_errors)
        except EndTurn as cut:
            self.stats.ended_by = cut.ended_by

    def _after_turn(self) -> None:
        self.acct.check_budget_after_turn(self.s.turn)
        if self.ctx.should_pause():
            raise Stop("paused")  # between turns: the checkpoint _end_turn wrote is where it resumes

    def _next_turn(self) -> None:
        self.s.continues += 1
        self._begin_turn()
        message = {"role": "user", "content": CONTINUE}
        self._event("message", message=message)
        self.agent.messages = [m for m in self.agent.messages if m.get("role") != "exit"] + [message]
        self._play()

    def _end_turn(self, checkpoint: bool = True) -> None:
        s = self.s
        stats = self.acct.end_turn()
        stats.ended_by = stats.ended_by or "exit"
        record_turn(self.rec, s, stats, self._backstop())
        if checkpoint:
            self._checkpoint(self.agent.messages)

    def _backstop(self) -> Optional[str]:
        """ANSWER.md's text, filled from the model's last own words when it wrote none (agent.backstop)."""
        return backstop(self.ws.work, self.s, self.s.last_text)

    # ---- mini-swe-agent's Model: one model call ---------------------------------------------------
    def ask(self, messages: list[dict]) -> dict:
        s = self.s
        self._checkpoint(messages)  # a step boundary: what a resume sends next
        if self.ctx.should_pause():
            raise Stop("paused")
        self.acct.check_deadlines()
        payload = {"messages": [{"role": m["role"], "content": m["content"]} for m in messages if m.get("role") != "exit"],
                   "max_tokens": self.ctx.config.model.max_tokens}
        try:
            resp = self.acct.chat(self.ctx.client, payload)
        except ModelError as exc:
            if OVERFLOW_RX.search(str(exc)):  # mini-swe-agent does not compact: this model and window cannot go on
                raise Stop("context_exhausted", f"the server refused the conversation as longer than its context: {exc}") from exc
            raise
        usage = self.acct.account(resp, payload)
        s.step += 1
        s.first_prompt_tokens = s.first_prompt_tokens or usage.prompt
        content, problem = ("", resp.malformed) if resp.malformed else text_of((resp.message or {}).get("content"))
        call_id = f"call_{s.turn}_{s.step}"
        error: Optional[FormatError] = None
        try:
            actions = parse_regex_actions(content, action_regex=self.t.action_regex, format_error_template=self.t.model["format_error_template"],
                                          template_kwargs={"finish_reason": resp.finish_reason})
        except FormatError as exc:
            actions, error = [], exc
        message: dict = {"role": "assistant", "content": content}
        if actions:
            message["tool_calls"] = [{"id": call_id, "type": "function",
                                      "function": {"name": "bash", "arguments": _arguments(actions[0]["command"])}}]
        self._event("message", message=message, step=s.step,
                    usage={"prompt": usage.prompt, "completion": usage.completion, "cached": usage.cached, "estimated": usage.estimated,
                           "latency_s": round(resp.latency_s, 4), "finish_reason": resp.finish_reason, "timings": resp.timings})
        said = own_words(content, self.t.action_regex)
        if said:
            s.last_text = said
        self.acct.check_token_budget()
        if error is not None:
            self.stats.malformed += 1
            why = problem or f"expected exactly one action block, found {error.messages[0].get('extra', {}).get('n_actions')}"
            self._event("malformed", step=s.step, error=why, raw=content[:2000])
            raise error  # its loop adds the format-error message it carries
        return {"role": "assistant", "content": content,
                "extra": {"actions": [{**a, "call_id": call_id} for a in actions], "cost": 0.0}}

    # ---- mini-swe-agent's Environment: one command ------------------------------------------------
    def bash(self, command: str, call_id: str) -> dict:
        s, args = self.s, _arguments(command)
        try:
            out = self.ctx.toolset.call("bash", args)
        except BackendError as exc:  # logged as the call that failed, then the run stops
            self.rec.tool_call(ToolRow(s.turn, s.step, call_id, "bash", args, [], [], 0.0, 0.0, False, str(exc), 0, "", False))
            raise
        stats = self.stats
        stats.tool_calls += 1
        stats.tool_s += out.duration_ms / 1000
        stats.setup_s += out.setup_ms / 1000
        stats.malformed_calls += int(out.malformed)
        self.rec.tool_call(ToolRow(s.turn, s.step, call_id, out.tool, out.arguments, list(out.programs), list(out.paths), out.duration_ms,
                                   out.setup_ms, out.ok, out.error, out.output_chars, out.delivered, out.malformed))
        message = {"role": "tool", "tool_call_id": call_id, "name": "bash", "content": out.output}
        if out.data is not None:
            message["data"] = out.data
        self._event("message", message=message)
        code = out.data.get("exit_code") if out.ok and isinstance(out.data, dict) else None
        if not isinstance(code, int):
            return {"output": out.output, "returncode": -1, "extra": {"call_id": call_id},
                    "exception_info": f"An error occurred while executing the command: {out.error.splitlines()[0] if out.error else 'failed'}"}
        return {"output": _observed(out.output, code), "returncode": code, "exception_info": "", "extra": {"call_id": call_id}}

    # ---- its history, as it grows ------------------------------------------------------------------
    def added(self, message: dict) -> None:
        """A message DefaultAgent added to its history: into the trace (the model's replies are there already, with their
        usage; a command's output is there as the tool message, and here as mini-swe-agent rendered it)."""
        role, extra = message.get("role"), message.get("extra") or {}
        if role == "assistant":
            return
        if role == "exit":
            status = str(extra.get("exit_status") or "")
            if status == "Submitted":
                self.s.submissions += 1
                submitted = visible_text(str(extra.get("submission") or ""))
                if submitted:
                    self.s.last_text = submitted  # what it submitted came after its last reply
            if self.stats is not None and status in ENDED_BY:
                self.stats.ended_by = self.stats.ended_by or ENDED_BY[status]
            self._event("exit", status=status, submission=str(extra.get("submission") or "")[:4000])
            return
        if extra.get("call_id"):
            self._event("observation", step=self.s.step, tool_call_id=extra["call_id"], content=message.get("content"))
            return
        self._event("message", message={"role": role, "content": message.get("content")})

    # ---- bookkeeping ----------------------------------------------------------------------------------
    def _event(self, kind: str, **data: Any) -> None:
        self.rec.event(kind, self.s.turn, **data)

    def _checkpoint(self, messages: list[dict]) -> None:
        s = self.s
        s.messages = [m for m in messages if m.get("role") != "exit"]
        s.format_errors = self.agent.n_consecutive_format_errors
        self.rec.checkpoint({"harness": KIND, "version": STATE_VERSION, "state": dump(s)})  # the rows so far reach disk first

    def _update_record(self, stop: str, detail: str) -> None:
        r, s = self.rec.record, self.s
        self.acct.settle(r, s, self.rec.calls, stop, detail)
        r.harness = {"kind": KIND, "mini_swe_agent": minisweagent.__version__, "templates": self.t.sha256[:16],
                     "context_window": self.ctx.context_window, "first_prompt_tokens": s.first_prompt_tokens,
                     "submissions": s.submissions}


def _arguments(command: str) -> str:
    return json.dumps({"command": command}, ensure_ascii=False)


def _observed(text: str, code: int) -> str:
    """The bash tool's output without the exit-code note it adds (mini-swe-agent's observation shows the return code)."""
    if code == 0 and text == "[no output, exit code 0]":
        return ""
    trailer = f"\n[exit code {code}]"
    return text[: -len(trailer)] if code and text.endswith(trailer) else text
