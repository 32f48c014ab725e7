"""The native loop: turns, budget forcing, compaction, the ANSWER.md backstop, stop reasons and checkpoints (SPEC §3).

Its mutable state is one LoopState, checkpointed and restored whole; per-call accounting (usage, deadlines,
the budget) is the shared harness.accounting.Accountant over the state's Ledger.
"""

from __future__ import annotations

import datetime as dt
import re
import stat
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from ..corpus import safefs
from ..config import HarnessConfig
from ..corpus.dataroom import Workspace
from ..errors import BackendError, ModelError
from .accounting import Accountant, Clock, Ledger, TurnStats
from .base import CONTINUE, INFRA_STOPS, STOP_REASONS, EndTurn, RunContext, Stop
from ..model.protocol import JsonProtocol, NativeProtocol
from ..record.record import ToolRow
from ..tools import ToolsetState

__all__ = ["Agent", "LoopState", "STOP_REASONS", "INFRA_STOPS", "CONTINUE", "Stop", "EndTurn", "TurnStats", "read_answer",
           "visible_text", "system_prompt"]

ANSWER_FILE = "ANSWER.md"
ANSWER_CAP = 1024**2  # most bytes of ANSWER.md the harness reads
THINK_RX = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)
OVERFLOW_RX = re.compile(r"context (size|length|window)|too many tokens|maximum context", re.IGNORECASE)

SYSTEM_PROMPT = """You are a careful research agent. Today's date is {today}.
Answer the user's question using only the documents in ./dataroom/ (read-only). There is no network access.
{tools_line}
When you know the answer, write it to ANSWER.md in the working directory (not inside dataroom/) with the write tool.
Write the answer itself first, as a short phrase on its own line, then a line starting "Sources:" followed by the files it comes from; only the text before "Sources:" is graded.
You may refine ANSWER.md as you learn more."""
WITH_BASH = "Use the tools you have, or build your own: bash runs in your working directory, where you may write scripts and notes."
WITHOUT_BASH = "Use the tools you have; you may write notes in your working directory."
# harness.ask_confidence: the line grading/calibration.py reads back (stated_confidence)
ASK_CONFIDENCE = "\nAfter the Sources line, write one line `Confidence: NN%`: how likely it is that your answer is correct."


def system_prompt(harness: HarnessConfig, protocol_suffix: str, tool_names: list[str]) -> str:
    today = harness.today or dt.date.today().isoformat()
    tools_line = WITH_BASH if "bash" in tool_names else WITHOUT_BASH
    ask = ASK_CONFIDENCE if getattr(harness, "ask_confidence", False) else ""
    return SYSTEM_PROMPT.format(today=today, tools_line=tools_line) + ask + protocol_suffix


def visible_text(content: str) -> str:
    """Assistant text without reasoning blocks."""
    return THINK_RX.sub("", content or "").strip()


def read_answer(ws: Workspace) -> tuple[Optional[str], str]:
    """(text, kind) of work/ANSWER.md, never through a link: kind is file, missing or other (a link, dir, FIFO...)."""
    return read_answer_in(ws.work)


def read_answer_in(work: Path) -> tuple[Optional[str], str]:
    """read_answer of the folder the agent works in."""
    st = safefs.lstat(work, ANSWER_FILE)
    if st is None:
        return None, "missing"
    if not stat.S_ISREG(st.st_mode):
        return None, "other"
    text = safefs.read_text(work, ANSWER_FILE, cap=ANSWER_CAP)
    return (text, "file") if text is not None else (None, "other")


def record_turn(rec: Any, s: Any, stats: TurnStats, answer: Optional[str]) -> None:
    """The turn's row, and ANSWER.md's snapshot when the answer changed in it: what every harness writes at a turn's end.
    `s` is the harness's state (its turn, ledger and last_snapshot)."""
    changed = answer is not None and answer != s.last_snapshot
    if changed:
        rec.snapshot(s.turn, answer)
        s.last_snapshot = answer
    rec.turn(stats.row(s.turn, s.ledger.total, answer, changed))


def backstop(work: Path, s: Any, last: str, written: Optional[Callable[[Path, str], None]] = None) -> Optional[str]:
    """ANSWER.md's text; if the model wrote none, its last own words (`last`, never a user or tool text) go there: the
    one backstop of every harness. `s` is the harness's state (its answer_source and backstop_text); `written` is
    told of a file the backstop wrote (Pi's box: handed to the box's uid). Anything but a regular file at ANSWER.md (a
    link, a directory, a FIFO) is left alone and counts as no answer: the harness never reads or writes through what
    the model made."""
    text, kind = read_answer_in(work)
    if kind == "other":
        s.answer_source = "none"
        return None
    if kind == "file" and (s.backstop_text is None or text != s.backstop_text):
        s.answer_source = "model"
        return text  # the model's file: never overwritten
    if not last:
        return text
    try:
        safefs.write_text(work, ANSWER_FILE, last + "\n", replace=kind == "file")
        if written is not None:
            written(work, ANSWER_FILE)
    except safefs.UnsafePath:
        return text
    s.backstop_text = last + "\n"
    s.answer_source = "backstop"
    return s.backstop_text


@dataclass
class LoopState:
    """Everything the native loop changes as it runs: one object, checkpointed and restored whole."""

    protocol: str = "native"  # the tool protocol the run started with (a resume keeps it)
    messages: list = field(default_factory=list)  # what the next request sends (compaction rewrites it)
    turn_starts: list = field(default_factory=list)  # index in messages where each turn began
    turn: int = 0
    step: int = 1  # the next step of the turn in progress
    repeats: int = 0  # the loop guard's memory within a turn: how often last_call came in a row
    last_call: Any = None
    ledger: Ledger = field(default_factory=Ledger)  # tokens, counters, clocks and the turn in progress
    continues: int = 0
    compactions: int = 0
    backstop_text: Optional[str] = None  # what the backstop last wrote to ANSWER.md
    last_snapshot: Optional[str] = None
    answer_source: str = "none"
    tools: ToolsetState = field(default_factory=ToolsetState)  # the toolset's own counters (delivered results)


STATE_VERSION = 2


class Agent:
    """The native loop over one run. `run()` always leaves complete logs and fills the run record."""

    def __init__(self, ctx: RunContext, protocol: NativeProtocol | JsonProtocol, state: Optional[LoopState] = None):
        self.ctx, self.h = ctx, ctx.config.harness
        self.ws, self.client, self.protocol = ctx.workspace, ctx.client, protocol
        self.toolset, self.rec, self.question = ctx.toolset, ctx.recorder, ctx.question
        self.context_window, self.max_tokens = ctx.context_window, ctx.config.model.max_tokens
        self.should_pause = ctx.should_pause
        self.s = state or LoopState(protocol=protocol.name, ledger=Ledger(clock=Clock(started=ctx.started)))
        self.acct = Accountant(self.h, self.s.ledger, on_failure=self._request_failed)
        self.toolset.state = self.s.tools  # one state: the toolset's counters are checkpointed with the loop's

    @property
    def stats(self) -> Optional[TurnStats]:
        """The turn in progress (None between turns)."""
        return self.s.ledger.turn

    # ---- the loop -------------------------------------------------------------------------
    def run(self, resumed: bool = False) -> None:
        """Run to a stop (or on from the restored state); the record says how it ended."""
        stop, detail = "interrupted", ""
        tools = self.toolset.schemas()
        try:
            fixed = {k: v for k, v in self.protocol.request([], tools).items() if k != "messages"}
            if fixed != self.ctx.spec.request:  # the key must cover exactly what is sent
                raise RuntimeError("the request's tools or schema differ from the ones the run key was computed from")
            if not resumed:
                self._add({"role": "system", "content": self.ctx.spec.system})
                self._begin_turn()
            else:
                s = self.s
                # Rows past the checkpoint belong to work the resume redoes.
                self.rec.truncate(s.turn - 1 if self.stats is not None else s.turn, (s.turn, s.step))
                self.rec.event("resume", s.turn, in_turn=self.stats is not None, step=s.step)
                if self.stats is None:
                    self._after_turn()
                    self._next_turn()
            while True:
                try:
                    self._run_turn(tools)
                except EndTurn as cut:
                    self.stats.ended_by = cut.ended_by
                self._end_turn()
                self._after_turn()
                self._next_turn()
        except KeyboardInterrupt:
            stop, detail = "interrupted", "KeyboardInterrupt"
        except Exception as exc:
            stop, detail = self.acct.stop_of(exc)  # never answered: model_error
            if not isinstance(exc, (Stop, ModelError, BackendError)):  # a harness bug: keep the traceback
                self.rec.event("error", self.s.turn, traceback=traceback.format_exc())
        finally:
            # A turn cut short still gets its row; a paused one is continued by --resume and gets its row then.
            if self.stats is not None and stop != "paused":
                self.stats.ended_by = self.stats.ended_by or "stop"
                self._end_turn(checkpoint=False)  # the last step-boundary checkpoint stays where a resume picks up
            self.rec.event("stop", self.s.turn, reason=stop, detail=detail)
            self._update_record(stop, detail)

    def _after_turn(self) -> None:
        self.acct.check_budget_after_turn(self.s.turn)
        if self.should_pause():
            raise Stop("paused")  # between turns: the checkpoint _end_turn wrote is where it resumes

    def _next_turn(self) -> None:
        self._add({"role": "user", "content": CONTINUE})
        self.s.continues += 1
        self._begin_turn()

    def _begin_turn(self) -> None:
        s = self.s
        s.turn += 1
        self.acct.begin_turn()
        s.step, s.repeats, s.last_call = 1, 0, None
        s.turn_starts.append(len(s.messages))
        if s.turn == 1:
            self._add({"role": "user", "content": self.question})

    def _run_turn(self, tools: list[dict]) -> None:
        s = self.s
        while s.step <= self.h.max_steps_per_turn:
            self._checkpoint()
            if self.should_pause():
                raise Stop("paused")
            self.acct.check_deadlines()
            message, malformed = self._ask(tools)
            self.acct.check_token_budget()
            s.step += 1
            if malformed:
                self.stats.malformed += 1
                self.rec.event("malformed", s.turn, step=s.step - 1, error=malformed, raw=str(message.get("raw", ""))[:2000])
                self._add(self.protocol.feedback(malformed))
                s.repeats = s.repeats + 1 if s.last_call == "malformed" else 1
                s.last_call = "malformed"
                if self.h.max_repeat_calls and s.repeats >= self.h.max_repeat_calls:
                    self.stats.ended_by = "malformed_responses"
                    return
                continue
            calls = message.get("tool_calls") or []
            if not calls:
                self.stats.ended_by = "no_tool_calls"
                return
            signature = [[c["function"]["name"], c["function"]["arguments"]] for c in calls]
            s.repeats = s.repeats + 1 if signature == s.last_call else 1
            s.last_call = signature
            for call in calls:
                self._call_tool(call)
                if self.acct.run_over():
                    raise Stop("ceiling_seconds", f"run passed {self.h.run_ceiling_s}s")
            if self.h.max_repeat_calls and s.repeats >= self.h.max_repeat_calls:
                self.stats.ended_by = "repeated_calls"  # a looping model: end the turn, let budget forcing decide
                return
        self.stats.ended_by = "max_steps"

    def _call_tool(self, call: dict) -> None:
        fn = call["function"]
        step = self.s.step - 1
        try:
            out = self.toolset.call(fn["name"], fn["arguments"])
        except BackendError as exc:  # logged as the call that failed, then the run stops
            self._record_call(ToolRow(self.s.turn, step, call["id"], fn["name"], fn["arguments"], [], [], 0.0, 0.0, False, str(exc),
                                      0, "", False))
            raise
        self.stats.tool_s += out.duration_ms / 1000
        self.stats.setup_s += out.setup_ms / 1000
        self.stats.malformed_calls += int(out.malformed)
        self._record_call(ToolRow(self.s.turn, step, call["id"], out.tool, out.arguments, list(out.programs), list(out.paths),
                                  out.duration_ms, out.setup_ms, out.ok, out.error, out.output_chars, out.delivered, out.malformed,
                                  out.opened))
        message = {"role": "tool", "tool_call_id": call["id"], "name": fn["name"], "content": out.output}
        if out.data is not None:
            message["data"] = out.data  # for programs reading the trace; no protocol sends it to the server
        self._add(message)

    def _ask(self, tools: list[dict]) -> tuple[dict, Optional[str]]:
        self._fit(tools)
        for attempt in (1, 2):
            payload = self.protocol.request(self.s.messages, tools)
            payload["max_tokens"] = self.max_tokens
            try:
                resp = self.acct.chat(self.client, payload, watch=getattr(self.protocol, "watch", None))
                break
            except ModelError as exc:
                if attempt == 2 or not OVERFLOW_RX.search(str(exc)):
                    if OVERFLOW_RX.search(str(exc)):
                        raise Stop("context_exhausted", f"the server refused the request as too long after compaction: {exc}") from exc
                    raise
                # The server counted more tokens than we estimated: trust it, compact harder, retry once.
                self.s.ledger.tokens_per_char *= 1.5
                self._fit(tools, force=True)
        usage = self.acct.account(resp, payload)
        if resp.malformed:  # the reply itself could not be taken (over the size limit, nested too deep)
            message, malformed = {"role": "assistant", "content": ""}, resp.malformed
        else:
            decoded = self.protocol.decode(resp.message, resp.finish_reason)
            message, malformed = decoded.message, decoded.malformed
        self._add(message, usage={"prompt": usage.prompt, "completion": usage.completion, "cached": usage.cached,
                                  "estimated": usage.estimated, "latency_s": round(resp.latency_s, 4),
                                  "finish_reason": resp.finish_reason, "timings": resp.timings})
        return message, malformed

    # ---- context management ---------------------------------------------------------------
    def _estimate(self, tools: list[dict]) -> int:
        from .accounting import sent_chars

        return int(sent_chars({"messages": self.s.messages, "tools": tools}) * self.s.ledger.tokens_per_char) + 16

    def _fit(self, tools: list[dict], force: bool = False) -> None:
        """Once the next request would pass compact_at of the window, compact older turns until it fits under
        compact_to (the low-water mark: the cache a compaction breaks is prefilled again, so it should buy room)."""
        s = self.s
        target = int(self.context_window * self.h.compact_at) - self.max_tokens
        if not force and self._estimate(tools) <= target:
            return
        low = target if self.h.compact_to is None else int(self.context_window * self.h.compact_to) - self.max_tokens
        before = self._estimate(tools)
        current = s.turn_starts[-1] if s.turn_starts else len(s.messages)
        for stage in (self._drop_old_tool_output, self._trim_current_tool_output, self._drop_old_turns):
            stage(current)
            current = s.turn_starts[-1] if s.turn_starts else len(s.messages)
            if not force and self._estimate(tools) <= low:
                break
        after = self._estimate(tools)
        s.compactions += 1
        self.stats.compactions += 1
        self.rec.event("compaction", s.turn, estimated_before=before, estimated_after=after, target=target, low_water=low,
                       messages=len(s.messages))
        if after > self.context_window - self.max_tokens:
            # Not an outage: this model, window and budget cannot go on. A result, counted in the tables.
            raise Stop("context_exhausted", f"context window of {self.context_window} tokens is too small even after compaction (~{after} needed)")

    def _drop_old_tool_output(self, current: int) -> None:
        messages = self.s.messages
        for i in range(2, current):
            m = messages[i]
            if m["role"] == "tool" and not m["content"].startswith("[compacted"):
                messages[i] = {**m, "content": f"[compacted: {len(m['content'])} characters of tool output removed]"}

    def _trim_current_tool_output(self, current: int) -> None:
        messages = self.s.messages
        tools_here = [i for i in range(current, len(messages)) if messages[i]["role"] == "tool"]
        for i in tools_here[:-1]:
            m = messages[i]
            if len(m["content"]) > 600:
                messages[i] = {**m, "content": m["content"][:500] + f"\n[compacted: {len(m['content']) - 500} more characters removed]"}

    def _drop_old_turns(self, current: int) -> None:
        """Keep system prompt, question and the current turn; earlier turns leave one note."""
        s = self.s
        head = s.messages[:2]
        if current <= 2:
            return
        note = {"role": "user", "content": f"[compacted: {current - 2} earlier messages removed to fit the context window]"}
        tail = s.messages[current:]
        if tail and tail[0]["role"] == "user" and tail[0]["content"] == CONTINUE:
            tail = tail[1:]
        s.messages = head + [note] + ([{"role": "user", "content": CONTINUE}] if s.turn > 1 else []) + tail
        s.turn_starts = [3]

    # ---- bookkeeping ----------------------------------------------------------------------
    def _request_failed(self, failure: dict) -> None:
        """A request that got no usable answer, in the trace with its time (billed to model time by the Accountant)."""
        self.rec.event("request_failed", self.s.turn, step=self.s.step, **failure)

    def _add(self, message: dict, **extra) -> None:
        self.s.messages.append(message)
        self.rec.event("message", self.s.turn, message=message, **extra)

    def _record_call(self, row: ToolRow) -> None:
        self.stats.tool_calls += 1
        self.rec.tool_call(row)

    def _end_turn(self, checkpoint: bool = True) -> None:
        s = self.s
        stats = self.acct.end_turn()
        record_turn(self.rec, s, stats, self._backstop())
        if checkpoint:
            self._checkpoint()

    def _backstop(self) -> Optional[str]:
        """ANSWER.md's text, filled from the model's last own words when it wrote none (backstop)."""
        last = next((visible_text(m.get("content", "")) for m in reversed(self.s.messages)
                     if m["role"] == "assistant" and visible_text(m.get("content", ""))), "")
        return backstop(self.ws.work, self.s, last)

    def _update_record(self, stop: str, detail: str) -> None:
        """Counters into the run record (the Recorder writes it)."""
        self.acct.settle(self.rec.record, self.s, self.rec.calls, stop, detail)

    # ---- checkpoints (resume) -------------------------------------------------------------
    def _checkpoint(self) -> None:
        """Everything needed to continue this run later from this step boundary: the state, whole."""
        from .state import dump

        self.rec.checkpoint({"harness": "native", "version": STATE_VERSION, "loop": dump(self.s)})


def restore(checkpoint: dict) -> LoopState:
    """The loop state a checkpoint holds (version 1, before the state was one object, is upgraded)."""
    from ..errors import SearchboxError
    from .state import load

    version = checkpoint.get("version")
    if version == 1:
        checkpoint = {"version": STATE_VERSION, "loop": _upgrade_v1(checkpoint)}
    elif version != STATE_VERSION:
        raise SearchboxError(f"cannot resume: checkpoint version {version} (expected {STATE_VERSION})")
    try:
        return load(LoopState, checkpoint["loop"])
    except (KeyError, ValueError, TypeError) as exc:
        raise SearchboxError(f"cannot resume: the checkpoint does not hold a loop state ({exc})") from exc


def _upgrade_v1(old: dict) -> dict:
    """A version-1 checkpoint (seventeen fields copied by hand) as a LoopState dump."""
    def stats(data: Optional[dict], turn: bool) -> Optional[dict]:
        if data is None:
            return None
        out = {k: data.get(k, 0) for k in ("llm_calls", "llm_s", "tool_s", "setup_s", "tool_calls", "malformed", "estimated_calls")}
        out["malformed_calls"] = 0
        if turn:
            usage = data.get("usage") or {}
            out.update(usage={k: usage.get(k, 0 if k != "estimated" else False) for k in ("prompt", "completion", "cached", "estimated")},
                       compactions=data.get("compactions", 0), context_tokens=data.get("context_tokens", 0),
                       ended_by=data.get("ended_by", ""), clock={"before": data.get("elapsed_before", 0.0)})
        return out

    total = old.get("total") or {}
    return {
        "protocol": old.get("protocol", "native"), "messages": old["messages"], "turn_starts": old["turn_starts"],
        "turn": old["turn"], "step": old["step"], "repeats": old["repeats"], "last_call": old["last_call"],
        "ledger": {"total": {k: total.get(k, 0 if k != "estimated" else False) for k in ("prompt", "completion", "cached", "estimated")},
                   "cum": stats(old.get("cum") or {}, turn=False), "turn": stats(old.get("stats"), turn=True),
                   "clock": {"before": old.get("elapsed_s", 0.0)}, "tokens_per_char": old.get("tokens_per_char", 1 / 3)},
        "continues": old.get("continues", 0), "compactions": old.get("compactions", 0), "backstop_text": old.get("backstop_text"),
        "last_snapshot": old.get("last_snapshot"), "answer_source": old.get("answer_source", "none"),
        "tools": {"delivered": old.get("delivered", 0)},
    }
