"""The agent loop: turns, budget forcing, compaction, the ANSWER.md backstop, stop reasons and checkpoints (SPEC §3)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import stat
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable, Optional

from . import safefs
from .config import HarnessConfig
from .dataroom import Workspace
from .errors import BackendError, ModelError
from .llm import ChatClient, DeadlineExceeded, Usage, estimate_tokens
from .protocol import JsonProtocol, NativeProtocol
from .record import Recorder, Tokens
from .tools import Toolset

STOP_REASONS = ("budget_spent", "first_turn_done", "token_budget_spent", "ceiling_seconds", "context_exhausted",
                "model_error", "tool_error", "interrupted", "paused")
# Stops that say nothing about the model: the run is not a result, a relaunch redoes it.
INFRA_STOPS = frozenset({"model_error", "tool_error", "interrupted", "paused"})
CONTINUE = "Continue."
ANSWER_FILE = "ANSWER.md"
ANSWER_CAP = 1024**2  # most bytes of ANSWER.md the harness reads
THINK_RX = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)
OVERFLOW_RX = re.compile(r"context (size|length|window)|too many tokens|maximum context", re.IGNORECASE)
STATE_VERSION = 1

SYSTEM_PROMPT = """You are a careful research agent. Today's date is {today}.
Answer the user's question using only the documents in ./dataroom/ (read-only). There is no network access.
{tools_line}
When you know the answer, write it to ANSWER.md in the working directory (not inside dataroom/) with the write tool.
Write the answer itself first, as a short phrase on its own line, then a line starting "Sources:" followed by the files it comes from; only the text before "Sources:" is graded.
You may refine ANSWER.md as you learn more."""
WITH_BASH = "Use the tools you have, or build your own: bash runs in your working directory, where you may write scripts and notes."
WITHOUT_BASH = "Use the tools you have; you may write notes in your working directory."


class Stop(Exception):
    """Ends the run; carries one of STOP_REASONS."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.reason, self.detail = reason, detail


class EndTurn(Exception):
    """Ends the turn in progress (its deadline passed); budget forcing decides what comes next."""

    def __init__(self, ended_by: str):
        super().__init__(ended_by)
        self.ended_by = ended_by


@dataclass
class TurnStats:
    """Counters of the turn in progress."""

    usage: Usage = field(default_factory=Usage)
    llm_calls: int = 0
    llm_s: float = 0.0
    tool_s: float = 0.0
    setup_s: float = 0.0
    tool_calls: int = 0
    malformed: int = 0
    estimated_calls: int = 0
    compactions: int = 0
    context_tokens: int = 0
    elapsed_before: float = 0.0  # active seconds spent in this turn before a pause
    ended_by: str = ""
    started: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        return self.elapsed_before + time.monotonic() - self.started


def system_prompt(harness: HarnessConfig, protocol_suffix: str, tool_names: list[str]) -> str:
    today = harness.today or dt.date.today().isoformat()
    tools_line = WITH_BASH if "bash" in tool_names else WITHOUT_BASH
    return SYSTEM_PROMPT.format(today=today, tools_line=tools_line) + protocol_suffix


def visible_text(content: str) -> str:
    """Assistant text without reasoning blocks."""
    return THINK_RX.sub("", content or "").strip()


def read_answer(ws: Workspace) -> tuple[Optional[str], str]:
    """(text, kind) of work/ANSWER.md, never through a link: kind is file, missing or other (a link, dir, FIFO...)."""
    st = safefs.lstat(ws.work, ANSWER_FILE)
    if st is None:
        return None, "missing"
    if not stat.S_ISREG(st.st_mode):
        return None, "other"
    text = safefs.read_text(ws.work, ANSWER_FILE, cap=ANSWER_CAP)
    return (text, "file") if text is not None else (None, "other")


class Agent:
    """One run over one question. `run()` always leaves complete logs and fills the run record."""

    def __init__(self, harness: HarnessConfig, ws: Workspace, client: ChatClient, protocol: NativeProtocol | JsonProtocol,
                 toolset: Toolset, recorder: Recorder, question: str, context_window: int, max_tokens: int,
                 should_pause: Optional[Callable[[], bool]] = None):
        self.h, self.ws, self.client, self.protocol = harness, ws, client, protocol
        self.toolset, self.rec, self.question = toolset, recorder, question
        self.context_window, self.max_tokens = context_window, max_tokens
        self.should_pause = should_pause or (lambda: False)
        self.messages: list[dict] = []  # what the next request sends (compaction rewrites it)
        self.turn_starts: list[int] = []  # index in self.messages where each turn began
        self.turn = 0
        self.step = 1  # the next step of the turn in progress
        self.repeats, self.last_call = 0, None  # the loop guard's memory within a turn
        self.total = Usage()
        self.cum = TurnStats()  # run-wide llm/tool time and counts
        self.stats: Optional[TurnStats] = None
        self.started = time.monotonic()
        self.elapsed_before = 0.0  # active seconds before a pause (a resumed run continues its clock)
        self.tokens_per_char = 1 / 3  # calibrated from every response's usage
        self.continues = 0
        self.compactions = 0
        self.backstop_text: Optional[str] = None
        self.last_snapshot: Optional[str] = None
        self.answer_source = "none"

    # ---- the loop -------------------------------------------------------------------------
    def run(self, state: Optional[dict] = None) -> None:
        """Run to a stop (or continue from a checkpoint); the record says how it ended."""
        stop, detail = "interrupted", ""
        tools = self.toolset.schemas()
        try:
            if state is None:
                self._add({"role": "system", "content": system_prompt(self.h, self.protocol.system_suffix(tools), self.toolset.names)})
                self._begin_turn()
            else:
                self._restore(state)
                self.rec.event("resume", self.turn, in_turn=self.stats is not None, step=self.step)
                if self.stats is None:
                    self._check_budget_after_turn()
                    self._next_turn()
            while True:
                try:
                    self._run_turn(tools)
                except EndTurn as cut:
                    self.stats.ended_by = cut.ended_by
                self._end_turn()
                self._check_budget_after_turn()
                self._next_turn()
        except Stop as exc:
            stop, detail = exc.reason, exc.detail
        except DeadlineExceeded as exc:
            stop, detail = "ceiling_seconds", str(exc)
        except ModelError as exc:
            stop, detail = ("ceiling_seconds", str(exc)) if self._run_over() else ("model_error", str(exc))
        except BackendError as exc:
            stop, detail = "tool_error", str(exc)
        except KeyboardInterrupt:
            stop, detail = "interrupted", "KeyboardInterrupt"
        except Exception as exc:  # a harness bug: this run is not a result, and the sweep goes on
            stop, detail = "tool_error", f"harness error: {type(exc).__name__}: {exc}"
            self.rec.event("error", self.turn, traceback=traceback.format_exc())
        finally:
            # A turn cut short still gets its row; a paused one is continued by --resume and gets its row then.
            if self.stats is not None and stop != "paused":
                self.stats.ended_by = self.stats.ended_by or "stop"
                self._end_turn(checkpoint=False)  # the last step-boundary checkpoint stays where a resume picks up
            self.rec.event("stop", self.turn, reason=stop, detail=detail)
            self._update_record(stop, detail)

    def _next_turn(self) -> None:
        self._add({"role": "user", "content": CONTINUE})
        self.continues += 1
        self._begin_turn()

    def _begin_turn(self) -> None:
        self.turn += 1
        self.stats = TurnStats()
        self.step, self.repeats, self.last_call = 1, 0, None
        self.turn_starts.append(len(self.messages))
        if self.turn == 1:
            self._add({"role": "user", "content": self.question})

    def _run_turn(self, tools: list[dict]) -> None:
        while self.step <= self.h.max_steps_per_turn:
            self._checkpoint()
            if self.should_pause():
                raise Stop("paused")
            self._check_deadlines()
            message, malformed = self._ask(tools)
            self._check_token_budget()
            self.step += 1
            if malformed:
                self.stats.malformed += 1
                self.rec.event("malformed", self.turn, step=self.step - 1, error=malformed, raw=message.get("raw", "")[:2000])
                self._add(self.protocol.feedback(malformed))
                self.repeats = self.repeats + 1 if self.last_call == "malformed" else 1
                self.last_call = "malformed"
                if self.h.max_repeat_calls and self.repeats >= self.h.max_repeat_calls:
                    self.stats.ended_by = "malformed_responses"
                    return
                continue
            calls = message.get("tool_calls") or []
            if not calls:
                self.stats.ended_by = "no_tool_calls"
                return
            signature = [[c["function"]["name"], c["function"]["arguments"]] for c in calls]
            self.repeats = self.repeats + 1 if signature == self.last_call else 1
            self.last_call = signature
            for call in calls:
                self._call_tool(call)
                if self._run_over():
                    raise Stop("ceiling_seconds", f"run passed {self.h.run_ceiling_s}s")
            if self.h.max_repeat_calls and self.repeats >= self.h.max_repeat_calls:
                self.stats.ended_by = "repeated_calls"  # a looping model: end the turn, let budget forcing decide
                return
        self.stats.ended_by = "max_steps"

    def _call_tool(self, call: dict) -> None:
        fn = call["function"]
        step = self.step - 1
        try:
            out = self.toolset.call(fn["name"], fn["arguments"])
        except BackendError as exc:  # logged as the call that failed, then the run stops
            self._record_call(step, fn["arguments"], fn["name"], False, str(exc), 0.0, 0, call_id=call["id"])
            raise
        self.stats.tool_s += out.duration_ms / 1000
        self.stats.setup_s += out.setup_ms / 1000
        self._record_call(step, out.arguments, out.tool, out.ok, out.error, out.duration_ms, out.output_chars, call_id=call["id"],
                          programs=out.programs, paths=out.paths, setup_ms=out.setup_ms, delivered=out.delivered)
        message = {"role": "tool", "tool_call_id": call["id"], "name": fn["name"], "content": out.output}
        if out.data is not None:
            message["data"] = out.data  # for programs reading the trace; no protocol sends it to the server
        self._add(message)

    def _ask(self, tools: list[dict]) -> tuple[dict, Optional[str]]:
        self._fit(tools)
        for attempt in (1, 2):
            payload = self.protocol.request(self.messages, tools)
            payload["max_tokens"] = self.max_tokens
            deadline, binding = self._deadline()
            try:
                resp = self.client.chat(payload, deadline=deadline)
                break
            except DeadlineExceeded as exc:
                if binding == "turn":
                    raise EndTurn("turn_ceiling") from exc
                raise Stop("ceiling_seconds", f"run passed {self.h.run_ceiling_s}s: {exc}") from exc
            except ModelError as exc:
                if attempt == 2 or not OVERFLOW_RX.search(str(exc)):
                    if OVERFLOW_RX.search(str(exc)):
                        raise Stop("context_exhausted", f"the server refused the request as too long after compaction: {exc}") from exc
                    raise
                # The server counted more tokens than we estimated: trust it, compact harder, retry once.
                self.tokens_per_char *= 1.5
                self._fit(tools, force=True)
        decoded = self.protocol.decode(resp.message)
        message = decoded.message
        usage = self._account(resp, payload, message)
        self._add(message, usage={"prompt": usage.prompt, "completion": usage.completion, "cached": usage.cached,
                                  "estimated": usage.estimated, "latency_s": round(resp.latency_s, 4),
                                  "finish_reason": resp.finish_reason, "timings": resp.timings})
        return message, decoded.malformed

    def _account(self, resp, payload: dict, message: dict) -> Usage:
        """Add one response's tokens to the turn and the run; a response without usage is estimated, and marked."""
        sent_chars = len(json.dumps(payload.get("messages", []))) + len(json.dumps(payload.get("tools") or payload.get("response_format") or ""))
        usage = resp.usage
        if usage.estimated:
            said = len(message.get("content") or "") + len(json.dumps(message.get("tool_calls") or "")) + len(message.get("raw") or "")
            usage = Usage(usage.prompt or estimate_tokens(sent_chars, self.tokens_per_char),
                          usage.completion or max(1, estimate_tokens(said, self.tokens_per_char)), usage.cached, estimated=True)
        elif usage.prompt > 0 and sent_chars > 0:
            self.tokens_per_char = usage.prompt / sent_chars
        s = self.stats
        s.llm_calls += 1
        s.llm_s += resp.latency_s
        s.estimated_calls += int(usage.estimated)
        for acc in (s.usage, self.total):
            acc.prompt += usage.prompt
            acc.completion += usage.completion
            acc.cached += usage.cached
        s.context_tokens = usage.prompt + usage.completion
        return usage

    # ---- budgets and deadlines ------------------------------------------------------------
    def spent_tokens(self) -> int:
        u = self.total
        return {"total": u.total, "prompt": u.prompt, "completion": u.completion, "uncached_prompt": u.uncached_prompt}[self.h.token_metric]

    def _check_token_budget(self) -> None:
        if self.h.budget_unit == "tokens" and self.spent_tokens() >= self.h.budget:
            raise Stop("token_budget_spent", f"{self.spent_tokens()} {self.h.token_metric} tokens >= {self.h.budget}")

    def _check_budget_after_turn(self) -> None:
        if not self.h.force_budget:
            raise Stop("first_turn_done")
        if self.h.budget_unit == "turns" and self.turn >= self.h.budget:
            raise Stop("budget_spent", f"{self.turn} turns")
        self._check_token_budget()
        if self.turn >= self.h.max_turns:
            raise Stop("budget_spent", f"max_turns={self.h.max_turns} reached before the token budget")
        if self._run_over():
            raise Stop("ceiling_seconds", f"run passed {self.h.run_ceiling_s}s")
        if self.should_pause():
            raise Stop("paused")  # between turns: the checkpoint _end_turn wrote is where it resumes

    def elapsed(self) -> float:
        """Active seconds: a paused run's clock stops while it waits."""
        return self.elapsed_before + time.monotonic() - self.started

    def _run_over(self) -> bool:
        return bool(self.h.run_ceiling_s) and self.elapsed() > self.h.run_ceiling_s

    def _deadline(self) -> tuple[Optional[float], str]:
        """The monotonic time by which the next HTTP call (with its retries) must be done, and whose it is (run|turn)."""
        now = time.monotonic()
        ends = []
        if self.h.run_ceiling_s:
            ends.append((now + self.h.run_ceiling_s - self.elapsed(), "run"))
        if self.h.turn_ceiling_s and self.stats is not None:
            ends.append((now + self.h.turn_ceiling_s - self.stats.elapsed(), "turn"))
        return min(ends) if ends else (None, "")

    def _check_deadlines(self) -> None:
        if self._run_over():
            raise Stop("ceiling_seconds", f"run passed {self.h.run_ceiling_s}s")
        if self.h.turn_ceiling_s and self.stats is not None and self.stats.elapsed() > self.h.turn_ceiling_s:
            raise EndTurn("turn_ceiling")

    # ---- context management ---------------------------------------------------------------
    def _estimate(self, tools: list[dict]) -> int:
        chars = len(json.dumps(self.messages)) + len(json.dumps(tools))
        return int(chars * self.tokens_per_char) + 16

    def _fit(self, tools: list[dict], force: bool = False) -> None:
        """Compact older turns until the next request fits under compact_at of the window."""
        target = int(self.context_window * self.h.compact_at) - self.max_tokens
        if not force and self._estimate(tools) <= target:
            return
        before = self._estimate(tools)
        current = self.turn_starts[-1] if self.turn_starts else len(self.messages)
        for stage in (self._drop_old_tool_output, self._trim_current_tool_output, self._drop_old_turns):
            stage(current)
            current = self.turn_starts[-1] if self.turn_starts else len(self.messages)
            if not force and self._estimate(tools) <= target:
                break
        after = self._estimate(tools)
        self.compactions += 1
        self.stats.compactions += 1
        self.rec.event("compaction", self.turn, estimated_before=before, estimated_after=after, target=target, messages=len(self.messages))
        if after > self.context_window - self.max_tokens:
            # Not an outage: this model, window and budget cannot go on. A result, counted in the tables.
            raise Stop("context_exhausted", f"context window of {self.context_window} tokens is too small even after compaction (~{after} needed)")

    def _drop_old_tool_output(self, current: int) -> None:
        for i in range(2, current):
            m = self.messages[i]
            if m["role"] == "tool" and not m["content"].startswith("[compacted"):
                self.messages[i] = {**m, "content": f"[compacted: {len(m['content'])} characters of tool output removed]"}

    def _trim_current_tool_output(self, current: int) -> None:
        tools_here = [i for i in range(current, len(self.messages)) if self.messages[i]["role"] == "tool"]
        for i in tools_here[:-1]:
            m = self.messages[i]
            if len(m["content"]) > 600:
                self.messages[i] = {**m, "content": m["content"][:500] + f"\n[compacted: {len(m['content']) - 500} more characters removed]"}

    def _drop_old_turns(self, current: int) -> None:
        """Keep system prompt, question and the current turn; earlier turns leave one note."""
        head = self.messages[:2]
        if current <= 2:
            return
        note = {"role": "user", "content": f"[compacted: {current - 2} earlier messages removed to fit the context window]"}
        tail = self.messages[current:]
        if tail and tail[0]["role"] == "user" and tail[0]["content"] == CONTINUE:
            tail = tail[1:]
        self.messages = head + [note] + ([{"role": "user", "content": CONTINUE}] if self.turn > 1 else []) + tail
        self.turn_starts = [3]

    # ---- bookkeeping ----------------------------------------------------------------------
    def _add(self, message: dict, **extra) -> None:
        self.messages.append(message)
        self.rec.event("message", self.turn, message=message, **extra)

    def _record_call(self, step, arguments, tool, ok, error, duration_ms, output_chars, call_id="", programs=(), paths=(),
                     setup_ms=0.0, delivered="") -> None:
        self.stats.tool_calls += 1
        self.rec.tool_call({"turn": self.turn, "step": step, "call_id": call_id, "tool": tool, "arguments": arguments,
                            "programs": list(programs), "paths": list(paths), "duration_ms": duration_ms, "setup_ms": setup_ms,
                            "ok": ok, "error": error, "output_chars": output_chars, "delivered": delivered})

    def _end_turn(self, checkpoint: bool = True) -> None:
        s, self.stats = self.stats, None
        answer = self._backstop()
        changed = answer is not None and answer != self.last_snapshot
        if changed:
            self.rec.snapshot(self.turn, answer)
            self.last_snapshot = answer
        for name in ("llm_calls", "llm_s", "tool_s", "setup_s", "tool_calls", "malformed", "estimated_calls"):
            setattr(self.cum, name, getattr(self.cum, name) + getattr(s, name))
        self.rec.turn({
            "turn": self.turn, "prompt_tokens": s.usage.prompt, "completion_tokens": s.usage.completion, "cached_tokens": s.usage.cached,
            "prompt_tokens_cum": self.total.prompt, "completion_tokens_cum": self.total.completion, "cached_tokens_cum": self.total.cached,
            "context_tokens": s.context_tokens, "llm_calls": s.llm_calls, "llm_ms": s.llm_s * 1000, "tool_ms": s.tool_s * 1000,
            "setup_ms": s.setup_s * 1000, "tool_calls": s.tool_calls, "malformed": s.malformed, "estimated_calls": s.estimated_calls,
            "compactions": s.compactions, "answer_chars": len(answer or ""), "answer_changed": changed,
            "elapsed_ms": s.elapsed() * 1000, "ended_by": s.ended_by,
        })
        if checkpoint:
            self._checkpoint()

    def _backstop(self) -> Optional[str]:
        """Return ANSWER.md's text; if the model wrote none, fill it from its last own words (never user/tool text).

        Anything but a regular file at ANSWER.md (a link, a directory, a FIFO) is left alone and
        counts as no answer: the harness never reads or writes through what the model made.
        """
        text, kind = read_answer(self.ws)
        if kind == "other":
            self.answer_source = "none"
            return None
        if kind == "file" and (self.backstop_text is None or text != self.backstop_text):
            self.answer_source = "model"
            return text  # the model's file: never overwritten
        last = next((visible_text(m.get("content", "")) for m in reversed(self.messages)
                     if m["role"] == "assistant" and visible_text(m.get("content", ""))), "")
        if not last:
            return text
        try:
            safefs.write_text(self.ws.work, ANSWER_FILE, last + "\n", replace=kind == "file")
        except safefs.UnsafePath:
            return text
        self.backstop_text = last + "\n"
        self.answer_source = "backstop"
        return self.backstop_text

    def _update_record(self, stop: str, detail: str) -> None:
        """Counters into the run record (the Recorder writes it)."""
        r, u = self.rec.record, self.total
        r.stop_reason, r.stop_detail = stop, detail
        r.turns, r.continues_sent, r.compactions = self.turn, self.continues, self.compactions
        r.tokens = Tokens(u.prompt, u.completion, u.cached, u.total, u.uncached_prompt, self.cum.estimated_calls)
        r.llm_calls, r.tool_calls, r.malformed_replies = self.cum.llm_calls, self.cum.tool_calls, self.cum.malformed
        r.tool_errors = sum(1 for c in self.rec.calls if not c["ok"])
        r.elapsed_s, r.llm_s = round(self.elapsed(), 3), round(self.cum.llm_s, 3)
        r.tool_s, r.setup_s = round(self.cum.tool_s, 3), round(self.cum.setup_s, 3)
        r.answer_source = self.answer_source

    # ---- checkpoints (resume) -------------------------------------------------------------
    def _checkpoint(self) -> None:
        """Everything needed to continue this run later from this step boundary."""
        stats = None
        if self.stats is not None:
            stats = {k: v for k, v in dataclasses.asdict(self.stats).items() if k != "started"}
            stats["elapsed_before"] = self.stats.elapsed()
        self.rec.checkpoint({
            "version": STATE_VERSION, "protocol": self.protocol.name, "turn": self.turn, "step": self.step,
            "repeats": self.repeats, "last_call": self.last_call, "messages": self.messages, "turn_starts": self.turn_starts,
            "stats": stats, "total": dataclasses.asdict(self.total),
            "cum": {k: v for k, v in dataclasses.asdict(self.cum).items() if k != "started"},
            "elapsed_s": self.elapsed(), "tokens_per_char": self.tokens_per_char, "continues": self.continues,
            "compactions": self.compactions, "backstop_text": self.backstop_text, "last_snapshot": self.last_snapshot,
            "answer_source": self.answer_source, "turns_recorded": len(self.rec.turns), "calls_recorded": len(self.rec.calls),
            "delivered": self.toolset.delivered,
        })

    def _restore(self, state: dict) -> None:
        if state.get("version") != STATE_VERSION:
            raise ModelError(f"cannot resume: checkpoint version {state.get('version')} (expected {STATE_VERSION})")
        self.turn, self.step, self.repeats = state["turn"], state["step"], state["repeats"]
        self.last_call = state["last_call"]
        self.messages, self.turn_starts = state["messages"], state["turn_starts"]
        self.total = _usage(state["total"])
        self.cum = _stats(state["cum"])
        self.stats = _stats(state["stats"]) if state["stats"] is not None else None
        self.elapsed_before = state["elapsed_s"]
        self.tokens_per_char, self.continues, self.compactions = state["tokens_per_char"], state["continues"], state["compactions"]
        self.backstop_text, self.last_snapshot = state["backstop_text"], state["last_snapshot"]
        self.answer_source = state["answer_source"]
        self.toolset.delivered = state.get("delivered", 0)
        self.rec.truncate(state["turns_recorded"], state["calls_recorded"])


def _usage(data: dict) -> Usage:
    return Usage(**{k: v for k, v in data.items() if k in {f.name for f in dataclasses.fields(Usage)}})


def _stats(data: dict) -> TurnStats:
    data = dict(data)
    usage = _usage(data.pop("usage", {}))
    known = {f.name for f in dataclasses.fields(TurnStats)} - {"usage", "started"}
    return TurnStats(usage=usage, **{k: v for k, v in data.items() if k in known})
