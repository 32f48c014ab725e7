"""Per-call accounting every harness shares: deadlines, usage (estimated and marked when missing), the budget, stop reasons.

The native loop calls it around each model request; a harness that runs its own loop (Pi) calls it from the
channel that forwards the loop's chat requests, so both count tokens, time and stops the same way.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..config import HarnessConfig
from ..errors import BackendError, ModelError
from ..model.llm import DeadlineExceeded, Response, Usage, estimate_tokens
from ..model.protocol import wire
from ..record.record import TurnRow
from .base import EndTurn, Stop

TRANSIENT = {"transient": True}  # a field a checkpoint leaves out (a monotonic clock reading means nothing in another process)
ADDED = {"added": "issue 31"}  # a field checkpoints written before it lack (state.load gives them the default)


@dataclass
class Clock:
    """Active seconds: `before` (earlier processes, or before a pause) plus the time since `started`."""

    before: float = 0.0
    started: float = field(default_factory=lambda: time.monotonic(), metadata=TRANSIENT)  # read when made, not when defined

    def elapsed(self) -> float:
        return self.before + time.monotonic() - self.started

    def frozen(self) -> "Clock":
        """This clock as a checkpoint holds it: everything so far in `before`."""
        return Clock(self.elapsed())


@dataclass
class Counters:
    """What a turn adds to the run (and the run's sum of them)."""

    llm_calls: int = 0
    llm_s: float = 0.0
    tool_s: float = 0.0
    setup_s: float = 0.0
    tool_calls: int = 0
    malformed: int = 0  # replies the harness could not understand
    malformed_calls: int = 0  # calls refused as the model sent them
    estimated_calls: int = 0  # responses whose usage the harness estimated
    # Requests that got no usable answer (timed out, refused, dropped), retried or not: their seconds are in llm_s.
    failed_requests: int = field(default=0, metadata=ADDED)

    def add(self, other: "Counters") -> None:
        for f in dataclasses.fields(Counters):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass
class TurnStats(Counters):
    """Counters of the turn in progress."""

    usage: Usage = field(default_factory=Usage)
    compactions: int = 0
    context_tokens: int = 0
    ended_by: str = ""
    clock: Clock = field(default_factory=Clock)

    def elapsed(self) -> float:
        return self.clock.elapsed()

    def row(self, turn: int, total: Usage, answer: Optional[str], changed: bool) -> TurnRow:
        """This turn as a row of turns.parquet (total: the run's usage so far; answer: ANSWER.md after it)."""
        return TurnRow(
            turn=turn, prompt_tokens=self.usage.prompt, completion_tokens=self.usage.completion, cached_tokens=self.usage.cached,
            prompt_tokens_cum=total.prompt, completion_tokens_cum=total.completion, cached_tokens_cum=total.cached,
            context_tokens=self.context_tokens, llm_calls=self.llm_calls, llm_ms=self.llm_s * 1000, tool_ms=self.tool_s * 1000,
            setup_ms=self.setup_s * 1000, tool_calls=self.tool_calls, malformed=self.malformed, estimated_calls=self.estimated_calls,
            compactions=self.compactions, answer_chars=len(answer or ""), answer_changed=changed,
            elapsed_ms=self.elapsed() * 1000, ended_by=self.ended_by,
        )


@dataclass
class Ledger:
    """The accounting state of a run: checkpointed with the harness's own state."""

    total: Usage = field(default_factory=Usage)
    cum: Counters = field(default_factory=Counters)  # finished turns (and calls outside any turn)
    turn: Optional[TurnStats] = None  # the turn in progress
    clock: Clock = field(default_factory=Clock)  # the run's active seconds (a resumed run continues it)
    tokens_per_char: float = 1 / 3  # calibrated from every response's usage


def _chars(value: Any) -> int:
    try:
        return len(json.dumps(value, default=str))
    except (ValueError, RecursionError):
        return 0


def sent_chars(payload: dict) -> int:
    """What a request sends, in characters: its messages as the server gets them (a tool result's `data` is the
    harness's own and never sent) and its tools (or the constrained-JSON schema)."""
    messages = [wire(m) if isinstance(m, dict) else m for m in payload.get("messages", [])]
    return _chars(messages) + _chars(payload.get("tools") or payload.get("response_format") or "")


def said_chars(resp: Response) -> int:
    """What a response said, in characters (the body's size when it was not taken apart)."""
    if not resp.message:
        return resp.body_chars
    message = {k: v for k, v in resp.message.items() if k != "role"}
    return _chars(message) or resp.body_chars


def stop_of(exc: BaseException, run_over: bool) -> tuple[str, str]:
    """The stop reason (and detail) an exception that ended a run means."""
    if isinstance(exc, Stop):
        return exc.reason, exc.detail
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", "KeyboardInterrupt"
    if isinstance(exc, DeadlineExceeded):
        return "ceiling_seconds", str(exc)
    if isinstance(exc, ModelError):
        return ("ceiling_seconds", str(exc)) if run_over else ("model_error", str(exc))
    if isinstance(exc, BackendError):
        return "tool_error", str(exc)
    return "tool_error", f"harness error: {type(exc).__name__}: {exc}"  # a bug: not a result, and a sweep goes on


class Accountant:
    """Deadlines before a model call, usage after it, the budget between: one instance per run, over its Ledger."""

    def __init__(self, harness: HarnessConfig, ledger: Ledger, on_failure: Optional[Callable[[dict], None]] = None):
        self.h, self.ledger = harness, ledger
        self.on_failure = on_failure  # gets each failed request ({attempt, status, error, seconds, at}): the trace's event

    # ---- turns ----------------------------------------------------------------------------
    def begin_turn(self) -> TurnStats:
        self.ledger.turn = TurnStats()
        return self.ledger.turn

    def end_turn(self) -> TurnStats:
        """Close the turn in progress: its counters join the run's."""
        stats, self.ledger.turn = self.ledger.turn, None
        self.ledger.cum.add(stats)
        return stats

    # ---- deadlines ------------------------------------------------------------------------
    def elapsed(self) -> float:
        """Active seconds of the run: a paused run's clock stops while it waits."""
        return self.ledger.clock.elapsed()

    def run_over(self) -> bool:
        return bool(self.h.run_ceiling_s) and self.elapsed() > self.h.run_ceiling_s

    def stop_of(self, exc: BaseException) -> tuple[str, str]:
        """The stop reason (and detail) of what ended the run, one rule for every harness: a model error past the run's
        ceiling is the ceiling only when the model had answered in it; a run it never answered is model_error, an
        infrastructure stop redone on relaunch (the agent CLIs' runs called it ceiling_seconds, a result)."""
        return stop_of(exc, self.run_over() and self.answered())

    def deadline(self) -> tuple[Optional[float], str]:
        """The monotonic time by which the next HTTP call (with its retries) must be done, and whose it is (run|turn)."""
        now = time.monotonic()
        ends = []
        if self.h.run_ceiling_s:
            ends.append((now + self.h.run_ceiling_s - self.elapsed(), "run"))
        if self.h.turn_ceiling_s and self.ledger.turn is not None:
            ends.append((now + self.h.turn_ceiling_s - self.ledger.turn.elapsed(), "turn"))
        return min(ends) if ends else (None, "")

    def check_deadlines(self) -> None:
        """Stop the run past its ceiling; end the turn past its own."""
        if self.run_over():
            raise Stop("ceiling_seconds", f"run passed {self.h.run_ceiling_s}s")
        turn = self.ledger.turn
        if self.h.turn_ceiling_s and turn is not None and turn.elapsed() > self.h.turn_ceiling_s:
            raise EndTurn("turn_ceiling")

    def chat(self, client: Any, payload: dict, watch: Any = None) -> Response:
        """One model call under the run's and the turn's deadlines: a missed turn deadline ends the turn, the run's the run.

        Every request that failed on the way (timed out, refused, dropped, retried or not) is billed to model time and
        counted, and `on_failure` (the harness's trace) gets each. A deadline that passes before the model answered
        anything in this turn is not a result: the run stops as model_error (an infrastructure stop, redone on relaunch),
        never as a budget or ceiling the model spent."""
        deadline, binding = self.deadline()
        try:
            if watch is not None:  # the JSON protocol's loop watcher (ChatClient.chat streams the reply through it)
                return client.chat(payload, deadline=deadline, watch=watch)
            return client.chat(payload, deadline=deadline)
        except DeadlineExceeded as exc:
            if not self.answered():
                raise Stop("model_error", f"the model never answered ({binding} deadline passed): {exc}") from exc
            if binding == "turn":
                raise EndTurn("turn_ceiling") from exc
            raise Stop("ceiling_seconds", f"run passed {self.h.run_ceiling_s}s: {exc}") from exc
        finally:
            self._bill_failures(client)

    def answered(self) -> bool:
        """Whether the turn in progress (or, between turns, the run) has a completed model call."""
        counters = self.ledger.turn if self.ledger.turn is not None else self.ledger.cum
        return counters.llm_calls > 0

    def _bill_failures(self, client: Any) -> None:
        take = getattr(client, "take_failures", None)
        failures = take() if callable(take) else []
        counters = self.ledger.turn if self.ledger.turn is not None else self.ledger.cum
        for failure in failures:
            counters.failed_requests += 1
            counters.llm_s += float(failure.get("seconds") or 0.0)
            if self.on_failure is not None:
                self.on_failure(failure)

    # ---- tokens ---------------------------------------------------------------------------
    def account(self, resp: Response, payload: dict) -> Usage:
        """Add one response's tokens to the turn and the run. Usage the server did not give (or gave as nonsense) is
        estimated from the characters sent and said, and marked; billed usage calibrates the estimate."""
        ledger = self.ledger
        sent = sent_chars(payload)
        usage = resp.usage
        if usage.estimated:
            usage = Usage(usage.prompt or estimate_tokens(sent, ledger.tokens_per_char),
                          usage.completion or max(1, estimate_tokens(said_chars(resp), ledger.tokens_per_char)),
                          min(usage.cached, usage.prompt), estimated=True)
        elif usage.prompt > 0 and sent > 0:
            ledger.tokens_per_char = usage.prompt / sent
        counters = ledger.turn if ledger.turn is not None else ledger.cum
        counters.llm_calls += 1
        counters.llm_s += resp.latency_s
        counters.estimated_calls += int(usage.estimated)
        sums = [ledger.total] + ([ledger.turn.usage] if ledger.turn is not None else [])
        for acc in sums:
            acc.prompt += usage.prompt
            acc.completion += usage.completion
            acc.cached += usage.cached
        if ledger.turn is not None:
            ledger.turn.context_tokens = usage.prompt + usage.completion
        return usage

    def spent_tokens(self) -> int:
        u = self.ledger.total
        return {"total": u.total, "prompt": u.prompt, "completion": u.completion, "uncached_prompt": u.uncached_prompt,
                "input": u.uncached_prompt}[self.h.token_metric]

    def check_token_budget(self) -> None:
        if self.h.budget_unit == "tokens" and self.spent_tokens() >= self.h.budget:
            raise Stop("token_budget_spent", f"{self.spent_tokens()} {self.h.token_metric} tokens >= {self.h.budget}")

    def check_budget_after_turn(self, turns: int) -> None:
        """Between turns: whether the budget (and the run's ceiling) allows another."""
        if not self.h.force_budget:
            raise Stop("first_turn_done")
        if self.h.budget_unit == "turns" and turns >= self.h.budget:
            raise Stop("budget_spent", f"{turns} turns")
        self.check_token_budget()
        if turns >= self.h.max_turns:
            raise Stop("budget_spent", f"max_turns={self.h.max_turns} reached before the token budget")
        if self.run_over():
            raise Stop("ceiling_seconds", f"run passed {self.h.run_ceiling_s}s")

    # ---- the record -----------------------------------------------------------------------
    def settle(self, record: Any, state: Any, calls: list, stop: str, detail: str) -> None:
        """The run record at a stop, whichever harness ran: why it stopped, the loop's counters (`state`: turn,
        continues, compactions, answer_source), the accounting (fill) and the tool calls that failed."""
        record.stop_reason, record.stop_detail = stop, detail
        record.turns, record.continues_sent, record.compactions = state.turn, state.continues, state.compactions
        self.fill(record)
        record.tool_errors = sum(1 for c in calls if not c.ok)
        record.answer_source = state.answer_source

    def fill(self, record: Any) -> None:
        """Tokens, counters and clocks into the run record."""
        from ..record.record import Tokens

        u, c = self.ledger.total, Counters()
        c.add(self.ledger.cum)
        if self.ledger.turn is not None:  # a paused run's turn in progress: its record holds what it did so far
            c.add(self.ledger.turn)
        record.tokens = Tokens(u.prompt, u.completion, u.cached, u.total, u.uncached_prompt, c.estimated_calls)
        record.llm_calls, record.tool_calls, record.failed_requests = c.llm_calls, c.tool_calls, c.failed_requests
        record.malformed_replies, record.malformed_calls = c.malformed, c.malformed_calls
        record.elapsed_s, record.llm_s = round(self.elapsed(), 3), round(c.llm_s, 3)
        record.tool_s, record.setup_s = round(c.tool_s, 3), round(c.setup_s, 3)
