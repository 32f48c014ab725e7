"""Pi's run under the reference protocol: Pi's own loop and compaction, driven over RPC, accounted at the channel.

The protocol: the task is appended to Pi's system prompt (launch.task), the question is sent once, a turn is
one prompt to idle (Pi's agent_end, and the compaction Pi may run after it), a bare `Continue.` starts the next
turn while the budget lasts (force_budget) or the run stops after the first, and after each turn the backstop
fills ANSWER.md from the model's last own words unless the model wrote it.

Pi's model calls arrive at the channel (`_chat`, on the channel's threads). They go to the run's endpoint only,
through the same Accountant as the native loop: the run's and the turn's deadlines, usage (estimated and marked
when missing), llama.cpp timings, the token budget and the stop reasons. A stop decided there refuses Pi's call
(HTTP 409: Pi ends its turn, retrying nothing) and the main thread ends the turn or the run. Calls that carry
no tools are Pi compacting (counted apart: `compaction_calls`); an agent call is a *step* of the turn, so the
harness's step limit holds too. Every tool, Pi's built-in names too, reaches searchbox through the channel
(`_call`) and runs in the native loop's per-call box (work/ at launch.INSIDE there), never in Pi's box: tool
rows, evidence and the trace's tool results are what the harness ran and saw, never what Pi's events say (the
one row made without a run is a call Pi refused before it reached the channel, read from the request that
shows the model Pi's refusal). Every message reaches trace.jsonl in the canonical OpenAI shape: the system
prompt and tool results as Pi sent them to the model, the model's answers as the server gave them.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ...corpus import safefs
from ..agent import OVERFLOW_RX, backstop, record_turn, visible_text
from ...errors import BackendError, ModelError
from ...model.llm import Usage
from ...paths import atomic_write
from ...model.protocol import template_supports_tools
from ...record.record import ToolRow
from ...tools import Outcome, ToolsetState
from ...tools import sandbox
from ..accounting import Accountant, Clock, Ledger, stop_of
from ..base import CONTINUE, EndTurn, RunContext, Stop
from . import launch, wire
from ..channel import Channel, Reply, Routes, error
from ..channel_tools import run_channel_call
from .install import PiInstall
from .rpc import PiGone, Rpc, wait_for

STATE_VERSION = 1
STARTUP_S = 300.0  # Pi's start (node loading ~170 MB of modules) on a busy machine
ABORT_S = 60.0  # for Pi to go idle after an abort
RETRY_WAIT_S = 5.0  # for Pi's own retry after an overflow compaction to start
SESSION_CAP = 256 * 1024**2
RESULT_CAP = 2000  # characters of a failed tool's text kept in its row
ERROR_KEY = "searchbox_pi_error"  # the extension's JSON line on stderr for the error that ended Pi


@dataclass
class PiState:
    """Everything a Pi run changes that a resume needs (Pi's own state is its session file, copied beside it)."""

    ledger: Ledger = field(default_factory=Ledger)
    turn: int = 0
    step: int = 0  # agent model calls in the turn in progress
    continues: int = 0
    compactions: int = 0  # Pi's compactions that wrote a summary
    compaction_calls: int = 0  # model calls Pi made to compact
    compaction_usage: Usage = field(default_factory=Usage)
    overflows: int = 0  # requests the server refused as longer than its context (Pi recovers by compacting)
    withheld: int = 0  # billed answers kept from Pi because a stop came with them
    backstop_text: Optional[str] = None
    last_snapshot: Optional[str] = None
    answer_source: str = "none"
    last_text: str = ""  # the model's last own words in an agent call (what the backstop writes)
    logged_tools: list = field(default_factory=list)  # tool results already in the trace, by call id
    agent_usage: Usage = field(default_factory=Usage)  # billed usage of the agent answers Pi got: its session sums to this
    first_prompt_tokens: int = 0  # the first call's prompt: Pi's system prompt, its tools, the question
    server_renders_tools: bool = True  # the server's chat template shows the model tool schemas (llama-server /props)
    system_chars: int = 0
    startup_s: float = 0.0
    tools: ToolsetState = field(default_factory=ToolsetState)


class PiRun:
    """One run of Pi. `run()` always leaves complete logs and fills the run record, like the native loop."""

    def __init__(self, ctx: RunContext, pi: PiInstall, state: Optional[PiState] = None):
        self.ctx, self.h, self.pi = ctx, ctx.config.harness, pi
        self.rec, self.ws = ctx.recorder, ctx.workspace
        self.s = state or PiState(ledger=Ledger(clock=Clock(started=ctx.started)))
        # every request that got no usable answer (timed out, refused, retried) is in the trace with its time, as in the
        # native loop: the Accountant bills its seconds to model time and calls this
        self.acct = Accountant(self.h, self.s.ledger, on_failure=lambda failure: self._event("request_failed", step=self.s.step, **failure))
        ctx.toolset.state = self.s.tools
        # The model's tools run as the native loop's, with work/ where Pi's prompt says its cwd is
        ctx.toolset.ctx.inside = launch.INSIDE if ctx.toolset.ctx.sandbox_mode != "none" else None
        self.run_pi = self.ws.run_dir / "pi"
        self.lock = threading.RLock()  # the state, the ledger and the recorder, between the main thread and the channel's
        self.chat_lock = threading.Lock()  # one model call at a time
        self.tool_lock = threading.Lock()  # one dataroom tool call at a time (the toolset is not thread-safe)
        self.open = False  # a turn is in progress: Pi may call the model and the tools
        self.pending: Optional[BaseException] = None  # a stop or turn end the channel decided
        self.channel_names = {s["name"] for s in ctx.spec.harness["channel_tools"]}  # as keyed (launch.identity)
        self.logged: set[str] = set(self.s.logged_tools)
        self.calls: dict[str, dict] = {}  # call id -> name, arguments as sent, step (from the model's answers)
        self.outcomes: dict[str, Outcome] = {}  # call id -> the outcome of the tool the harness ran
        self.answered: dict[str, tuple[str, str]] = {}  # call id -> (tool, the text the channel answered Pi)
        self.rowed: set[str] = set()  # call ids with a tool row
        self.system_logged = False
        self.box = self.rpc = self.channel = None
        self.prompt_id: Optional[str] = None
        self.aborted, self.abort_by = False, 0.0
        self.watchdog_seen = 0
        self.session_note = ""

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
                self._event("resume", in_turn=False, step=0)
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
        except PiGone as exc:
            stop, detail = "tool_error", f"Pi exited: {exc}: {self._why_gone()}"
        except Exception as exc:
            stop, detail = stop_of(exc, self.acct.run_over())
            if not isinstance(exc, (Stop, ModelError, BackendError)):
                with self.lock:
                    self._event("error", traceback=traceback.format_exc())
        finally:
            with self.lock:
                self.open = False
            self._shutdown()
            if stop != "interrupted":  # Ctrl-C stops now; any other end waits for the call the server may still bill
                self._drain()
            if self.stats is not None and stop != "paused":
                self.stats.ended_by = self.stats.ended_by or "stop"
                self._end_turn(checkpoint=False)  # the last checkpoint (a turn's end) stays where a resume picks up
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
            raise Stop("paused")  # between turns: the checkpoint _end_turn wrote is where it resumes

    def _prompt(self, text: str) -> None:
        with self.lock:
            self._event("message", message={"role": "user", "content": text})
        self.prompt_id = self.rpc.send({"type": "prompt", "message": text})

    def _wait_idle(self) -> None:
        """Pi's events until it is idle: its agent run ended, and a compaction after it (if any) too."""
        agent_done, compacting, barrier, retry_by = False, False, None, None
        while True:
            record = self.rpc.next(0.25)
            self._check_live()
            if record is None:
                if retry_by is not None and time.monotonic() > retry_by:
                    retry_by, barrier = None, self.rpc.send({"type": "get_state"})  # Pi's retry never started
                continue
            kind = record.get("type")
            if kind == "closed":
                raise Stop("tool_error", f"Pi exited in turn {self.s.turn}: {self._why_gone()}")
            if kind == "response":
                if record.get("id") == self.prompt_id and not record.get("success"):
                    raise Stop("tool_error", f"Pi refused the prompt: {str(record.get('error'))[:300]}")
                if record.get("id") == barrier:
                    barrier = None
                    data = record.get("data") if isinstance(record.get("data"), dict) else {}
                    if agent_done and not compacting and not data.get("isStreaming") and not data.get("isCompacting"):
                        return
                continue
            self._handle(record)
            if kind == "agent_start":
                agent_done, retry_by = False, None
            elif kind == "agent_end":
                agent_done, barrier = True, self.rpc.send({"type": "get_state"})  # a compaction Pi starts now is before its answer
            elif kind == "compaction_start":
                compacting = True
            elif kind == "compaction_end":
                compacting = False
                if record.get("willRetry"):
                    agent_done, retry_by = False, time.monotonic() + RETRY_WAIT_S
                elif agent_done:
                    barrier = self.rpc.send({"type": "get_state"})

    def _check_live(self) -> None:
        """Between Pi's events: a stop the channel decided, the deadlines, a pause, the watchdog."""
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
            cut = EndTurn("paused")  # a pause cuts the turn; _after_turn then stops the run, resumable
        if cut is None:
            if self.aborted and self.abort_by < time.monotonic():
                raise Stop("tool_error", f"Pi did not stop within {ABORT_S:.0f}s of an abort")
            return
        if isinstance(cut, Stop):
            raise cut
        with self.lock:
            self.open = False
            if self.stats is not None:
                self.stats.ended_by = self.stats.ended_by or cut.ended_by
        if not self.aborted:
            self.aborted, self.abort_by = True, time.monotonic() + ABORT_S
            self.rpc.send({"type": "abort"})

    def _end_turn(self, checkpoint: bool = True) -> None:
        s = self.s
        with self.lock:
            self.open = False
            self._log_unsent_results()
            stats = self.acct.end_turn()
            stats.ended_by = stats.ended_by or "idle"
        live = self.box is not None and self.box.alive()
        answer = self._backstop(self.ws.work)  # the harness's tools write work/ on disk: Pi's box has none
        if live and checkpoint:
            self._persist("checkpoint-session.jsonl")  # Pi's session as of this checkpoint (work/ is on disk already)
        with self.lock:
            record_turn(self.rec, s, stats, answer)
            if checkpoint:
                self._checkpoint()

    def _backstop(self, root: Path) -> Optional[str]:
        """ANSWER.md's text, filled from the model's last own words when it wrote none (agent.backstop); a file the
        backstop writes belongs to the box's uid."""
        return backstop(root, self.s, self.s.last_text, written=_hand_over)

    def _start(self, session: Optional[bytes]) -> None:
        cfg, t0 = self.ctx.config, time.monotonic()
        agent = launch.agent_files(cfg, self.ctx.context_window)
        launch.write_agent_dir(self.run_pi / "agent", agent)
        self.channel = Channel(Routes(self._chat, self._tools, self._call), self._admit).start()
        self.box = launch.start(self.pi, cfg, self.ctx.spec, self.run_pi, self.channel.path, self.ctx.toolset.ctx.sandbox_mode, agent,
                                session, self.ws.work)
        self.rpc = Rpc(self.box.proc.stdin, self.box.proc.stdout)
        try:
            ident = self.rpc.send({"type": "get_state"})
            state = wait_for(self.rpc, ident, STARTUP_S, self._handle)
        except (PiGone, TimeoutError) as exc:
            raise Stop("tool_error", f"Pi did not start: {exc}: {self._why_gone()}") from exc
        data = state.get("data") if isinstance(state.get("data"), dict) else {}
        model = data.get("model") if isinstance(data.get("model"), dict) else {}
        if not state.get("success") or model.get("provider") != launch.PROVIDER:
            raise Stop("tool_error", f"Pi started without searchbox's model: {json.dumps(state)[:300]}")
        took = time.monotonic() - t0
        get_json = getattr(self.ctx.client, "get_json", None)
        # Pi calls tools the OpenAI way only; a template that renders no tools (SmolLM2's) never shows the model their
        # schemas, where the native loop falls back to its constrained-JSON protocol. The record says which it was.
        self.s.server_renders_tools = template_supports_tools(get_json("/props") if get_json else None)
        with self.lock:
            if not self.s.server_renders_tools:
                self._event("warning", detail="the server's chat template renders no tools: the model sees Pi's tool list in "
                                              "its system prompt but not their schemas, and its replies are not parsed as tool calls")
            self.s.startup_s += took
            self.s.ledger.cum.setup_s += took
            self._event("pi_started", pi=self.pi.version, node=self.pi.node_version, startup_s=round(took, 3),
                        sandbox=self.ctx.toolset.ctx.sandbox_mode)

    def _admit(self, peer) -> bool:
        """The channel serves Pi's box and nothing else: a process of its pid namespace (sandbox=none: Pi's own tree)."""
        box = self.box
        return box is not None and box.holds(peer.pid)

    def _persist(self, session_file: str) -> None:
        """Pi's session, copied beside the run's record (work/ is on disk already: the harness's tools wrote it)."""
        self._save_session(session_file)

    def _drain(self) -> None:
        """Wait for a model call still in flight (Pi died or was killed mid-call): what the server bills is the run's."""
        m = self.ctx.config.model
        if self.chat_lock.acquire(timeout=m.timeout_s * (m.retries + 1) + 10):
            self.chat_lock.release()
        else:
            with self.lock:
                self._event("warning", detail="a model call was still in flight when the run's record was written")

    def _shutdown(self) -> None:
        if self.box is not None:
            self.box.kill()
            self._persist("session.jsonl")
            stderr = self.box.stderr_text()
            if stderr.strip():
                atomic_write(self.run_pi / "stderr.log", stderr)
            self.box.release()
        if self.rpc is not None:
            self.rpc.close()
        if self.channel is not None:
            self.channel.close()

    def _why_gone(self) -> str:
        """Pi's death by its cause: the watchdog's kill, else Pi's own last error (the extension's JSON line), else
        how it exited and the last line of its stderr that is not Node's version trailer."""
        if self.box is None:
            return ""
        if self.box.killed:
            return self.box.killed[-1]
        with contextlib.suppress(Exception):
            self.box.proc.wait(timeout=2)
        return why_gone(self.box.stderr_text(), self.box.proc.poll(), self.pi.node_version)[:500]

    def _save_session(self, name: str) -> None:
        """Pi's session file, copied from its box's private folder into the run's pi/ (never through a link)."""
        view = self.box.private_views.get("session") if self.box is not None else None
        data = safefs.read_bytes(view, launch.SESSION_FILE, cap=SESSION_CAP) if view is not None else None
        if data is None:
            self.session_note = f"no session file to copy as {name}"
            return
        atomic_write(self.run_pi / name, data)

    # ---- Pi's events ----------------------------------------------------------------------------------
    def _handle(self, record: dict) -> None:
        kind = record.get("type")  # tool_execution_* are not read: the harness ran the tools, its rows say what ran
        if kind == "compaction_end":
            result = record.get("result") if isinstance(record.get("result"), dict) else None
            with self.lock:
                if result is not None:
                    self.s.compactions += 1
                    if self.stats is not None:
                        self.stats.compactions += 1
                elif record.get("reason") == "overflow" and not record.get("willRetry") and not record.get("aborted"):
                    # The server refused the conversation as too long and Pi's own recovery (compact, retry once) failed:
                    # this model, window and budget cannot go on. A result, as the native loop's context_exhausted.
                    self.pending = Stop("context_exhausted", f"the server refused Pi's request as longer than its context, "
                                                             f"and Pi's compaction did not recover: {str(record.get('errorMessage'))[:300]}")
                self._event("compaction", reason=record.get("reason"), tokens_before=(result or {}).get("tokensBefore"),
                            summary_chars=len(str((result or {}).get("summary") or "")), aborted=bool(record.get("aborted")),
                            will_retry=bool(record.get("willRetry")), error=record.get("errorMessage"))
        elif kind == "message_end":
            message = record.get("message") if isinstance(record.get("message"), dict) else {}
            if message.get("role") == "assistant" and message.get("stopReason") in ("error", "aborted"):
                with self.lock:
                    self._event("pi_message_end", stop_reason=message.get("stopReason"), error=str(message.get("errorMessage") or "")[:500])
        elif kind in ("extension_error", "auto_retry_start", "auto_retry_end"):
            with self.lock:
                self._event(f"pi_{kind}", detail=json.dumps(record, default=str)[:2000])

    def _refused_row(self, call_id: str, text: str) -> None:
        """A row for a call the model made that Pi refused before it reached the channel (a tool the run does not
        have, arguments that are no JSON object or fail the catalog's schema): the model's call as the server gave
        it, Pi's refusal as the request shows it to the model."""
        info = self.calls.get(call_id)
        if info is None or call_id in self.rowed:
            return
        self.rowed.add(call_id)
        self.rec.tool_call(ToolRow(self.s.turn, int(info["step"]), call_id, info["name"], info["arguments"], [], [], 0.0, 0.0, False,
                                   text[:RESULT_CAP], len(text), "", True))
        counters = self.stats if self.stats is not None else self.s.ledger.cum
        counters.tool_calls += 1
        counters.malformed_calls += 1

    def _log_unsent_results(self) -> None:
        """Tool results the model never got (the turn or the run ended first): into the trace as the channel answered."""
        for call_id, (name, text) in self.answered.items():
            if call_id not in self.logged:
                self._log_tool({"role": "tool", "tool_call_id": call_id, "content": text}, name)

    # ---- the channel: model calls ---------------------------------------------------------------------
    def _chat(self, body: Any) -> Reply:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return error(400, "a chat request needs a list of messages")
        agent = wire.is_agent_call(body)
        with self.chat_lock:
            with self.lock:
                if not self.open:
                    return error(409, "searchbox: no turn is in progress; the model cannot be called now")
                if agent and self.s.step >= self.h.max_steps_per_turn:
                    return self._refuse(EndTurn("max_steps"), f"this turn reached its limit of {self.h.max_steps_per_turn} model calls")
                try:
                    self.acct.check_deadlines()
                except (EndTurn, Stop) as cut:
                    return self._refuse(cut, "the turn or the run is past its deadline")
                self._log_request(body)
                payload = wire.upstream(body, self.ctx.config.model.max_tokens)
                before = self.stats.context_tokens if self.stats is not None else 0
            try:
                resp = self.acct.chat(self.ctx.client, payload)
            except (EndTurn, Stop) as cut:
                with self.lock:
                    return self._refuse(cut, "the turn or the run passed its deadline during the call")
            except ModelError as exc:
                with self.lock:
                    if OVERFLOW_RX.search(str(exc)):  # Pi's own overflow recovery (compact, retry once) takes it from here
                        self.s.overflows += 1
                        self._event("overflow", detail=str(exc)[:500])
                        return error(400, str(exc)[:2000], "invalid_request_error")
                    return self._refuse(Stop(*stop_of(exc, self.acct.run_over())), "the model endpoint failed", 502)
            with self.lock:
                return self._answer(body, payload, resp, agent, before)

    def _answer(self, body: dict, payload: dict, resp, agent: bool, before: int) -> Reply:
        s = self.s
        usage = self.acct.account(resp, payload)
        if not agent and self.stats is not None:
            self.stats.context_tokens = before  # a compaction call says nothing of the conversation's size
        message = wire.assistant(resp.message, f"call_{s.turn}_{s.step + 1}") if not resp.malformed else {"role": "assistant", "content": None}
        if agent:
            s.step += 1
            s.first_prompt_tokens = s.first_prompt_tokens or usage.prompt
            for call in message.get("tool_calls") or []:
                self.calls[call["id"]] = {"name": call["function"]["name"], "arguments": call["function"]["arguments"], "step": s.step}
            said = visible_text(message.get("content") or "")
            if said:
                s.last_text = said
        else:
            s.compaction_calls += 1
            for part, value in (("prompt", usage.prompt), ("completion", usage.completion), ("cached", usage.cached)):
                setattr(s.compaction_usage, part, getattr(s.compaction_usage, part) + value)
        self._event("message", message=message, purpose="agent" if agent else "compaction", step=s.step if agent else None,
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
            return error(502, f"the model's reply could not be taken: {resp.malformed}")
        if agent and not usage.estimated:
            for part in ("prompt", "completion", "cached"):
                setattr(s.agent_usage, part, getattr(s.agent_usage, part) + getattr(usage, part))
        return Reply(200, events=wire.stream(message, resp, self.ctx.config.model.name))

    def _refuse(self, cut: BaseException, why: str, status: int = 409) -> Reply:
        """The channel's side of a stop or a turn's end: Pi's call is refused, the main thread ends the turn or run."""
        self.open = False
        if not isinstance(self.pending, Stop):
            self.pending = cut
        return error(status, f"searchbox: {why}")

    def _log_request(self, body: dict) -> None:
        """What the request shows the model that the trace lacks: Pi's system prompt (once), tool results."""
        system = wire.system_of(body)
        if system is not None and not self.system_logged:
            self.system_logged = True
            self.s.system_chars = len(system)
            self._event("message", message={"role": "system", "content": system}, harness="pi")
        for message in wire.tool_messages(body):
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

    # ---- the channel: dataroom tools --------------------------------------------------------------------
    def _tools(self) -> Reply:
        return Reply(200, self.ctx.spec.harness["channel_tools"])

    def _call(self, body: Any) -> Reply:
        if not isinstance(body, dict):
            return error(400, "a tool call is a JSON object")
        name, call_id, args = body.get("name"), str(body.get("id") or ""), body.get("arguments")
        with self.lock:
            if not self.open:
                return error(409, "searchbox: no turn is in progress; tools cannot be called now")
            if name not in self.channel_names:
                return Reply(200, {"ok": False, "text": f"Error: {str(name)[:100]!r} is not one of the run's dataroom tools "
                                                        f"({', '.join(sorted(self.channel_names)) or 'none'})"})
            info = self.calls.get(call_id) or {}
            turn, step = self.s.turn, int(info.get("step", self.s.step))
        return run_channel_call(self, name, args, call_id, info.get("arguments"), turn, step)

    # ---- bookkeeping --------------------------------------------------------------------------------------
    def _event(self, kind: str, **data: Any) -> None:
        self.rec.event(kind, self.s.turn, **data)

    def _checkpoint(self) -> None:
        from ..state import dump

        self.s.logged_tools = sorted(self.logged)
        self.rec.checkpoint({"harness": "pi", "version": STATE_VERSION, "state": dump(self.s)})

    def _update_record(self, stop: str, detail: str) -> None:
        r, s = self.rec.record, self.s
        self.acct.settle(r, s, self.rec.calls, stop, detail)
        r.harness = {
            "kind": "pi", "pi_version": self.pi.version, "node": self.pi.node_version, "session": "pi/session.jsonl",
            "startup_s": round(s.startup_s, 3), "first_prompt_tokens": s.first_prompt_tokens, "system_prompt_chars": s.system_chars,
            "context_window": self.ctx.context_window, "server_renders_tools": s.server_renders_tools, "compaction_calls": s.compaction_calls,
            "compaction_tokens": s.compaction_usage.prompt + s.compaction_usage.completion, "overflows": s.overflows,
            "withheld_answers": s.withheld, "usage_check": (check := usage_check(self.run_pi / "session.jsonl", s)),
            "usage_agree": check["agree"],
            "channel_requests": self.channel.requests if self.channel else 0, "channel_refused": self.channel.refused if self.channel else 0,
            "channel_strangers": self.channel.strangers if self.channel else 0,
            "box_killed": list(self.box.killed) if self.box else [],
        }


def why_gone(stderr: str, exit_code: Optional[int], node_version: str) -> str:
    """Why Pi ended, from its stderr: the extension's last JSON error record (Pi's own error: ENOSPC, EROFS, ...);
    without one (a signal, a native abort), how it exited and its last line that is not Node's version trailer."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in reversed(lines):
        if not line.startswith("{") or ERROR_KEY not in line:
            continue
        try:
            record = json.loads(line).get(ERROR_KEY)
        except (ValueError, RecursionError, AttributeError):
            continue
        if isinstance(record, dict):
            code = f" [{record.get('code')}]" if record.get("code") else ""
            return f"{record.get('name')}{code}: {record.get('message')} ({record.get('origin')})"
    trailer = {f"Node.js {node_version}", f"Node.js v{node_version.lstrip('v')}"}
    said = [line for line in lines if line not in trailer]
    how = f"killed by signal {-exit_code}" if isinstance(exit_code, int) and exit_code < 0 else f"exit {exit_code}"
    return f"{how}: {said[-1]}" if said else how


def usage_check(session: Path, s: PiState) -> dict:
    """Pi's session file's own sum of usage beside the forwarder's (the billed agent answers Pi got): they agree unless
    something in the box called the model past Pi, or the session file was changed (the model can write it)."""
    forwarded = {"prompt": s.agent_usage.prompt, "completion": s.agent_usage.completion}
    summed = {"prompt": 0, "completion": 0, "answers": 0}
    try:
        text = session.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {"forwarder": forwarded, "session": None, "agree": False, "note": "no session file"}
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get("message") if isinstance(entry, dict) and entry.get("type") == "message" else None
        usage = message.get("usage") if isinstance(message, dict) and message.get("role") == "assistant" else None
        if not isinstance(usage, dict):
            continue
        numbers = [usage.get(k) if isinstance(usage.get(k), int) else 0 for k in ("input", "cacheRead", "cacheWrite", "output")]
        summed["prompt"] += sum(numbers[:3])
        summed["completion"] += numbers[3]
        summed["answers"] += 1
    agree = summed["prompt"] == forwarded["prompt"] and summed["completion"] == forwarded["completion"]
    return {"forwarder": forwarded, "session": summed, "agree": agree}


def _hand_over(root: Path, rel: str) -> None:
    """A file the harness wrote where the box works belongs to the box's uid (as the quota's copy-in makes it)."""
    import os

    if os.geteuid() != 0:
        return
    parts = safefs.parts_of(rel)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts[:-1]:
            nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.chown(name, sandbox.SANDBOX_UID, sandbox.SANDBOX_UID, dir_fd=fd, follow_symlinks=False)
            os.close(fd)
            fd = nxt
        os.chown(parts[-1], sandbox.SANDBOX_UID, sandbox.SANDBOX_UID, dir_fd=fd, follow_symlinks=False)
    finally:
        os.close(fd)


def restore(checkpoint: dict) -> PiState:
    from ...errors import SearchboxError
    from ..state import load

    if checkpoint.get("version") != STATE_VERSION:
        raise SearchboxError(f"cannot resume: Pi checkpoint version {checkpoint.get('version')} (expected {STATE_VERSION})")
    try:
        return load(PiState, checkpoint["state"])
    except (KeyError, ValueError, TypeError) as exc:
        raise SearchboxError(f"cannot resume: the checkpoint does not hold a Pi state ({exc})") from exc
