"""The run of an agent CLI (pi/, claudecode/, codex/) under the reference protocol: what the three share, once.

Every agent CLI is driven the same way, whatever its wire: the task joins its own system prompt, the question is its
first prompt, a turn is one prompt to idle, a bare `Continue.` starts the next turn while the budget lasts, and after
each turn the backstop fills ANSWER.md from the model's last own words unless the model wrote it. Its model calls
reach the channel (on the channel's threads) and go to the run's endpoint only, through the same Accountant as the
native loop; a stop decided there refuses the agent's call (the agent retries nothing) and the main thread ends the
turn or the run. Its tool calls reach the channel too and run in the native loop's per-call box, so tool rows,
evidence and the trace's tool results are what the harness ran, never what the agent says it did.

CliRun holds that protocol and the bookkeeping, and its channel side (cli_channel.ChannelSide) the agent's calls; a
subclass holds what is its agent's own: how it starts and stops its process (`_start`, `_shutdown`, `_save_session`),
how a prompt reaches it (`_send`), how its turn ends (`_wait_idle`, `_abort`), its API's shapes (`_upstream`,
`_message`, `_reply`, `_error`), which model call a tool call answers (`_claim`), and its record (`_about`).
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable, ClassVar, Optional

from ..corpus import safefs
from ..errors import BackendError, ModelError, SearchboxError
from ..model.protocol import template_supports_tools
from ..paths import atomic_write
from ..tools import Outcome, sandbox
from .accounting import Accountant, Clock, Ledger
from .agent import backstop, record_turn
from .base import CONTINUE, EndTurn, RunContext, Stop
from .cli_channel import ChannelSide
from .state import dump, load

SESSION_CAP = 256 * 1024**2
CHECKPOINT_SESSION = "checkpoint-session.jsonl"  # the agent's session as of the last checkpoint: what a resume continues


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


class CliRun(ChannelSide):
    """One run of an agent CLI. `run()` always leaves complete logs and fills the run record, like the native loop."""

    KIND: ClassVar[str]  # the harness kind: the checkpoint's "harness", the system prompt's event
    NAME: ClassVar[str]  # the agent, for people
    FOLDER: ClassVar[str]  # its folder in the run's folder
    INSIDE: ClassVar[str]  # work/ in the agent's box, where its prompt says its cwd is
    State: ClassVar[type]  # what a resume needs, checkpointed whole
    STATE_VERSION: ClassVar[int]
    STATE_NAME: ClassVar[str]  # the state, in a refused resume's line
    ABORT_S: ClassVar[float] = 60.0  # for the agent to go idle after an abort
    ABORT: ClassVar[str] = "an abort"  # what the harness sends it to end a turn
    hand_over: ClassVar[Optional[Callable[[Path, str], None]]] = staticmethod(_hand_over)  # told of a file the backstop wrote
    require: ClassVar[Callable[[], Any]]  # the agent's install, or the one line that says it is missing

    def __init__(self, ctx: RunContext, install: Any, state: Optional[Any] = None):
        self.ctx, self.h, self.install = ctx, ctx.config.harness, install
        self.rec, self.ws = ctx.recorder, ctx.workspace
        self.s = state or self.State(ledger=Ledger(clock=Clock(started=ctx.started)))
        # every request that got no usable answer (timed out, refused, retried) is in the trace with its time, as in the
        # native loop: the Accountant bills its seconds to model time and calls this
        self.acct = Accountant(self.h, self.s.ledger, on_failure=lambda failure: self._event("request_failed", step=self.s.step, **failure))
        ctx.toolset.state = self.s.tools
        # The model's tools run as the native loop's, with work/ where the agent's prompt says its cwd is
        ctx.toolset.ctx.inside = self.INSIDE if ctx.toolset.ctx.sandbox_mode != "none" else None
        self.folder = self.ws.run_dir / self.FOLDER
        self.lock = threading.RLock()  # the state, the ledger and the recorder, between the main thread and the channel's
        self.chat_lock = threading.Lock()  # one model call at a time
        self.tool_lock = threading.Lock()  # one dataroom tool call at a time (the toolset is not thread-safe)
        self.open = False  # a turn is in progress: the agent may call the model and the tools
        self.pending: Optional[BaseException] = None  # a stop or turn end the channel decided
        self.channel_names = {s["name"] for s in ctx.spec.harness["channel_tools"]}  # as keyed (launch.identity)
        self.logged: set[str] = set(self.s.logged_tools)
        self.calls: dict[str, dict] = {}  # call id -> name, arguments as the model wrote them, step (from its answers)
        self.outcomes: dict[str, Outcome] = {}  # call id -> the outcome of the tool the harness ran
        self.answered: dict[str, tuple[str, str]] = {}  # call id -> (tool, the text the channel answered the agent)
        self.rowed: set[str] = set()  # call ids with a tool row
        self.system_logged = False
        self.box = self.rpc = self.channel = None
        self.aborted, self.abort_by = False, 0.0
        self.watchdog_seen = 0

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
                self._event("resume", in_turn=False, step=0, **self._resume_note(session))
            if self.s.turn > 0:  # resumed at a turn's end: budget forcing decides, as it would have
                self._after_turn()
                self._next_turn()
            else:
                self._checkpoint()  # a run stopped in its first turn resumes from here, with the question
                self._begin_turn()
                self._prompt(self.ctx.question)
            while True:
                self._wait_idle()
                self._end_turn()
                self._after_turn()
                self._next_turn()
        except (KeyboardInterrupt, Exception) as exc:
            stop, detail = self._stop_of(exc)
        finally:
            with self.lock:
                self.open = False
            self._shutdown()
            if stop != "interrupted":  # Ctrl-C stops now; any other end waits for the call the server may still bill
                self._drain()
                self._settle_tools()
            if self.stats is not None and stop != "paused":
                self.stats.ended_by = self.stats.ended_by or "stop"
                self._end_turn(checkpoint=False)  # the last checkpoint (a turn's end) stays where a resume picks up
            with self.lock:
                self._event("stop", reason=stop, detail=detail)
                self._update_record(stop, detail)

    def _stop_of(self, exc: BaseException) -> tuple[str, str]:
        """The stop reason (and detail) of what ended the run; a harness bug keeps its traceback in the trace."""
        if isinstance(exc, KeyboardInterrupt):
            return "interrupted", "KeyboardInterrupt"
        stop = self.acct.stop_of(exc)
        if not isinstance(exc, (Stop, ModelError, BackendError)):
            with self.lock:
                self._event("error", traceback=traceback.format_exc())
        return stop

    def _resume_note(self, session: Optional[bytes]) -> dict:
        """What the resume event says beyond the turn it continues."""
        return {}

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
        self._send(text)

    def _due_cut(self, keep: bool = False) -> Optional[BaseException]:
        """What cuts the turn now, if anything: a stop the channel decided (taken from `pending` unless `keep`), the
        deadlines, a pause. The watchdog's kills go to the trace on the way."""
        with self.lock:
            cut = self.pending
            if not keep:
                self.pending = None
            if self.box is not None and len(self.box.killed) > self.watchdog_seen:
                for why in self.box.killed[self.watchdog_seen:]:
                    self._event("box_killed", why=why)
                self.watchdog_seen = len(self.box.killed)
        if cut is None:
            try:
                self.acct.check_deadlines()
            except (EndTurn, Stop) as exc:
                cut = exc
        if cut is None and self.ctx.should_pause():
            cut = EndTurn("paused")  # a pause cuts the turn; _after_turn then stops the run, resumable
        return cut

    def _check_live(self) -> None:
        """Between the agent's records: a stop ends the run now; a turn's end is the agent's to make, once told."""
        cut = self._due_cut()
        if cut is None:
            self._check_late()
            return
        if isinstance(cut, Stop):
            raise cut
        with self.lock:
            self.open = False
            if self.stats is not None:
                self.stats.ended_by = self.stats.ended_by or cut.ended_by
        if not self.aborted:
            self.aborted, self.abort_by = True, time.monotonic() + self.ABORT_S
            self._abort()

    def _check_late(self) -> None:
        if self.aborted and self.abort_by < time.monotonic():
            raise Stop("tool_error", f"{self.NAME} did not stop within {self.ABORT_S:.0f}s of {self.ABORT}")

    def _end_turn(self, checkpoint: bool = True) -> None:
        s = self.s
        self._settle_tools()
        with self.lock:
            self.open = False
            self._log_unsent_results()
            stats = self.acct.end_turn()
            stats.ended_by = stats.ended_by or "idle"
        live = self._can_save()
        answer = backstop(self.ws.work, s, s.last_text, written=self.hand_over)  # the harness's tools write work/ on disk
        if live and checkpoint:
            self._save_for_resume()
        with self.lock:
            record_turn(self.rec, s, stats, answer)
            if checkpoint:
                self._checkpoint()

    def _settle_tools(self) -> None:
        """Before a turn's row, and once the agent is gone: wait for a tool call in flight (searchbox runs it whatever
        the agent does meanwhile; its own limits end it), so a tool still running when the turn was cut has its row and
        time in this turn (Pi's and Codex's runs did not wait: such a call's row and seconds went to the next turn)."""
        if self.tool_lock.acquire(timeout=self.h.bash_timeout_s + 120):
            self.tool_lock.release()
        else:
            with self.lock:
                self._event("warning", detail="a tool call was still running when the turn's row was written")

    def _can_save(self) -> bool:
        return self.box is not None and self.box.alive()

    def _save_for_resume(self) -> None:
        self._save_session(CHECKPOINT_SESSION)  # its session as of this checkpoint (work/ is on disk already)

    def _check_template(self, detail: str) -> None:
        """Whether the server's chat template shows the model tool schemas (llama-server /props): the agents call tools
        the OpenAI way only, where the native loop falls back to its constrained-JSON protocol. The record says which."""
        get_json = getattr(self.ctx.client, "get_json", None)
        self.s.server_renders_tools = template_supports_tools(get_json("/props") if get_json else None)
        if not self.s.server_renders_tools:
            with self.lock:
                self._event("warning", detail=detail)

    def _count_startup(self, took: float) -> None:
        self.s.startup_s += took
        self.s.ledger.cum.setup_s += took

    def _admit(self, peer) -> bool:
        """The channel serves the agent's box and nothing else: a process of its pid namespace."""
        box = self.box
        return box is not None and box.holds(peer.pid)

    def _drain(self) -> None:
        """Wait for a model call still in flight (the agent died or was killed mid-call): what the server bills is the run's."""
        m = self.ctx.config.model
        if self.chat_lock.acquire(timeout=m.timeout_s * (m.retries + 1) + 10):
            self.chat_lock.release()
        else:
            with self.lock:
                self._event("warning", detail="a model call was still in flight when the run's record was written")

    def _shutdown(self) -> None:
        if self.box is not None:
            self.box.kill()
            self._save_session("session.jsonl")
            stderr = self.box.stderr_text()
            if stderr.strip():
                atomic_write(self.folder / "stderr.log", stderr)
            self.box.release()
        if self.rpc is not None:
            self.rpc.close()
        if self.channel is not None:
            self.channel.close()

    def _why_gone(self) -> str:
        """The agent's death by its cause: the watchdog's kill, else what its exit and its stderr say."""
        if self.box is None:
            return ""
        if self.box.killed:
            return self.box.killed[-1]
        with contextlib.suppress(Exception):
            self.box.proc.wait(timeout=2)
        return self._exit_story()[:500]

    # ---- bookkeeping --------------------------------------------------------------------------------------
    def _event(self, kind: str, **data: Any) -> None:
        self.rec.event(kind, self.s.turn, **data)

    def _checkpoint(self) -> None:
        self.s.logged_tools = sorted(self.logged)
        self.rec.checkpoint({"harness": self.KIND, "version": self.STATE_VERSION, "state": dump(self.s)})

    def _update_record(self, stop: str, detail: str) -> None:
        self.acct.settle(self.rec.record, self.s, self.rec.calls, stop, detail)
        self.rec.record.harness = self._about()

    def _run_facts(self) -> dict:
        """The run-meta facts every agent has, in the order its record lists them."""
        s = self.s
        return {"startup_s": round(s.startup_s, 3), "first_prompt_tokens": s.first_prompt_tokens, "system_prompt_chars": s.system_chars,
                "context_window": self.ctx.context_window, "server_renders_tools": s.server_renders_tools}

    def _channel_facts(self) -> dict:
        """What the channel and the box saw of strangers: every agent's record ends with these (Codex's once had no
        box_killed)."""
        channel = self.channel
        return {"channel_requests": channel.requests if channel else 0, "channel_refused": channel.refused if channel else 0,
                "channel_strangers": channel.strangers if channel else 0, "box_killed": list(self.box.killed) if self.box else []}

    @classmethod
    def restore(cls, checkpoint: dict) -> Any:
        """The state a checkpoint holds, checked whole: a damaged one is one line and leaves the run as it was."""
        if checkpoint.get("version") != cls.STATE_VERSION:
            raise SearchboxError(f"cannot resume: {cls.STATE_NAME} checkpoint version {checkpoint.get('version')} (expected {cls.STATE_VERSION})")
        try:
            return load(cls.State, checkpoint["state"])
        except (KeyError, ValueError, TypeError) as exc:
            raise SearchboxError(f"cannot resume: the checkpoint does not hold a {cls.STATE_NAME} state ({exc})") from exc

    @classmethod
    def saved_session(cls, run_dir: Path, state: Any) -> Optional[bytes]:
        """What a resume hands the agent back: its session as of the checkpoint (none before the first turn ended)."""
        if state.turn == 0:
            return None
        path = Path(run_dir) / cls.FOLDER / CHECKPOINT_SESSION
        if not path.is_file() or path.is_symlink():
            raise SearchboxError(f"{run_dir}: cannot resume: {cls.NAME}'s session as of turn {state.turn} ({path.name}) is missing")
        return path.read_bytes()

    # ---- the agent's own ----------------------------------------------------------------------------------
    def _start(self, session: Optional[bytes]) -> None:
        raise NotImplementedError

    def _send(self, text: str) -> None:
        """A prompt to the agent (the question, or `Continue.`)."""
        raise NotImplementedError

    def _wait_idle(self) -> None:
        """The agent's records until its turn is over, with `_check_live` between them."""
        raise NotImplementedError

    def _abort(self) -> None:
        raise NotImplementedError

    def _exit_story(self) -> str:
        """How the agent's process ended, from its exit status and its stderr."""
        raise NotImplementedError

    def _save_session(self, name: str) -> None:
        raise NotImplementedError

    def _about(self) -> dict:
        """The record's `harness`: what ran, and the agent's own counts."""
        raise NotImplementedError
