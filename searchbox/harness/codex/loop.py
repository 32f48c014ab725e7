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
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ...errors import SearchboxError
from ...model.llm import Usage
from ...paths import atomic_write
from ...tools import ToolsetState
from ..accounting import Ledger
from ..base import EndTurn, Stop
from ..channel import Channel, Reply, Routes, error
from ..cli_run import CliRun
from ..pi.rpc import Rpc
from . import install, launch, wire

STATE_VERSION = 1
ABORT_S = 30.0  # for codex to exit after its turn's end
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


class CodexRun(CliRun):
    """One run of Codex: one `codex exec` (in a box of its own) a turn, its Responses requests at the channel; the rest is
    CliRun's. The run's one box is its turn's: a cut turn ends with it, as codex exec has no abort."""

    KIND = FOLDER = "codex"
    NAME = STATE_NAME = "Codex"
    INSIDE = launch.INSIDE
    State, STATE_VERSION, ABORT_S = CodexState, STATE_VERSION, ABORT_S
    TOOLS = "the run's tools"
    hand_over = None
    require = staticmethod(install.require_codex)

    def __init__(self, ctx, codex, state: Optional[CodexState] = None):
        super().__init__(ctx, codex, state)
        ctx.toolset.ctx.inside = launch.INSIDE  # (harness.sandbox=none is refused before any tool runs)
        self.prompt = ""
        self.killed_turn = False
        self.config = b""

    def _start(self, session: Optional[bytes]) -> None:
        cfg = self.ctx.config
        if self.ctx.toolset.ctx.sandbox_mode == "none":
            raise Stop("tool_error", "harness=codex runs only in the box: without its network namespace the loopback forwarder "
                                     "would be open to every local user (harness.sandbox=none is refused)")
        self.config = launch.config_toml(cfg, self.ctx.spec, self.ctx.context_window, self.install.node)
        atomic_write(self.folder / "config.toml", self.config.decode("utf-8"))
        self.channel = Channel(Routes(self._refuse_chat, self._tools, self._call, more={"/v1/responses": self._responses}),
                               self._admit).start()
        self._check_template("the server's chat template renders no tools: the model sees no tool schemas, and its replies are "
                             "not parsed as tool calls")

    def _send(self, text: str) -> None:
        self.prompt = text  # codex exec takes it as it starts (_wait_idle)

    def _wait_idle(self) -> None:
        """One `codex exec` in a box of its own, until it exits or the turn is cut (the box killed)."""
        t0 = time.monotonic()
        self.killed_turn = False
        self.box = launch.start(self.install, self.ctx.config, self.folder, self.channel.path, self.ctx.toolset.ctx.sandbox_mode,
                                self.config, self.prompt, self.s.thread)
        self.watchdog_seen = 0
        self.rpc = Rpc(self.box.proc.stdin, self.box.proc.stdout)
        took = time.monotonic() - t0
        with self.lock:
            self._count_startup(took)
        code, said, done_by, completed = None, "", None, False
        while True:
            record = self.rpc.next(0.25)
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
        cut = self._due_cut(keep=True)  # _wait_idle takes it once codex exec is over
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
            with (self.folder / "stderr.log").open("a", encoding="utf-8") as f:
                f.write(f"--- turn {self.s.turn}\n{stderr}")
        box.release()
        if self.rpc is not None:
            self.rpc.close()

    def _shutdown(self) -> None:
        self._kill_box()
        if self.channel is not None:
            self.channel.close()

    def _stderr_tail(self) -> str:
        lines = [line for line in (self.box.stderr_text() if self.box else "").splitlines() if line.strip()]
        return lines[-1][:300] if lines else "no output"

    def _can_save(self) -> bool:
        return True

    def _save_for_resume(self) -> None:
        """CODEX_HOME (its session) as of this checkpoint, so a resume continues the session the checkpoint knows."""
        live, saved = self.folder / "box" / "home", self.folder / CHECKPOINT_HOME
        if saved.exists():
            shutil.rmtree(saved)
        if live.is_dir():
            shutil.copytree(live, saved, symlinks=True)

    @classmethod
    def saved_session(cls, run_dir: Path, state: CodexState) -> None:
        restore_home(run_dir, state)  # its session is CODEX_HOME: put back in place, nothing to hand over

    # ---- the channel: model calls (the Responses API) --------------------------------------------------
    def _refuse_chat(self, body: Any) -> Reply:
        return error(404, "POST /v1/chat/completions: Codex's provider speaks the Responses API (/v1/responses)")

    def _responses(self, body: Any) -> Reply:
        if not isinstance(body, dict) or not isinstance(body.get("input"), (list, str)):
            return error(400, "a Responses request needs its input")
        return self._model_call(body, wire.is_agent_call(body))

    def _upstream(self, body: dict, agent: bool) -> dict | Reply:
        got = wire.upstream(body, self.ctx.config.model.max_tokens, self.ctx.spec.today)
        offered = {t["function"]["name"] for t in got.payload.get("tools") or []}
        if agent and offered != self.channel_names:  # the bridge did not start, or Codex renamed what it serves
            missing = sorted(self.channel_names - offered) or sorted(offered - self.channel_names)
            return self._refuse(Stop("tool_error", f"Codex offered the model other tools than the run's ({', '.join(missing)[:300]}): "
                                                   "its MCP bridge did not start or did not list them"), "the run's tools are missing")
        self._log_request(got)
        return got.payload

    def _log_request(self, got: wire.Translation) -> None:
        """What the request shows the model that the trace lacks (CliRun._log_seen), and what the translation left out."""
        for name in got.dropped_tools:
            if name not in self.s.dropped_tools:
                self.s.dropped_tools.append(name)
        for kind, n in got.dropped_items.items():
            self.s.dropped_items[kind] = self.s.dropped_items.get(kind, 0) + n
        self._log_seen(wire.system_of(got.payload), [m for m in got.payload["messages"] if m["role"] == "tool"])

    def _overflow(self, exc) -> Reply:
        self.s.overflows += 1
        self._event("overflow", detail=str(exc)[:500])
        return self._refuse(Stop("context_exhausted", f"the server refused Codex's request as longer than its context: "
                                                      f"{str(exc)[:300]}"), "the conversation is longer than the context", 400)

    def _note_call(self, call: dict) -> None:
        self.calls[call["id"]] = {"name": call["function"]["name"], "arguments": call["function"]["arguments"],
                                  "parsed": _parsed(call["function"]["arguments"]), "step": self.s.step, "turn": self.s.turn}

    def _side_call(self, usage: Usage, before: int) -> None:
        """Codex compacting: each compaction is one model call without tools (its summary)."""
        super()._side_call(usage, before)
        self.s.compactions += 1
        if self.stats is not None:
            self.stats.compactions += 1

    def _billed(self, usage: Usage, agent: bool) -> None:
        """Codex's record has no usage check to sum them for."""

    def _reply(self, body: dict, message: dict, resp) -> Reply:
        s = self.s
        return Reply(200, events=wire.events(message, resp, self.ctx.config.model.name, self.channel_names, f"{s.turn}_{s.step}"),
                     done=False)

    # ---- the channel: the run's tools (over the MCP bridge) ---------------------------------------------
    def _match(self, name: Any, args: Any) -> Optional[str]:
        """The model's function call of this turn this bridge call is (the bridge sends no id): the first one not yet
        run with the same name and the same arguments."""
        for call_id, info in self.calls.items():
            if call_id not in self.rowed and info["name"] == name and info["parsed"] == args and info["turn"] == self.s.turn:
                return call_id
        return None

    def _claim(self, body: dict, name: str, args: Any) -> tuple[str, dict] | Reply:
        call_id = self._match(name, args)
        if call_id is None:  # nothing the model asked for: made up in the box, never run
            self.s.unmatched_calls += 1
            self._event("unmatched_call", name=str(name)[:100], arguments=json.dumps(args, default=str)[:2000])
            return Reply(200, {"ok": False, "text": "Error: this call matches no tool call of the model's in this turn"})
        self.rowed.add(call_id)
        return call_id, self.calls[call_id]

    # ---- bookkeeping --------------------------------------------------------------------------------------
    def _about(self) -> dict:
        s = self.s
        return {
            "kind": "codex", "codex_version": self.install.version, "node": self.install.node_version, "thread": s.thread,
            "codex_home": "codex/box/home", **self._run_facts(), "compaction_calls": s.compaction_calls,
            "compaction_tokens": s.compaction_usage.prompt + s.compaction_usage.completion, "overflows": s.overflows,
            "withheld_answers": s.withheld, "unmatched_calls": s.unmatched_calls, "exits": list(s.exits),
            "dropped_tools": list(s.dropped_tools), "dropped_items": dict(s.dropped_items), **self._channel_facts(),
        }


def _parsed(arguments: str) -> Any:
    try:
        return json.loads(arguments) if arguments else {}
    except (ValueError, RecursionError):
        return None


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


restore = CodexRun.restore
