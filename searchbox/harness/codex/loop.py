"""Codex's run: `codex exec --json` once per turn inside the run's box, its model calls accounted at the channel.

The protocol (as Pi's): the task joins Codex's prompt (`developer_instructions`, launch.task), the question is the
first turn's prompt, a turn is one prompt to idle (codex exec runs one turn and exits), a bare `Continue.` starts
the next turn (`codex exec resume <thread> Continue.`) while the budget lasts (force_budget) or the run stops after
the first, and after each turn the backstop fills ANSWER.md from the model's last own words unless the model wrote it.

Codex's model calls arrive at the channel as Responses API requests (`_responses`, on the channel's threads),
translated to chat requests (wire.py) and sent to the run's endpoint only, through the same Accountant as the native
loop. A stop decided there refuses Codex's call (HTTP 409; Codex retries nothing: its provider has no retries) and the
main thread kills the turn's box and ends the turn or the run. Every tool call reaches searchbox through the MCP
bridge (`_call`, with no id): it is matched by name and arguments to a function call the model made in the turn
and runs in the native loop's per-call box. Tool rows, evidence and the trace's tool results are what the harness
ran, never what Codex's JSON events say (they are read only for the session id and the turn's end); the one row
made without a run is a call Codex refused before it reached the channel (a tool the run lacks, arguments that are
no JSON object), read from the request that shows the model Codex's refusal.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ...errors import BackendError, ModelError, SearchboxError
from ...model.llm import Usage
from ...model.protocol import template_supports_tools
from ...paths import atomic_write
from ...record.record import ToolRow
from ...tools import Outcome, ToolsetState
from ..accounting import Accountant, Clock, Ledger, stop_of
from ..agent import OVERFLOW_RX, backstop, record_turn, visible_text
from ..base import CONTINUE, EndTurn, RunContext, Stop
from ..channel import Channel, Reply, Routes, error
from ..channel_tools import run_channel_call
from ..npm import NpmInstall
from ..pi.rpc import Rpc
from ..pi.wire import assistant
from . import launch, wire

STATE_VERSION = 1
ABORT_S = 30.0  # for codex to exit after its turn's end
RESULT_CAP = 2000  # characters of a refused call's text kept in its row
CHECKPOINT_HOME = "checkpoint-home"  # CODEX_HOME as of the last checkpoint (its sessions), beside the live one


@dataclass
class CodexState:
    """Everything a Codex run changes that a resume needs (Codex's own state is CODEX_HOME, copied at each checkpoint)."""

    ledger: Ledger = field(default_factory=Ledger)
    turn: int = 0
    step: int = 0  # agent model calls in the turn in progress
    continues: int = 0
    thread: str = ""  # Codex's session id (its thread.started event): what `codex exec resume` continues
    compactions: int = 0  # Codex's compactions (each one model call without tools: its summary)
    compaction_calls: int = 0  # model calls without tools: Codex compacting
    compaction_usage: Usage = field(default_factory=Usage)
    overflows: int = 0
    withheld: int = 0  # billed answers kept from Codex because a stop came with them
    unmatched_calls: int = 0  # bridge calls that matched no function call of the model's: refused, never run
    exits: list = field(default_factory=list)  # codex exec's exit status, per turn
    backstop_text: Optional[str] = None
    last_snapshot: Optional[str] = None
    answer_source: str = "none"
    last_text: str = ""
    logged_tools: list = field(default_factory=list)
    dropped_tools: list = field(default_factory=list)  # Codex's own tools the translation left out (names)
    dropped_items: dict = field(default_factory=dict)  # input item types the translation left out (reasoning, ...)
    first_prompt_tokens: int = 0
    server_renders_tools: bool = True
    system_chars: int = 0
    startup_s: float = 0.0
    tools: ToolsetState = field(default_factory=ToolsetState)


class CodexRun:
    """One run of Codex. `run()` always leaves complete logs and fills the run record, like the native loop."""

    def __init__(self, ctx: RunContext, codex: NpmInstall, state: Optional[CodexState] = None):
        self.ctx, self.h, self.codex = ctx, ctx.config.harness, codex
        self.rec, self.ws = ctx.recorder, ctx.workspace
        self.s = state or CodexState(ledger=Ledger(clock=Clock(started=ctx.started)))
        self.acct = Accountant(self.h, self.s.ledger, on_failure=lambda failure: self._event("request_failed", step=self.s.step, **failure))
        ctx.toolset.state = self.s.tools
        ctx.toolset.ctx.inside = launch.INSIDE
        self.run_codex = self.ws.run_dir / "codex"
        self.lock = threading.RLock()
        self.chat_lock = threading.Lock()
        self.tool_lock = threading.Lock()
        self.open = False
        self.pending: Optional[BaseException] = None
        self.channel_names = {s["name"] for s in ctx.spec.harness["channel_tools"]}
        self.logged: set[str] = set(self.s.logged_tools)
        self.calls: dict[str, dict] = {}  # call id -> name, arguments as sent, parsed arguments, step
        self.outcomes: dict[str, Outcome] = {}
        self.answered: dict[str, tuple[str, str]] = {}
        self.rowed: set[str] = set()
        self.system_logged = False
        self.box = self.out = self.channel = None
        self.killed_turn = False
        self.watchdog_seen = 0
        self.config = b""

    @property
    def stats(self):
        return self.s.ledger.turn

    # ---- the protocol -----------------------------------------------------------------------------
    def run(self, resumed: bool = False) -> None:
        stop, detail = "interrupted", ""
        try:
            self._start()
            if resumed:
                self.rec.truncate(self.s.turn, (self.s.turn + 1, 0))
                self._event("resume", in_turn=False, step=0)
            if self.s.turn == 0:
                self._checkpoint()
                self._begin_turn()
                prompt = self.ctx.question
            else:
                self._after_turn()
                self.s.continues += 1
                self._begin_turn()
                prompt = CONTINUE
            while True:
                self._turn(prompt)
                self._end_turn()
                self._after_turn()
                self.s.continues += 1
                self._begin_turn()
                prompt = CONTINUE
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
            self._kill_box()
            if stop != "interrupted":
                self._drain()
            if self.channel is not None:
                self.channel.close()
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
            self.pending, self.open = None, True

    def _after_turn(self) -> None:
        self.acct.check_budget_after_turn(self.s.turn)
        if self.ctx.should_pause():
            raise Stop("paused")

    def _start(self) -> None:
        cfg = self.ctx.config
        if self.ctx.toolset.ctx.sandbox_mode == "none":
            raise Stop("tool_error", "harness=codex runs only in the box: without its network namespace the loopback forwarder "
                                     "would be open to every local user (harness.sandbox=none is refused)")
        self.config = launch.config_toml(cfg, self.ctx.spec, self.ctx.context_window, self.codex.node)
        atomic_write(self.run_codex / "config.toml", self.config.decode("utf-8"))
        self.channel = Channel(Routes(self._refuse_chat, self._tools, self._call, more={"/v1/responses": self._responses}),
                               self._admit).start()
        get_json = getattr(self.ctx.client, "get_json", None)
        self.s.server_renders_tools = template_supports_tools(get_json("/props") if get_json else None)
        if not self.s.server_renders_tools:
            self._event("warning", detail="the server's chat template renders no tools: the model sees no tool schemas, and its "
                                          "replies are not parsed as tool calls")

    def _turn(self, prompt: str) -> None:
        """One `codex exec` in a box of its own, until it exits or the turn is cut (the box killed)."""
        self._event("message", message={"role": "user", "content": prompt})
        t0 = time.monotonic()
        self.killed_turn = False
        self.box = launch.start(self.codex, self.ctx.config, self.run_codex, self.channel.path, self.ctx.toolset.ctx.sandbox_mode,
                                self.config, prompt, self.s.thread)
        self.watchdog_seen = 0
        self.out = Rpc(self.box.proc.stdin, self.box.proc.stdout)
        took = time.monotonic() - t0
        with self.lock:
            self.s.startup_s += took
            self.s.ledger.cum.setup_s += took
        code, said, done_by, completed = None, "", None, False
        while True:
            record = self.out.next(0.25)
            self._check_live()
            if record is None:
                if done_by is not None and time.monotonic() > done_by:  # its turn is over but it does not exit: end it
                    self._event("warning", detail=f"Codex did not exit within {ABORT_S:.0f}s of its turn's end; its box was killed")
                    break
                continue
            kind = record.get("type")
            if kind == "closed":
                break
            if kind == "thread.started" and not self.s.thread and isinstance(record.get("thread_id"), str):
                self.s.thread = record["thread_id"][:200]
            elif kind in ("turn.failed", "error"):
                said = json.dumps(record.get("error") or record.get("message"), default=str)[:500]
            completed = completed or kind == "turn.completed"
            if kind in ("turn.completed", "turn.failed") and done_by is None:
                done_by = time.monotonic() + ABORT_S
            elif kind == launch.EXIT:
                code = record.get("code") if isinstance(record.get("code"), int) else -1
                break
        self._kill_box()
        with self.lock:
            self.s.exits.append(code)
            self._event("codex_exit", code=code, error=said or None, killed=self.killed_turn)
            pending, self.pending = self.pending, None
            self.open = False
        if isinstance(pending, Stop):
            raise pending
        if isinstance(pending, EndTurn) or self.killed_turn:
            if self.stats is not None and pending is not None:
                self.stats.ended_by = self.stats.ended_by or pending.ended_by
            return
        if code != 0 and not (code is None and completed):
            why = self.box.killed[-1] if self.box is not None and self.box.killed else said or self._stderr_tail()
            raise Stop("tool_error", f"Codex exited in turn {self.s.turn} ({'no exit status: its box ended' if code is None else f'exit {code}'}): {why}")
        if not self.s.thread:
            raise Stop("tool_error", "Codex ran a turn without a session id (no thread.started event): it cannot be continued")

    def _check_live(self) -> None:
        """Between Codex's events: a stop the channel decided, the deadlines, a pause, the watchdog."""
        with self.lock:
            pending = self.pending
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
        if cut is None:
            return
        with self.lock:
            self.open = False
            if self.pending is None:
                self.pending = cut
        if not self.killed_turn:
            self.killed_turn = True  # codex exec has no abort: the turn ends with its box (its session keeps what it wrote)
            self._kill_box()

    def _kill_box(self) -> None:
        box = self.box
        if box is None or getattr(box, "_gone", False):
            return
        box.kill()
        stderr = box.stderr_text()
        if stderr.strip():
            with (self.run_codex / "stderr.log").open("a", encoding="utf-8") as f:
                f.write(f"--- turn {self.s.turn}\n{stderr}")
        box.release()
        if self.out is not None:
            self.out.close()

    def _stderr_tail(self) -> str:
        lines = [line for line in (self.box.stderr_text() if self.box else "").splitlines() if line.strip()]
        return lines[-1][:300] if lines else "no output"

    def _end_turn(self, checkpoint: bool = True) -> None:
        s = self.s
        with self.lock:
            self.open = False
            self._log_unsent_results()
            stats = self.acct.end_turn()
            stats.ended_by = stats.ended_by or "idle"
        answer = backstop(self.ws.work, s, s.last_text)
        if checkpoint:
            self._save_home()
        with self.lock:
            record_turn(self.rec, s, stats, answer)
            if checkpoint:
                self._checkpoint()

    def _save_home(self) -> None:
        """CODEX_HOME (its session) as of this checkpoint, so a resume continues the session the checkpoint knows."""
        live, saved = self.run_codex / "box" / "home", self.run_codex / CHECKPOINT_HOME
        if saved.exists():
            shutil.rmtree(saved)
        if live.is_dir():
            shutil.copytree(live, saved, symlinks=True)

    def _admit(self, peer) -> bool:
        box = self.box
        return box is not None and box.holds(peer.pid)

    def _drain(self) -> None:
        m = self.ctx.config.model
        if self.chat_lock.acquire(timeout=m.timeout_s * (m.retries + 1) + 10):
            self.chat_lock.release()
        else:
            with self.lock:
                self._event("warning", detail="a model call was still in flight when the run's record was written")

    # ---- the channel: model calls ---------------------------------------------------------------------
    def _refuse_chat(self, body: Any) -> Reply:
        return error(404, "POST /v1/chat/completions: Codex's provider speaks the Responses API (/v1/responses)")

    def _responses(self, body: Any) -> Reply:
        if not isinstance(body, dict) or not isinstance(body.get("input"), (list, str)):
            return error(400, "a Responses request needs its input")
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
                got = wire.upstream(body, self.ctx.config.model.max_tokens, self.ctx.spec.today)
                offered = {t["function"]["name"] for t in got.payload.get("tools") or []}
                if agent and offered != self.channel_names:  # the bridge did not start, or Codex renamed what it serves
                    missing = sorted(self.channel_names - offered) or sorted(offered - self.channel_names)
                    return self._refuse(Stop("tool_error", f"Codex offered the model other tools than the run's ({', '.join(missing)[:300]}): "
                                                           "its MCP bridge did not start or did not list them"), "the run's tools are missing")
                self._log_request(got)
                payload = got.payload
                before = self.stats.context_tokens if self.stats is not None else 0
            try:
                resp = self.acct.chat(self.ctx.client, payload)
            except (EndTurn, Stop) as cut:
                with self.lock:
                    return self._refuse(cut, "the turn or the run passed its deadline during the call")
            except ModelError as exc:
                with self.lock:
                    if OVERFLOW_RX.search(str(exc)):
                        self.s.overflows += 1
                        self._event("overflow", detail=str(exc)[:500])
                        return self._refuse(Stop("context_exhausted", f"the server refused Codex's request as longer than its context: "
                                                                      f"{str(exc)[:300]}"), "the conversation is longer than the context", 400)
                    return self._refuse(Stop(*stop_of(exc, self.acct.run_over())), "the model endpoint failed", 502)
            with self.lock:
                return self._answer(resp, payload, agent, before)

    def _answer(self, resp, payload: dict, agent: bool, before: int) -> Reply:
        s = self.s
        usage = self.acct.account(resp, payload)
        if not agent and self.stats is not None:
            self.stats.context_tokens = before
        message = assistant(resp.message, f"call_{s.turn}_{s.step + 1}") if not resp.malformed else {"role": "assistant", "content": None}
        if agent:
            s.step += 1
            s.first_prompt_tokens = s.first_prompt_tokens or usage.prompt
            for call in message.get("tool_calls") or []:
                self.calls[call["id"]] = {"name": call["function"]["name"], "arguments": call["function"]["arguments"],
                                          "parsed": _parsed(call["function"]["arguments"]), "step": s.step, "turn": s.turn}
            said = visible_text(message.get("content") or "")
            if said and self.open:  # an answer that came after the turn ended (Codex killed or dead) is billed, never read
                s.last_text = said
        else:
            s.compaction_calls += 1
            s.compactions += 1
            if self.stats is not None:
                self.stats.compactions += 1
            for part in ("prompt", "completion", "cached"):
                setattr(s.compaction_usage, part, getattr(s.compaction_usage, part) + getattr(usage, part))
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
        return Reply(200, events=wire.events(message, resp, self.ctx.config.model.name, self.channel_names, f"{s.turn}_{s.step}"),
                     done=False)

    def _refuse(self, cut: BaseException, why: str, status: int = 409) -> Reply:
        self.open = False
        if not isinstance(self.pending, Stop):
            self.pending = cut
        return error(status, f"searchbox: {why}")

    def _log_request(self, got: wire.Translation) -> None:
        """What the request shows the model that the trace lacks: Codex's system prompt (once), tool results, and
        what the translation left out."""
        system = wire.system_of(got.payload)
        if system is not None and not self.system_logged:
            self.system_logged = True
            self.s.system_chars = len(system)
            self._event("message", message={"role": "system", "content": system}, harness="codex")
        for name in got.dropped_tools:
            if name not in self.s.dropped_tools:
                self.s.dropped_tools.append(name)
        for kind, n in got.dropped_items.items():
            self.s.dropped_items[kind] = self.s.dropped_items.get(kind, 0) + n
        for message in (m for m in got.payload["messages"] if m["role"] == "tool"):
            call_id = message["tool_call_id"]
            if call_id not in self.logged:
                if call_id not in self.outcomes:
                    self._refused_row(call_id, message["content"])
                self._log_tool(message, (self.calls.get(call_id) or {}).get("name") or "")

    def _refused_row(self, call_id: str, text: str) -> None:
        info = self.calls.get(call_id)
        if info is None or call_id in self.rowed:
            return
        self.rowed.add(call_id)
        self.rec.tool_call(ToolRow(self.s.turn, int(info["step"]), call_id, info["name"], info["arguments"], [], [], 0.0, 0.0, False,
                                   text[:RESULT_CAP], len(text), "", True))
        counters = self.stats if self.stats is not None else self.s.ledger.cum
        counters.tool_calls += 1
        counters.malformed_calls += 1

    def _log_tool(self, message: dict, name: str) -> None:
        message = {**message, "name": name}
        out = self.outcomes.get(message["tool_call_id"])
        if out is not None and out.data is not None:
            message["data"] = out.data
        self.logged.add(message["tool_call_id"])
        self._event("message", message=message)

    def _log_unsent_results(self) -> None:
        for call_id, (name, text) in self.answered.items():
            if call_id not in self.logged:
                self._log_tool({"role": "tool", "tool_call_id": call_id, "content": text}, name)

    # ---- the channel: the run's tools (over the MCP bridge) ---------------------------------------------
    def _tools(self) -> Reply:
        return Reply(200, self.ctx.spec.harness["channel_tools"])

    def _match(self, name: Any, args: Any) -> Optional[str]:
        """The model's function call of this turn this bridge call is (the bridge sends no id): the first one not yet
        run with the same name and the same arguments."""
        for call_id, info in self.calls.items():
            if call_id not in self.rowed and info["name"] == name and info["parsed"] == args and info["turn"] == self.s.turn:
                return call_id
        return None

    def _call(self, body: Any) -> Reply:
        if not isinstance(body, dict):
            return error(400, "a tool call is a JSON object")
        name, args = body.get("name"), body.get("arguments")
        with self.lock:
            if not self.open:
                return error(409, "searchbox: no turn is in progress; tools cannot be called now")
            if name not in self.channel_names:
                return Reply(200, {"ok": False, "text": f"Error: {str(name)[:100]!r} is not one of the run's tools "
                                                        f"({', '.join(sorted(self.channel_names)) or 'none'})"})
            call_id = self._match(name, args)
            if call_id is None:  # nothing the model asked for: made up in the box, never run
                self.s.unmatched_calls += 1
                self._event("unmatched_call", name=str(name)[:100], arguments=json.dumps(args, default=str)[:2000])
                return Reply(200, {"ok": False, "text": "Error: this call matches no tool call of the model's in this turn"})
            self.rowed.add(call_id)
            info = self.calls[call_id]
            turn, step = self.s.turn, int(info["step"])
        return run_channel_call(self, name, args, call_id, info["arguments"], turn, step)

    # ---- bookkeeping --------------------------------------------------------------------------------------
    def _event(self, kind: str, **data: Any) -> None:
        self.rec.event(kind, self.s.turn, **data)

    def _checkpoint(self) -> None:
        from ..state import dump

        self.s.logged_tools = sorted(self.logged)
        self.rec.checkpoint({"harness": "codex", "version": STATE_VERSION, "state": dump(self.s)})

    def _update_record(self, stop: str, detail: str) -> None:
        r, s = self.rec.record, self.s
        self.acct.settle(r, s, self.rec.calls, stop, detail)
        r.harness = {
            "kind": "codex", "codex_version": self.codex.version, "node": self.codex.node_version, "thread": s.thread,
            "codex_home": "codex/box/home", "startup_s": round(s.startup_s, 3), "first_prompt_tokens": s.first_prompt_tokens,
            "system_prompt_chars": s.system_chars, "context_window": self.ctx.context_window,
            "server_renders_tools": s.server_renders_tools, "compaction_calls": s.compaction_calls,
            "compaction_tokens": s.compaction_usage.prompt + s.compaction_usage.completion, "overflows": s.overflows,
            "withheld_answers": s.withheld, "unmatched_calls": s.unmatched_calls, "exits": list(s.exits),
            "dropped_tools": list(s.dropped_tools), "dropped_items": dict(s.dropped_items),
            "channel_requests": self.channel.requests if self.channel else 0, "channel_refused": self.channel.refused if self.channel else 0,
            "channel_strangers": self.channel.strangers if self.channel else 0,
        }


def _parsed(arguments: str) -> Any:
    try:
        return json.loads(arguments) if arguments else {}
    except (ValueError, RecursionError):
        return None


def restore(checkpoint: dict) -> CodexState:
    from ..state import load

    if checkpoint.get("version") != STATE_VERSION:
        raise SearchboxError(f"cannot resume: Codex checkpoint version {checkpoint.get('version')} (expected {STATE_VERSION})")
    try:
        return load(CodexState, checkpoint["state"])
    except (KeyError, ValueError, TypeError) as exc:
        raise SearchboxError(f"cannot resume: the checkpoint does not hold a Codex state ({exc})") from exc


def restore_home(run_dir: Path, state: CodexState) -> None:
    """Resume: CODEX_HOME back to the checkpoint's (what the session said then); refused in one line when missing."""
    saved, live = Path(run_dir) / "codex" / CHECKPOINT_HOME, Path(run_dir) / "codex" / "box" / "home"
    if state.turn == 0:  # stopped in the first turn: it restarts with a new session (the cut one is dropped)
        if live.exists():
            shutil.rmtree(live)
        return
    if not state.thread or not saved.is_dir() or saved.is_symlink():
        raise SearchboxError(f"{run_dir}: cannot resume: Codex's session as of turn {state.turn} (codex/{CHECKPOINT_HOME}) is missing")
    if live.exists():
        shutil.rmtree(live)
    shutil.copytree(saved, live, symlinks=True)
