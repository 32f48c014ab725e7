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

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ...corpus import safefs
from ...model.llm import Usage
from ...paths import atomic_write
from ...tools import ToolsetState
from ..accounting import Ledger
from ..base import Stop
from ..channel import Channel, Reply, Routes, error
from ..cli_run import SESSION_CAP, CliRun
from . import launch, wire
from .install import require_pi
from .rpc import PiGone, Rpc, wait_for

STATE_VERSION = 1
STARTUP_S = 300.0  # Pi's start (node loading ~170 MB of modules) on a busy machine
ABORT_S = 60.0  # for Pi to go idle after an abort
RETRY_WAIT_S = 5.0  # for Pi's own retry after an overflow compaction to start
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


class PiRun(CliRun):
    """One run of Pi over its RPC mode: Pi's commands on its stdin, its events on its stdout, its chat completions at
    the channel; the rest is CliRun's."""

    KIND = FOLDER = "pi"
    NAME = STATE_NAME = "Pi"
    INSIDE = launch.INSIDE
    State, STATE_VERSION, ABORT_S = PiState, STATE_VERSION, ABORT_S
    require = staticmethod(require_pi)

    def __init__(self, ctx, pi, state: Optional[PiState] = None):
        super().__init__(ctx, pi, state)
        self.prompt_id: Optional[str] = None
        self.session_missing: list[str] = []  # the session copies Pi had no file for (its record says so)

    def _stop_of(self, exc: BaseException) -> tuple[str, str]:
        if isinstance(exc, PiGone):
            return "tool_error", f"Pi exited: {exc}: {self._why_gone()}"
        return super()._stop_of(exc)

    # ---- Pi's process ---------------------------------------------------------------------------------
    def _send(self, text: str) -> None:
        self.prompt_id = self.rpc.send({"type": "prompt", "message": text})

    def _abort(self) -> None:
        self.rpc.send({"type": "abort"})

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

    def _start(self, session: Optional[bytes]) -> None:
        cfg, t0 = self.ctx.config, time.monotonic()
        agent = launch.agent_files(cfg, self.ctx.context_window)
        launch.write_agent_dir(self.folder / "agent", agent)
        self.channel = Channel(Routes(self._chat, self._tools, self._call), self._admit).start()
        self.box = launch.start(self.install, cfg, self.ctx.spec, self.folder, self.channel.path, self.ctx.toolset.ctx.sandbox_mode,
                                agent, session, self.ws.work)
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
        self._check_template("the server's chat template renders no tools: the model sees Pi's tool list in its system prompt "
                             "but not their schemas, and its replies are not parsed as tool calls")
        with self.lock:
            self._count_startup(took)
            self._event("pi_started", pi=self.install.version, node=self.install.node_version, startup_s=round(took, 3),
                        sandbox=self.ctx.toolset.ctx.sandbox_mode)

    def _exit_story(self) -> str:
        return why_gone(self.box.stderr_text(), self.box.proc.poll(), self.install.node_version)

    def _save_session(self, name: str) -> None:
        """Pi's session file, copied from its box's private folder into the run's pi/ (never through a link)."""
        view = self.box.private_views.get("session") if self.box is not None else None
        data = safefs.read_bytes(view, launch.SESSION_FILE, cap=SESSION_CAP) if view is not None else None
        if data is None:
            if name not in self.session_missing:
                self.session_missing.append(name)
            return
        atomic_write(self.folder / name, data)

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

    # ---- the channel: model calls (OpenAI's chat completions) ------------------------------------------
    def _chat(self, body: Any) -> Reply:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return error(400, "a chat request needs a list of messages")
        return self._model_call(body, wire.is_agent_call(body))

    def _upstream(self, body: dict, agent: bool) -> dict:
        self._log_seen(wire.system_of(body), wire.tool_messages(body))
        return wire.upstream(body, self.ctx.config.model.max_tokens)

    def _overflow(self, exc) -> Reply:
        """Pi's own overflow recovery (compact, retry once) takes it from here."""
        self.s.overflows += 1
        self._event("overflow", detail=str(exc)[:500])
        return error(400, str(exc)[:2000], "invalid_request_error")

    def _reply(self, body: dict, message: dict, resp) -> Reply:
        return Reply(200, events=wire.stream(message, resp, self.ctx.config.model.name))

    # ---- bookkeeping --------------------------------------------------------------------------------------
    def _about(self) -> dict:
        s, check = self.s, usage_check(self.folder / "session.jsonl", self.s)
        return {"kind": "pi", "pi_version": self.install.version, "node": self.install.node_version, "session": "pi/session.jsonl",
                **self._run_facts(), "compaction_calls": s.compaction_calls,
                "compaction_tokens": s.compaction_usage.prompt + s.compaction_usage.completion, "overflows": s.overflows,
                "withheld_answers": s.withheld, "usage_check": check, "usage_agree": check["agree"], **self._channel_facts(),
                "session_missing": list(self.session_missing)}


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


restore = PiRun.restore
