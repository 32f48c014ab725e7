"""The harness interface: what `searchbox.run` hands a harness (RunContext) and what it asks of it (Harness); CliHarness,
the shape the agent CLIs (pi/, claudecode/, codex/) share."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Optional

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..config import RunConfig
    from ..corpus.dataroom import Workspace
    from ..record.record import Recorder, RunRecord
    from ..record.spec import RunSpec
    from ..tools import Toolset

STOP_REASONS = ("budget_spent", "first_turn_done", "token_budget_spent", "ceiling_seconds", "context_exhausted",
                "model_error", "tool_error", "interrupted", "paused")
# Stops that say nothing about the model: the run is not a result, a relaunch redoes it.
INFRA_STOPS = frozenset({"model_error", "tool_error", "interrupted", "paused"})
CONTINUE = "Continue."  # what budget forcing sends when the model goes idle with budget left


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
class RunContext:
    """One run as a harness receives it: the resolved config, the question, and the run's services.

    run.py builds it the same way for a new run and a resumed one. The recorder is the only writer of the
    run's artifacts; the harness fills `recorder.record` (stop reason, counters) before it returns.
    """

    config: "RunConfig"
    spec: "RunSpec"  # the run resolved once: its key hashes this, and the harness sends what it holds (prompt, protocol, task)
    question: str
    workspace: "Workspace"  # work/ (the agent's) and the read-only dataroom inside it
    client: Any  # llm.ChatClient, or a control policy with the same chat() interface
    toolset: "Toolset"  # the run's tools: validates what the model sends, runs it, renders text and data
    recorder: "Recorder"
    context_window: int  # tokens per request the server allows
    started: float  # time.monotonic() when the run (or this resume) began: the ceiling counts setup too
    should_pause: Callable[[], bool]  # polled between steps: True ends the run as `paused`, resumable

    @property
    def record(self) -> "RunRecord":
        return self.recorder.record


class Harness(abc.ABC):
    """A loop that drives the model over the run's tools until a stop.

    `run` and `resume` always return normally with the record filled (stop reason in STOP_REASONS) and
    the logs complete; they raise only what the caller must see (KeyboardInterrupt is a stop, not a raise).
    Checkpoints go through `ctx.recorder.checkpoint({"harness": kind, ...})`; `resume` gets that dict back.
    """

    kind: ClassVar[str]
    # The tool protocol this harness always speaks, whatever model.protocol resolves to (None: the resolved one). The
    # run key's prompt is that protocol's, so key.json says what the record's `protocol` says.
    speaks: ClassVar[Optional[str]] = None

    def check(self, cfg: "RunConfig") -> None:
        """Refuse (ConfigError/SetupError, one line with the fix) before anything is written when this harness cannot run."""

    def refuse_control(self, cfg: "RunConfig") -> None:
        """An agent harness's one line for a control policy: the controls are no model an agent could call."""
        if cfg.model.policy:
            raise ConfigError(f"harness={self.kind} drives a model; the control policy {cfg.model.policy!r} runs under harness=native")

    def identity(self, cfg: "RunConfig") -> dict:
        """What the run key needs beyond the config: the harness's own version and whatever searchbox adds to it."""
        return {}

    def protocol(self, spec: Any) -> str:
        """The tool protocol this harness speaks on the wire for a resolved run (a RunSpec): the record says it from the
        first write, before the first call, so a live dashboard never shows a run without one."""
        return self.speaks or spec.protocol  # a run keyed before `speaks` may hold the protocol `auto` picked

    def restore(self, checkpoint: dict) -> Any:
        """The state a checkpoint holds, checked whole (shape and types): a resume calls it before it writes anything,
        so a damaged state.json is one line (SearchboxError) and leaves the run as it was."""
        return checkpoint

    @abc.abstractmethod
    def run(self, ctx: RunContext) -> None:
        """Run a new run to a stop."""

    @abc.abstractmethod
    def resume(self, ctx: RunContext, checkpoint: dict) -> None:
        """Continue a run from the last checkpoint it wrote, with continuous accounting."""


class CliHarness(Harness):
    """An agent CLI under the reference protocol: its own loop in the run's box, its model calls and the run's tools
    through the channel (harness/cli_run.py). A subclass names its run class, imported on first use (loading a
    harness to validate a config imports no agent), and what it refuses to run under beyond a control policy."""

    @abc.abstractmethod
    def run_class(self) -> Any:
        """The agent's cli_run.CliRun: its install (`require`), its state (`restore`) and its run."""

    def refuse(self, cfg: "RunConfig") -> None:
        """Refuse a config the agent cannot run under (a tool protocol, no box), in one line with the fix."""

    def refuse_protocol(self, cfg: "RunConfig") -> None:
        """The agents call tools the server's own way (`speaks`): a configured JSON protocol would key a run by a prompt
        and grammar the agent never sends, so it is refused, for every agent alike."""
        if cfg.model.protocol not in (self.speaks, "auto"):
            raise ConfigError(f"harness={self.kind} calls tools the server's own way (model.protocol=native or auto); "
                              f"model.protocol={cfg.model.protocol!r} runs under harness=native")

    def check(self, cfg: "RunConfig") -> None:
        self.refuse_control(cfg)
        self.refuse_protocol(cfg)
        self.refuse(cfg)
        self.run_class().require()

    # The agents call tools the OpenAI way (or as the API's tool_use blocks): the server's own tool calls. Their task is
    # the native loop's system prompt, which the key's prompt then holds as sent.
    speaks = "native"

    def run(self, ctx: RunContext) -> None:
        run = self.run_class()
        run(ctx, run.require()).run()

    def restore(self, checkpoint: dict) -> Any:
        return self.run_class().restore(checkpoint)

    def resume(self, ctx: RunContext, checkpoint: dict) -> None:
        run = self.run_class()
        state = run.restore(checkpoint)
        session = run.saved_session(ctx.workspace.run_dir, state)
        run(ctx, run.require(), state).run(resumed=True, session=session)
