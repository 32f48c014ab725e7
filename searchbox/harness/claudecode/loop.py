"""Claude Code's run: its own loop and system prompt, driven through its print mode over JSON lines, accounted at the
channel exactly as the native loop and Pi are.

The protocol: the task is appended to Claude Code's system prompt (launch.task), the question is its first user
message on stdin, a turn is one message to idle (its `result` record), a bare `Continue.` on the same stdin starts
the next turn of the same session while the budget lasts (force_budget), else the run stops after the first; after
each turn the backstop fills ANSWER.md from the model's last own words unless the model wrote it.

Claude Code's model calls arrive at the channel as Anthropic Messages requests (`_messages`, on the channel's
threads, through the loopback forwarder). Each is translated (wire.py) and goes to the run's endpoint only, through
the same Accountant as the native loop: deadlines, usage, timings, the token budget, the stops. A stop decided there
refuses the call (HTTP 409, no retry: Claude Code's retries are off) and the main thread ends the turn or the run.
Every tool is the run's, offered over MCP (harness/bridge/mcp.mjs) and run by searchbox through the channel
(`_call`) in the native loop's per-call box: tool rows, evidence and the trace's tool results are what the harness
ran and the model was shown, never what Claude Code's own records say (the one row made without a run is a call
Claude Code refused before it reached the channel, read from the request that shows the model the refusal).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from ...corpus import safefs
from ...errors import SearchboxError
from ...model.llm import Usage
from ...paths import atomic_write
from ...tools import ToolsetState
from ..accounting import Ledger
from ..base import Stop
from ..channel import Channel, Reply, Routes
from ..cli_run import SESSION_CAP, CliRun
from ..pi.rpc import Rpc
from . import install, launch, wire

STATE_VERSION = 1
STARTUP_S = 120.0  # to its first record (the init, after its MCP server connected)
ABORT_S = 60.0  # for Claude Code to go idle after an interrupt
SESSION_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")  # Claude Code's ids: UUIDs


@dataclass
class ClaudeCodeState:
    """Everything a claude-code run changes (Claude Code's own state is its session, in its box's config folder)."""

    ledger: Ledger = field(default_factory=Ledger)
    turn: int = 0
    step: int = 0  # model calls with tools in the turn in progress
    continues: int = 0
    compactions: int = 0  # always 0: its compaction is off (launch.QUIET)
    side_calls: int = 0  # model calls without tools (none expected: its side requests are switched off)
    withheld: int = 0
    backstop_text: Optional[str] = None
    last_snapshot: Optional[str] = None
    answer_source: str = "none"
    last_text: str = ""
    logged_tools: list = field(default_factory=list)
    agent_usage: Usage = field(default_factory=Usage)
    first_prompt_tokens: int = 0
    server_renders_tools: bool = True
    system_chars: int = 0
    startup_s: float = 0.0
    session_id: str = ""
    session_file: str = ""  # its session's file under its config folder (projects/<cwd>/<id>.jsonl)
    results: int = 0  # Claude Code's `result` records (one a turn)
    claimed_usage: dict = field(default_factory=dict)  # the sum of its result records' usage (a check, never billed)
    refused_paths: list = field(default_factory=list)  # channel paths it called that the harness does not serve
    tools: ToolsetState = field(default_factory=ToolsetState)


class ClaudeCodeRun(CliRun):
    """One run of Claude Code through its print mode: its records on stdout, its prompts and interrupts on stdin, its
    Anthropic requests at the channel; the rest is CliRun's."""

    KIND = FOLDER = STATE_NAME = "claude-code"
    NAME = "Claude Code"
    INSIDE = launch.INSIDE
    State, STATE_VERSION, ABORT_S, ABORT = ClaudeCodeState, STATE_VERSION, ABORT_S, "an interrupt"
    SIDE_CALLS = "side"
    require = staticmethod(install.require)

    def __init__(self, ctx, cc, state: Optional[ClaudeCodeState] = None):
        super().__init__(ctx, cc, state)
        self.write_lock = threading.Lock()
        self.tool_names = list(ctx.spec.harness["tools"])
        self.waiting: list[str] = []  # call ids of the model's replies not yet run, in order (the bridge sends no id)
        self.running: set[str] = set()  # call ids searchbox is running now
        self.started_at = 0.0
        self.init_seen = False

    def _resume_note(self, session: Optional[bytes]) -> dict:
        return {"session_id": self.s.session_id if session else None}

    # ---- Claude Code's process --------------------------------------------------------------------------
    def _write(self, record: dict) -> None:
        data = json.dumps(record, ensure_ascii=False).encode("utf-8", "replace") + b"\n"
        with self.write_lock:
            try:
                self.box.proc.stdin.write(data)
                self.box.proc.stdin.flush()
            except (OSError, ValueError) as exc:
                raise Stop("tool_error", f"Claude Code no longer reads its input: {exc}: {self._why_gone()}") from exc

    def _send(self, text: str) -> None:
        self._write({"type": "user", "message": {"role": "user", "content": text}})

    def _abort(self) -> None:
        self._write({"type": "control_request", "request_id": f"sb-interrupt-{self.s.turn}", "request": {"subtype": "interrupt"}})

    def _wait_idle(self) -> None:
        """Claude Code's records until its `result` (the turn's end); its assistant and user records are never read
        for rows or the trace (the channel saw what the model said and what the tools returned)."""
        while True:
            record = self.rpc.next(0.25)
            self._check_live()
            if record is None:
                continue
            kind = record.get("type")
            if kind == "closed":
                raise Stop("tool_error", f"Claude Code exited in turn {self.s.turn}: {self._why_gone()}")
            if kind == "system" and record.get("subtype") == "init":
                self._on_init(record)
            elif kind == "result":
                self._on_result(record)
                return

    def _on_init(self, record: dict) -> None:
        with self.lock:
            if not self.init_seen:
                self._count_startup(time.monotonic() - self.started_at)
                self.init_seen = True
            servers = record.get("mcp_servers") if isinstance(record.get("mcp_servers"), list) else []
            status = {str(s.get("name")): s.get("status") for s in servers if isinstance(s, dict)}
            sid = record.get("session_id")
            if isinstance(sid, str) and SESSION_ID.match(sid):
                self.s.session_id = sid
            self._event("claude_code_init", session_id=sid, tools=record.get("tools"), mcp=status, model=record.get("model"))
            if self.tool_names and status.get(launch.MCP_NAME) != "connected":
                self.pending = Stop("tool_error", f"Claude Code's MCP bridge did not connect: {json.dumps(status)[:300]}")

    def _on_result(self, record: dict) -> None:
        with self.lock:
            self.s.results += 1
            usage = record.get("usage") if isinstance(record.get("usage"), dict) else {}
            for k in ("input_tokens", "cache_read_input_tokens", "output_tokens"):
                if isinstance(usage.get(k), int):
                    self.s.claimed_usage[k] = self.s.claimed_usage.get(k, 0) + usage[k]
            self._event("claude_code_result", subtype=record.get("subtype"), is_error=bool(record.get("is_error")),
                        stop_reason=record.get("stop_reason"), num_turns=record.get("num_turns"))

    def _check_late(self) -> None:
        if not self.init_seen and time.monotonic() - self.started_at > STARTUP_S:
            raise Stop("tool_error", f"Claude Code did not start within {STARTUP_S:.0f}s: {self._why_gone()}")
        super()._check_late()

    def _start(self, session: Optional[bytes]) -> None:
        cfg = self.ctx.config
        self.folder.mkdir(parents=True, exist_ok=True)
        self.channel = Channel(Routes(self._openai, self._tools, self._call, more={"/v1/messages": self._messages,
                                                                                    "/v1/messages/count_tokens": self._count}),
                               self._admit).start()
        self._check_template("the server's chat template renders no tools: the model sees no tool schemas and its replies are "
                             "not parsed as tool calls")
        self.started_at = time.monotonic()
        again = (self.s.session_id, self.s.session_file, session) if session is not None else None
        self.box, _ = launch.start(self.install, cfg, self.ctx.spec, self.folder, self.channel.path, self.ctx.toolset.ctx.sandbox_mode,
                                   self.ws.work, again)
        self.rpc = Rpc(self.box.proc.stdin, self.box.proc.stdout)
        self._event("claude_code_started", claude_code=self.install.version, node=self.install.node_version,
                    sandbox=self.ctx.toolset.ctx.sandbox_mode)

    def _save_session(self, name: str) -> None:
        """Claude Code's session file, copied from its config folder into the run's claude-code/ (never through a
        link; found by the id its init record gave)."""
        view = self.box.private_views.get("config") if self.box is not None else None
        sid = self.s.session_id
        if view is None or not sid:
            return
        with contextlib.suppress(OSError):
            for folder in sorted(os.listdir(view / "projects")):
                rel = f"projects/{folder}/{sid}.jsonl"
                data = safefs.read_bytes(view, rel, cap=SESSION_CAP)
                if data is not None:
                    self.s.session_file = rel
                    atomic_write(self.folder / name, data)
                    return

    def _exit_story(self) -> str:
        code = self.box.proc.poll()
        lines = [line.strip() for line in self.box.stderr_text().splitlines() if line.strip()]
        how = f"exit {code}" if code is None or code < 128 else f"killed by signal {code - 128}"
        if isinstance(code, int) and code < 0:
            how = f"killed by signal {-code}"
        return f"{how}: {lines[-1]}" if lines else how

    def _refused_row(self, call_id: str, text: str) -> bool:
        if call_id in self.running:
            return False  # a call searchbox is running (Claude Code gave up on it: an interrupt) gets its row when it ends
        made = super()._refused_row(call_id, text)
        if made:
            with contextlib.suppress(ValueError):
                self.waiting.remove(call_id)
        return made

    # ---- the channel: model calls (Anthropic's Messages API) -------------------------------------------
    def _openai(self, body: Any) -> Reply:
        return self._refused_path("/v1/chat/completions")

    def _count(self, body: Any) -> Reply:
        return self._refused_path("/v1/messages/count_tokens")

    def _refused_path(self, path: str) -> Reply:
        with self.lock:
            if path not in self.s.refused_paths:
                self.s.refused_paths.append(path)
            self._event("channel_refused_path", path=path)
        return Reply(404, wire.error_body(f"searchbox: {path} is not served to Claude Code", "not_found_error"))

    def _error(self, status: int, message: str, kind: str = "api_error") -> Reply:
        return Reply(status, wire.error_body(message, kind))

    def _messages(self, body: Any) -> Reply:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return self._error(400, "a messages request needs a list of messages", "invalid_request_error")
        return self._model_call(body, bool(body.get("tools")))

    def _upstream(self, body: dict, agent: bool) -> dict:
        today = self.ctx.spec.today
        results = [{"role": "tool", "tool_call_id": r["tool_call_id"], "content": r["content"]} for r in wire.tool_results(body)]
        self._log_seen(wire.system_text(body, today) or None, results)
        return wire.upstream(body, self.ctx.config.model.max_tokens, launch.PREFIX, today)

    def _overflow(self, exc) -> Reply:
        """Its compaction is off: a conversation the server cannot take ends the run."""
        return self._refuse(Stop("context_exhausted", str(exc)[:300]), "the conversation is longer than the model's context", 400)

    def _message(self, resp) -> dict:
        return wire.safe_ids(super()._message(resp))

    def _note_call(self, call: dict) -> None:
        fn = call["function"]
        parsed = wire.parse_input(fn["arguments"])
        name = wire.strip(fn["name"], launch.PREFIX)  # a model that wrote the MCP name calls the same tool
        self.calls[call["id"]] = {"name": fn["name"], "arguments": fn["arguments"], "step": self.s.step,
                                  "key": wire.call_key(name, parsed if parsed is not None else {})}
        self.waiting.append(call["id"])

    def _side_call(self, usage: Usage, before: int) -> None:
        self.s.side_calls += 1

    def _billed(self, usage: Usage, agent: bool) -> None:
        super()._billed(usage, True)  # every billed answer, a side call's too (none are expected: its side requests are off)

    def _reply(self, body: dict, message: dict, resp) -> Reply:
        s = self.s
        whole = wire.reply(message, resp, self.ctx.config.model.name, f"msg_{s.turn}_{s.step}", launch.PREFIX, self.tool_names)
        if body.get("stream") is True:
            return Reply(200, events=wire.events(whole), done=False)
        return Reply(200, whole)

    # ---- the channel: the run's tools (over the MCP bridge) ---------------------------------------------
    def _match(self, name: str, args: Any) -> str:
        """The model's call this bridge call is (the first not yet run with this name and these arguments); an id of
        its own when none is (the row then holds the arguments as they came)."""
        key = wire.call_key(name, args)
        for call_id in self.waiting:
            if self.calls[call_id]["key"] == key:
                self.waiting.remove(call_id)
                return call_id
        return f"call_{self.s.turn}_{self.s.step}_unmatched_{len(self.outcomes)}"

    def _claim(self, body: dict, name: str, args: Any) -> tuple[str, dict]:
        call_id = self._match(str(name), args)
        self.running.add(call_id)
        return call_id, self.calls.get(call_id) or {}

    def _settled(self, call_id: str) -> None:
        self.running.discard(call_id)

    # ---- bookkeeping --------------------------------------------------------------------------------------
    def _about(self) -> dict:
        s = self.s
        claimed = {"prompt": s.claimed_usage.get("input_tokens", 0) + s.claimed_usage.get("cache_read_input_tokens", 0),
                   "completion": s.claimed_usage.get("output_tokens", 0)}
        forwarded = {"prompt": s.agent_usage.prompt, "completion": s.agent_usage.completion}
        return {
            "kind": "claude-code", "claude_code_version": self.install.version, "node": self.install.node_version,
            "session_id": s.session_id, **self._run_facts(), "side_calls": s.side_calls,
            "withheld_answers": s.withheld, "results": s.results, "refused_paths": list(s.refused_paths),
            # Claude Code's own sum of usage (its result records) beside the channel's: they agree unless something
            # called the model past it (its results cover whole turns only: a turn cut by a stop may have none)
            "usage_check": {"forwarder": forwarded, "claude_code": claimed, "agree": claimed == forwarded}, "usage_agree": claimed == forwarded,
            **self._channel_facts(),
        }

    @classmethod
    def restore(cls, checkpoint: dict) -> ClaudeCodeState:
        state = super().restore(checkpoint)
        if state.turn > 0 and not (SESSION_ID.match(state.session_id) and re.fullmatch(r"projects/[^/]+/[0-9a-f-]+\.jsonl", state.session_file)):
            raise SearchboxError(f"cannot resume: the claude-code checkpoint of turn {state.turn} names no session of Claude Code's")
        return state


restore = ClaudeCodeRun.restore
