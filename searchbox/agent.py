"""The agent loop: turns, budget forcing, compaction, the ANSWER.md backstop and stop reasons (SPEC §3)."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from .config import HarnessConfig
from .dataroom import Workspace
from .errors import ModelError
from .llm import ChatClient, Usage
from .protocol import JsonProtocol, NativeProtocol
from .record import Recorder
from .tools import Toolset

STOP_REASONS = ("budget_spent", "first_turn_done", "token_budget_spent", "ceiling_seconds", "model_error", "interrupted", "paused")
CONTINUE = "Continue."
THINK_RX = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)
OVERFLOW_RX = re.compile(r"context (size|length|window)|too many tokens|maximum context", re.IGNORECASE)

SYSTEM_PROMPT = """You are a careful research agent. Today's date is {today}.
Answer the user's question using only the documents in ./dataroom/ (read-only). There is no network access.
Use the tools you have, or build your own: bash runs in your working directory, where you may write scripts and notes.
When you know the answer, write it to ANSWER.md in the working directory (not inside dataroom/) with the write tool.
Keep the answer short and name the files it comes from. You may refine ANSWER.md as you learn more."""


class Stop(Exception):
    """Ends the run; carries one of STOP_REASONS."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.reason, self.detail = reason, detail


@dataclass
class TurnStats:
    """Counters of the turn in progress."""

    started: float = field(default_factory=time.monotonic)
    usage: Usage = field(default_factory=Usage)
    llm_calls: int = 0
    llm_s: float = 0.0
    tool_s: float = 0.0
    tool_calls: int = 0
    compactions: int = 0
    context_tokens: int = 0
    ended_by: str = ""


def system_prompt(harness: HarnessConfig, protocol_suffix: str) -> str:
    today = harness.today or dt.date.today().isoformat()
    return SYSTEM_PROMPT.format(today=today) + protocol_suffix


def visible_text(content: str) -> str:
    """Assistant text without reasoning blocks."""
    return THINK_RX.sub("", content or "").strip()


class Agent:
    """One run over one question. `run()` always returns the run's summary and leaves complete logs."""

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
        self.total = Usage()
        self.cum = TurnStats()  # run-wide llm/tool time and counts
        self.stats: Optional[TurnStats] = None
        self.started = time.monotonic()
        self.tokens_per_char = 1 / 3  # calibrated from every response's usage
        self.continues = 0
        self.compactions = 0
        self.backstop_text: Optional[str] = None
        self.last_snapshot: Optional[str] = None
        self.answer_source = "none"

    # ---- the loop -------------------------------------------------------------------------
    def run(self) -> dict:
        stop, detail = "interrupted", ""
        tools = self.toolset.schemas()
        self._add({"role": "system", "content": system_prompt(self.h, self.protocol.system_suffix(tools))})
        try:
            while True:
                self._begin_turn()
                self._run_turn(tools)
                self._end_turn()
                self._check_budget_after_turn()
                self._add({"role": "user", "content": CONTINUE})
                self.continues += 1
        except Stop as exc:
            stop, detail = exc.reason, exc.detail
        except ModelError as exc:
            stop, detail = ("ceiling_seconds", str(exc)) if self._run_over() else ("model_error", str(exc))
        except KeyboardInterrupt:
            stop, detail = "interrupted", "KeyboardInterrupt"
        finally:
            if self.stats is not None:  # a turn was cut short: it still gets its row
                self.stats.ended_by = self.stats.ended_by or "stop"
                self._end_turn()
            self.rec.event("stop", self.turn, reason=stop, detail=detail)
        return {"stop_reason": stop, "stop_detail": detail}

    def _begin_turn(self) -> None:
        self.turn += 1
        self.stats = TurnStats()
        self.turn_starts.append(len(self.messages))
        if self.turn == 1:
            self._add({"role": "user", "content": self.question})

    def _run_turn(self, tools: list[dict]) -> None:
        repeats, last_call = 0, None
        for step in range(1, self.h.max_steps_per_turn + 1):
            if self.should_pause():
                raise Stop("paused")
            if self._run_over():
                raise Stop("ceiling_seconds", f"run passed {self.h.run_ceiling_s}s")
            if self.h.turn_ceiling_s and time.monotonic() - self.stats.started > self.h.turn_ceiling_s:
                self.stats.ended_by = "turn_ceiling"
                return
            message, malformed = self._ask(tools)
            self._check_token_budget()
            if malformed:
                self._record_call(step, message.get("raw", "")[:2000], "(malformed)", ok=False, error=malformed, duration_ms=0, output_chars=0)
                self._add(self.protocol.feedback(malformed))
                repeats = repeats + 1 if last_call == "malformed" else 1
                last_call = "malformed"
                if self.h.max_repeat_calls and repeats >= self.h.max_repeat_calls:
                    self.stats.ended_by = "malformed_responses"
                    return
                continue
            calls = message.get("tool_calls") or []
            if not calls:
                self.stats.ended_by = "no_tool_calls"
                return
            signature = [(c["function"]["name"], c["function"]["arguments"]) for c in calls]
            repeats = repeats + 1 if signature == last_call else 1
            last_call = signature
            for call in calls:
                fn = call["function"]
                out = self.toolset.call(fn["name"], fn["arguments"])
                self.stats.tool_s += out.duration_ms / 1000
                self._record_call(step, out.arguments, out.tool, out.ok, out.error, out.duration_ms, out.output_chars,
                                  call_id=call["id"], programs=out.programs, paths=out.paths)
                self._add({"role": "tool", "tool_call_id": call["id"], "name": fn["name"], "content": out.output})
                if self._run_over():
                    raise Stop("ceiling_seconds", f"run passed {self.h.run_ceiling_s}s")
            if self.h.max_repeat_calls and repeats >= self.h.max_repeat_calls:
                self.stats.ended_by = "repeated_calls"  # a looping model: end the turn, let budget forcing decide
                return
        self.stats.ended_by = "max_steps"

    def _ask(self, tools: list[dict]) -> tuple[dict, Optional[str]]:
        self._fit(tools)
        for attempt in (1, 2):
            payload = self.protocol.request(self.messages, tools)
            payload["max_tokens"] = self.max_tokens
            timeout = None
            if self.h.run_ceiling_s:
                timeout = max(1.0, self.h.run_ceiling_s - (time.monotonic() - self.started))
            try:
                resp = self.client.chat(payload, timeout_s=min(timeout, self.client.cfg.timeout_s) if timeout else None)
                break
            except ModelError as exc:
                if attempt == 2 or not OVERFLOW_RX.search(str(exc)):
                    raise
                # The server counted more tokens than we estimated: trust it, compact harder, retry once.
                self.tokens_per_char *= 1.5
                self._fit(tools, force=True)
        sent_chars = len(json.dumps(payload.get("messages", []))) + len(json.dumps(payload.get("tools") or payload.get("response_format") or ""))
        if resp.usage.prompt > 0 and sent_chars > 0:
            self.tokens_per_char = resp.usage.prompt / sent_chars
        s = self.stats
        s.llm_calls += 1
        s.llm_s += resp.latency_s
        for acc in (s.usage, self.total):
            acc.prompt += resp.usage.prompt
            acc.completion += resp.usage.completion
            acc.cached += resp.usage.cached
        s.context_tokens = resp.usage.prompt + resp.usage.completion
        decoded = self.protocol.decode(resp.message)
        message = decoded.message
        self._add(message, usage={"prompt": resp.usage.prompt, "completion": resp.usage.completion, "cached": resp.usage.cached,
                                  "latency_s": round(resp.latency_s, 4), "finish_reason": resp.finish_reason, "timings": resp.timings})
        return message, decoded.malformed

    # ---- budgets --------------------------------------------------------------------------
    def spent_tokens(self) -> int:
        metric = self.h.token_metric
        u = self.total
        return {"total": u.total, "prompt": u.prompt, "completion": u.completion, "uncached_prompt": u.uncached_prompt}[metric]

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
            raise Stop("paused")

    def _run_over(self) -> bool:
        return bool(self.h.run_ceiling_s) and time.monotonic() - self.started > self.h.run_ceiling_s

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
            raise ModelError(f"context window of {self.context_window} tokens is too small even after compaction (~{after} needed)")

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

    def _record_call(self, step, arguments, tool, ok, error, duration_ms, output_chars, call_id="", programs=(), paths=()) -> None:
        self.stats.tool_calls += 1
        self.rec.tool_call({"turn": self.turn, "step": step, "call_id": call_id, "tool": tool, "arguments": arguments,
                            "programs": list(programs), "paths": list(paths), "duration_ms": duration_ms, "ok": ok,
                            "error": error, "output_chars": output_chars})

    def _end_turn(self) -> None:
        s, self.stats = self.stats, None
        answer = self._backstop()
        changed = answer is not None and answer != self.last_snapshot
        if changed:
            self.rec.snapshot(self.turn, answer)
            self.last_snapshot = answer
        self.cum.llm_calls += s.llm_calls
        self.cum.llm_s += s.llm_s
        self.cum.tool_s += s.tool_s
        self.cum.tool_calls += s.tool_calls
        self.rec.turn({
            "turn": self.turn, "prompt_tokens": s.usage.prompt, "completion_tokens": s.usage.completion, "cached_tokens": s.usage.cached,
            "prompt_tokens_cum": self.total.prompt, "completion_tokens_cum": self.total.completion, "cached_tokens_cum": self.total.cached,
            "context_tokens": s.context_tokens, "llm_calls": s.llm_calls, "llm_ms": s.llm_s * 1000, "tool_ms": s.tool_s * 1000,
            "tool_calls": s.tool_calls, "compactions": s.compactions, "answer_chars": len(answer or ""), "answer_changed": changed,
            "elapsed_ms": (time.monotonic() - s.started) * 1000, "ended_by": s.ended_by,
        })

    def _backstop(self) -> Optional[str]:
        """Return ANSWER.md's text; if the model wrote none, fill it from its last own words (never user/tool text)."""
        path = self.ws.answer_path
        if path.is_file():
            text = path.read_bytes().decode("utf-8", errors="replace")
            if self.backstop_text is None or text != self.backstop_text:
                self.answer_source = "model"
                return text  # the model's file: never overwritten
        last = next((visible_text(m.get("content", "")) for m in reversed(self.messages)
                     if m["role"] == "assistant" and visible_text(m.get("content", ""))), "")
        if not last:
            return path.read_text(encoding="utf-8") if path.is_file() else None
        path.write_text(last + "\n", encoding="utf-8")
        self.backstop_text = last + "\n"
        self.answer_source = "backstop"
        return self.backstop_text

    def summary(self) -> dict:
        """Counters for run_meta.json."""
        u = self.total
        return {
            "turns": self.turn, "continues_sent": self.continues, "compactions": self.compactions,
            "tokens": {"prompt": u.prompt, "completion": u.completion, "cached": u.cached, "total": u.total, "uncached_prompt": u.uncached_prompt},
            "llm_calls": self.cum.llm_calls, "tool_calls": self.cum.tool_calls,
            "tool_errors": sum(1 for c in self.rec.calls if not c["ok"]),
            "elapsed_s": round(time.monotonic() - self.started, 3), "llm_s": round(self.cum.llm_s, 3), "tool_s": round(self.cum.tool_s, 3),
            "answer_source": self.answer_source,
        }
