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
import traceback
from dataclasses import dataclass, field
from typing import Any, Optional

from ...corpus import safefs
from ..agent import OVERFLOW_RX, backstop, record_turn, visible_text
from ...errors import BackendError, ModelError, SearchboxError
from ...model.llm import Usage
from ...model.protocol import template_supports_tools
from ...paths import atomic_write
from ...record.record import ToolRow
from ...tools import Outcome, ToolsetState
from ..accounting import Accountant, Clock, Ledger, stop_of
from ..base import CONTINUE, EndTurn, RunContext, Stop
from ..channel import Channel, Reply, Routes
from ..channel_tools import run_channel_call
from ..pi.loop import _hand_over  # a file the backstop writes belongs to the box's uid
from ..pi.rpc import Rpc
from ..pi.wire import assistant
from . import launch, wire
from .install import ClaudeCodeInstall

STATE_VERSION = 1
STARTUP_S = 120.0  # to its first record (the init, after its MCP server connected)
ABORT_S = 60.0  # for Claude Code to go idle after an interrupt
RESULT_CAP = 2000  # characters of a refused tool's text kept in its row
SESSION_CAP = 256 * 1024**2
SESSION_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")  # Claude Code's ids: UUIDs
CHECKPOINT_SESSION = "checkpoint-session.jsonl"


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


class ClaudeCodeRun:
    """One run of Claude Code. `run()` always leaves complete logs and fills the run record, like the native loop."""

    def __init__(self, ctx: RunContext, cc: ClaudeCodeInstall, state: Optional[ClaudeCodeState] = None):
        self.ctx, self.h, self.cc = ctx, ctx.config.harness, cc
        self.rec, self.ws = ctx.recorder, ctx.workspace
        self.s = state or ClaudeCodeState(ledger=Ledger(clock=Clock(started=ctx.started)))
        self.acct = Accountant(self.h, self.s.ledger, on_failure=lambda failure: self._event("request_failed", step=self.s.step, **failure))
        ctx.toolset.state = self.s.tools
        ctx.toolset.ctx.inside = launch.INSIDE if ctx.toolset.ctx.sandbox_mode != "none" else None
        self.run_cc = self.ws.run_dir / "claude-code"
        self.lock = threading.RLock()
        self.chat_lock = threading.Lock()
        self.tool_lock = threading.Lock()
        self.write_lock = threading.Lock()
        self.open = False
        self.pending: Optional[BaseException] = None
        self.tool_names = list(ctx.spec.harness["tools"])
        self.channel_names = {s["name"] for s in ctx.spec.harness["channel_tools"]}
        self.logged: set[str] = set(self.s.logged_tools)
        self.calls: dict[str, dict] = {}  # call id -> name, arguments as the model wrote them, step, key
        self.waiting: list[str] = []  # call ids of the model's replies not yet run, in order (the bridge sends no id)
        self.outcomes: dict[str, Outcome] = {}
        self.answered: dict[str, tuple[str, str]] = {}
        self.rowed: set[str] = set()
        self.running: set[str] = set()  # call ids searchbox is running now
        self.system_logged = False
        self.box = self.rpc = self.channel = None
        self.aborted, self.abort_by = False, 0.0
        self.watchdog_seen = 0
        self.started_at = 0.0
        self.init_seen = False

    @property
    def stats(self):
        return self.s.ledger.turn

    # ---- the protocol -----------------------------------------------------------------------------
    def run(self, resumed: bool = False, session: Optional[bytes] = None) -> None:
        stop, detail = "interrupted", ""
        try:
            self._start(session)
            if resumed:
                self.rec.truncate(self.s.turn, (self.s.turn + 1, 0))  # rows past the checkpoint belong to work the resume redoes
                self._event("resume", in_turn=False, step=0, session_id=self.s.session_id if session else None)
            if self.s.turn == 0:
                self._checkpoint()  # a run stopped in its first turn resumes from here, with the question
                self._begin_turn()
                self._prompt(self.ctx.question)
            else:
                self._after_turn()
                self._next_turn()
            while True:
                self._wait_idle()
                self._end_turn()
                self._after_turn()
                self._next_turn()
        except KeyboardInterrupt:
            stop, detail = "interrupted", "KeyboardInterrupt"
        except Exception as exc:
            stop, detail = stop_of(exc, self.acct.run_over())
            if not isinstance(exc, (Stop, ModelError, BackendError)):
                with self.lock:
                    self._event("error", traceback=traceback.format_exc())
        finally:
            with self.lock:
                self.open = False
            self._shutdown()
            if stop != "interrupted":
                self._drain()
                self._settle_tools()
            if self.stats is not None and stop != "paused":
                self.stats.ended_by = self.stats.ended_by or "stop"
                self._end_turn(checkpoint=False)
            with self.lock:
                self._event("stop", reason=stop, detail=detail)
                self._update_record(stop, detail)

    def _begin_turn(self) -> None:
        with self.lock:
            self.s.turn += 1
            self.s.step = 0
            self.acct.begin_turn()
            self.pending, self.aborted, self.open = None, False, True

    def _next_turn(self) -> None:
        self.s.continues += 1
        self._begin_turn()
        self._prompt(CONTINUE)

    def _after_turn(self) -> None:
        self.acct.check_budget_after_turn(self.s.turn)
        if self.ctx.should_pause():
            raise Stop("paused")

    def _write(self, record: dict) -> None:
        data = json.dumps(record, ensure_ascii=False).encode("utf-8", "replace") + b"\n"
        with self.write_lock:
            try:
                self.box.proc.stdin.write(data)
                self.box.proc.stdin.flush()
            except (OSError, ValueError) as exc:
                raise Stop("tool_error", f"Claude Code no longer reads its input: {exc}: {self._why_gone()}") from exc

    def _prompt(self, text: str) -> None:
        with self.lock:
            self._event("message", message={"role": "user", "content": text})
        self._write({"type": "user", "message": {"role": "user", "content": text}})

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
                took = time.monotonic() - self.started_at
                self.s.startup_s += took
                self.s.ledger.cum.setup_s += took
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

    def _check_live(self) -> None:
        with self.lock:
            pending, self.pending = self.pending, None
            if self.box is not None and len(self.box.killed) > self.watchdog_seen:
                for why in self.box.killed[self.watchdog_seen:]:
                    self._event("box_killed", why=why)
                self.watchdog_seen = len(self.box.killed)
        cut: Optional[BaseException] = pending
        if cut is None:
            try:
                self.acct.check_deadlines()
            except (EndTurn, Stop) as exc:
                cut = exc
        if cut is None and self.ctx.should_pause():
            cut = EndTurn("paused")
        if cut is None and not self.init_seen and time.monotonic() - self.started_at > STARTUP_S:
            cut = Stop("tool_error", f"Claude Code did not start within {STARTUP_S:.0f}s: {self._why_gone()}")
        if cut is None:
            if self.aborted and self.abort_by < time.monotonic():
                raise Stop("tool_error", f"Claude Code did not stop within {ABORT_S:.0f}s of an interrupt")
            return
        if isinstance(cut, Stop):
            raise cut
        with self.lock:
            self.open = False
            if self.stats is not None:
                self.stats.ended_by = self.stats.ended_by or cut.ended_by
        if not self.aborted:
            self.aborted, self.abort_by = True, time.monotonic() + ABORT_S
            self._write({"type": "control_request", "request_id": f"sb-interrupt-{self.s.turn}", "request": {"subtype": "interrupt"}})

    def _end_turn(self, checkpoint: bool = True) -> None:
        s = self.s
        self._settle_tools()  # a tool still running when the turn was cut: its row and time are this turn's
        with self.lock:
            self.open = False
            self._log_unsent_results()
            stats = self.acct.end_turn()
            stats.ended_by = stats.ended_by or "idle"
        live = self.box is not None and self.box.alive()
        answer = backstop(self.ws.work, s, s.last_text, written=_hand_over)
        if live and checkpoint:
            self._save_session(CHECKPOINT_SESSION)  # its session as of this checkpoint: what a resume continues
        with self.lock:
            record_turn(self.rec, s, stats, answer)
            if checkpoint:
                self._checkpoint()

    def _start(self, session: Optional[bytes]) -> None:
        cfg = self.ctx.config
        self.run_cc.mkdir(parents=True, exist_ok=True)
        self.channel = Channel(Routes(self._openai, self._tools, self._call, more={"/v1/messages": self._messages,
                                                                                    "/v1/messages/count_tokens": self._count}),
                               self._admit).start()
        get_json = getattr(self.ctx.client, "get_json", None)
        self.s.server_renders_tools = template_supports_tools(get_json("/props") if get_json else None)
        if not self.s.server_renders_tools:
            self._event("warning", detail="the server's chat template renders no tools: the model sees no tool schemas and its "
                                          "replies are not parsed as tool calls")
        self.started_at = time.monotonic()
        again = (self.s.session_id, self.s.session_file, session) if session is not None else None
        self.box, _ = launch.start(self.cc, cfg, self.ctx.spec, self.run_cc, self.channel.path, self.ctx.toolset.ctx.sandbox_mode,
                                   self.ws.work, again)
        self.rpc = Rpc(self.box.proc.stdin, self.box.proc.stdout)
        self._event("claude_code_started", claude_code=self.cc.version, node=self.cc.node_version,
                    sandbox=self.ctx.toolset.ctx.sandbox_mode)

    def _admit(self, peer) -> bool:
        box = self.box
        return box is not None and box.holds(peer.pid)

    def _settle_tools(self) -> None:
        """Wait for a tool call in flight (searchbox runs it whatever Claude Code does meanwhile; its own limits end it)."""
        if self.tool_lock.acquire(timeout=self.h.bash_timeout_s + 120):
            self.tool_lock.release()
        else:
            with self.lock:
                self._event("warning", detail="a tool call was still running when the turn's row was written")

    def _drain(self) -> None:
        m = self.ctx.config.model
        if self.chat_lock.acquire(timeout=m.timeout_s * (m.retries + 1) + 10):
            self.chat_lock.release()
        else:
            with self.lock:
                self._event("warning", detail="a model call was still in flight when the run's record was written")

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
                    atomic_write(self.run_cc / name, data)
                    return

    def _shutdown(self) -> None:
        if self.box is not None:
            self.box.kill()
            self._save_session("session.jsonl")
            stderr = self.box.stderr_text()
            if stderr.strip():
                atomic_write(self.run_cc / "stderr.log", stderr)
            self.box.release()
        if self.rpc is not None:
            self.rpc.close()
        if self.channel is not None:
            self.channel.close()

    def _why_gone(self) -> str:
        if self.box is None:
            return ""
        if self.box.killed:
            return self.box.killed[-1]
        with contextlib.suppress(Exception):
            self.box.proc.wait(timeout=2)
        code = self.box.proc.poll()
        lines = [line.strip() for line in self.box.stderr_text().splitlines() if line.strip()]
        how = f"exit {code}" if code is None or code < 128 else f"killed by signal {code - 128}"
        if isinstance(code, int) and code < 0:
            how = f"killed by signal {-code}"
        return (f"{how}: {lines[-1]}" if lines else how)[:500]

    def _refused_row(self, call_id: str, text: str) -> None:
        """A row for a call the model made that Claude Code refused before it reached the channel (a tool the run
        does not have, arguments that are no JSON object or fail the schema): as the server gave it, with the
        refusal the request shows the model."""
        info = self.calls.get(call_id)
        if info is None or call_id in self.rowed or call_id in self.running:
            return  # a call searchbox is running (Claude Code gave up on it: an interrupt) gets its row when it ends
        self.rowed.add(call_id)
        with contextlib.suppress(ValueError):
            self.waiting.remove(call_id)
        self.rec.tool_call(ToolRow(self.s.turn, int(info["step"]), call_id, info["name"], info["arguments"], [], [], 0.0, 0.0, False,
                                   text[:RESULT_CAP], len(text), "", True))
        counters = self.stats if self.stats is not None else self.s.ledger.cum
        counters.tool_calls += 1
        counters.malformed_calls += 1

    def _log_unsent_results(self) -> None:
        for call_id, (name, text) in self.answered.items():
            if call_id not in self.logged:
                self._log_tool({"role": "tool", "tool_call_id": call_id, "content": text}, name)

    # ---- the channel: model calls ---------------------------------------------------------------------
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
        agent = bool(body.get("tools"))
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
                self._log_request(body)
                payload = wire.upstream(body, self.ctx.config.model.max_tokens, launch.PREFIX, self.ctx.spec.today)
            try:
                resp = self.acct.chat(self.ctx.client, payload)
            except (EndTurn, Stop) as cut:
                with self.lock:
                    return self._refuse(cut, "the turn or the run passed its deadline during the call")
            except ModelError as exc:
                with self.lock:
                    if OVERFLOW_RX.search(str(exc)):  # compaction is off: a conversation the server cannot take ends the run
                        return self._refuse(Stop("context_exhausted", str(exc)[:300]), "the conversation is longer than the model's context", 400)
                    return self._refuse(Stop(*stop_of(exc, self.acct.run_over())), "the model endpoint failed", 502)
            with self.lock:
                return self._answer(body, payload, resp, agent)

    def _answer(self, body: dict, payload: dict, resp, agent: bool) -> Reply:
        s = self.s
        usage = self.acct.account(resp, payload)
        message = wire.safe_ids(assistant(resp.message, f"call_{s.turn}_{s.step + 1}")) if not resp.malformed else {"role": "assistant", "content": None}
        if agent:
            s.step += 1
            s.first_prompt_tokens = s.first_prompt_tokens or usage.prompt
            for call in message.get("tool_calls") or []:
                fn = call["function"]
                parsed = wire.parse_input(fn["arguments"])
                name = wire.strip(fn["name"], launch.PREFIX)  # a model that wrote the MCP name calls the same tool
                self.calls[call["id"]] = {"name": fn["name"], "arguments": fn["arguments"], "step": s.step,
                                          "key": wire.call_key(name, parsed if parsed is not None else {})}
                self.waiting.append(call["id"])
            said = visible_text(message.get("content") or "")
            if said:
                s.last_text = said
        else:
            s.side_calls += 1
        self._event("message", message=message, purpose="agent" if agent else "side", step=s.step if agent else None,
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
        if not usage.estimated:
            for part in ("prompt", "completion", "cached"):
                setattr(s.agent_usage, part, getattr(s.agent_usage, part) + getattr(usage, part))
        name = self.ctx.config.model.name
        whole = wire.reply(message, resp, name, f"msg_{s.turn}_{s.step}", launch.PREFIX, self.tool_names)
        if body.get("stream") is True:
            return Reply(200, events=wire.events(whole), done=False)
        return Reply(200, whole)

    def _refuse(self, cut: BaseException, why: str, status: int = 409) -> Reply:
        self.open = False
        if not isinstance(self.pending, Stop):
            self.pending = cut
        return self._error(status, f"searchbox: {why}")

    def _log_request(self, body: dict) -> None:
        """What the request shows the model that the trace lacks: the system prompt (once), the tool results."""
        system = wire.system_text(body, self.ctx.spec.today)
        if system and not self.system_logged:
            self.system_logged = True
            self.s.system_chars = len(system)
            self._event("message", message={"role": "system", "content": system}, harness="claude-code")
        for result in wire.tool_results(body):
            call_id = result["tool_call_id"]
            if call_id not in self.logged:
                if call_id not in self.outcomes:
                    self._refused_row(call_id, result["content"])
                self._log_tool({"role": "tool", "tool_call_id": call_id, "content": result["content"]},
                               (self.calls.get(call_id) or {}).get("name") or "")

    def _log_tool(self, message: dict, name: str) -> None:
        message = {**message, "name": name}
        out = self.outcomes.get(message["tool_call_id"])
        if out is not None and out.data is not None:
            message["data"] = out.data
        self.logged.add(message["tool_call_id"])
        self._event("message", message=message)

    # ---- the channel: dataroom tools --------------------------------------------------------------------
    def _tools(self) -> Reply:
        return Reply(200, self.ctx.spec.harness["channel_tools"])

    def _match(self, name: str, args: Any) -> str:
        """The model's call this bridge call is (the first not yet run with this name and these arguments); an id of
        its own when none is (the row then holds the arguments as they came)."""
        key = wire.call_key(name, args)
        for call_id in self.waiting:
            if self.calls[call_id]["key"] == key:
                self.waiting.remove(call_id)
                return call_id
        return f"call_{self.s.turn}_{self.s.step}_unmatched_{len(self.outcomes)}"

    def _call(self, body: Any) -> Reply:
        if not isinstance(body, dict):
            return self._error(400, "a tool call is a JSON object")
        name, args = body.get("name"), body.get("arguments")
        with self.lock:
            if not self.open:
                return self._error(409, "searchbox: no turn is in progress; tools cannot be called now")
            if name not in self.channel_names:
                return Reply(200, {"ok": False, "text": f"Error: {str(name)[:100]!r} is not one of the run's dataroom tools "
                                                        f"({', '.join(sorted(self.channel_names)) or 'none'})"})
            call_id = self._match(str(name), args)
            info = self.calls.get(call_id) or {}
            turn, step = self.s.turn, int(info.get("step", self.s.step))
            self.running.add(call_id)
        return run_channel_call(self, name, args, call_id, info.get("arguments"), turn, step, lambda: self.running.discard(call_id))

    # ---- bookkeeping --------------------------------------------------------------------------------------
    def _event(self, kind: str, **data: Any) -> None:
        self.rec.event(kind, self.s.turn, **data)

    def _checkpoint(self) -> None:
        from ..state import dump

        self.s.logged_tools = sorted(self.logged)
        self.rec.checkpoint({"harness": "claude-code", "version": STATE_VERSION, "state": dump(self.s)})

    def _update_record(self, stop: str, detail: str) -> None:
        r, s = self.rec.record, self.s
        self.acct.settle(r, s, self.rec.calls, stop, detail)
        claimed = {"prompt": s.claimed_usage.get("input_tokens", 0) + s.claimed_usage.get("cache_read_input_tokens", 0),
                   "completion": s.claimed_usage.get("output_tokens", 0)}
        forwarded = {"prompt": s.agent_usage.prompt, "completion": s.agent_usage.completion}
        r.harness = {
            "kind": "claude-code", "claude_code_version": self.cc.version, "node": self.cc.node_version, "session_id": s.session_id,
            "startup_s": round(s.startup_s, 3), "first_prompt_tokens": s.first_prompt_tokens, "system_prompt_chars": s.system_chars,
            "context_window": self.ctx.context_window, "server_renders_tools": s.server_renders_tools, "side_calls": s.side_calls,
            "withheld_answers": s.withheld, "results": s.results, "refused_paths": list(s.refused_paths),
            # Claude Code's own sum of usage (its result records) beside the channel's: they agree unless something
            # called the model past it (its results cover whole turns only: a turn cut by a stop may have none)
            "usage_check": {"forwarder": forwarded, "claude_code": claimed, "agree": claimed == forwarded}, "usage_agree": claimed == forwarded,
            "channel_requests": self.channel.requests if self.channel else 0, "channel_refused": self.channel.refused if self.channel else 0,
            "channel_strangers": self.channel.strangers if self.channel else 0,
            "box_killed": list(self.box.killed) if self.box else [],
        }


def restore(checkpoint: dict) -> ClaudeCodeState:
    from ..state import load

    if checkpoint.get("version") != STATE_VERSION:
        raise SearchboxError(f"cannot resume: claude-code checkpoint version {checkpoint.get('version')} (expected {STATE_VERSION})")
    try:
        state = load(ClaudeCodeState, checkpoint["state"])
    except (KeyError, ValueError, TypeError) as exc:
        raise SearchboxError(f"cannot resume: the checkpoint does not hold a claude-code state ({exc})") from exc
    if state.turn > 0 and not (SESSION_ID.match(state.session_id) and re.fullmatch(r"projects/[^/]+/[0-9a-f-]+\.jsonl", state.session_file)):
        raise SearchboxError(f"cannot resume: the claude-code checkpoint of turn {state.turn} names no session of Claude Code's")
    return state
