"""Tools the agent can call: the catalog selects them, the Toolset validates arguments and runs them."""

from __future__ import annotations

import importlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..corpus import safefs
from ..bounds import valid_text
from ..errors import BackendError
from . import validate
from .catalog import CATALOG, ToolSpec, offered, select
from .context import InvalidCall, ToolContext, ToolError, ToolResult

__all__ = ["CATALOG", "ToolSpec", "ToolContext", "ToolError", "InvalidCall", "ToolResult", "Toolset", "ToolsetState", "Outcome",
           "select", "BackendError"]

# With delivery=file these still answer inline: they are how the agent opens a delivered result,
# or they only report on the agent's own writing.
INLINE_ALWAYS = frozenset({"read", "write", "edit"})


@dataclass
class Outcome:
    """One executed tool call, as the recorder logs it and the model reads it."""

    tool: str
    arguments: str
    ok: bool
    output: str  # what goes back to the model (capped)
    error: str = ""
    programs: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    duration_ms: float = 0.0  # the call itself, without backend setup (model loading, first index build)
    setup_ms: float = 0.0
    output_chars: int = 0  # before capping
    delivered: str = ""  # with delivery=file: where the full output was written (relative to work/)
    data: Any = None  # the result as data for programs; only what the model saw (a delivered result: where and how long)
    malformed: bool = False  # refused as the model sent it (InvalidCall): counted as a malformed call
    opened: Optional[list[str]] = None  # bash: work/-relative files its processes opened to read (tools.opens); None: not observed


@dataclass
class ToolsetState:
    """What a toolset changes as a run goes on (checkpointed with the harness's state)."""

    delivered: int = 0  # results written under work/results/ (names the next one)


class Toolset:
    """The enabled tools of one run.

    Anything the model sends is the model's: `call` checks the name and every argument against the catalog
    before any tool runs, and answers every failure caused by the model's output (bad arguments, or an
    argument a tool finds unusable later: InvalidCall) as a tool error the model reads, counted as a
    malformed call. A failure of the harness's own backends (BackendError), or a bug, is raised: the run
    stops as `tool_error` instead of counting a broken embedder as model behaviour.
    """

    def __init__(self, specs: list[ToolSpec], ctx: ToolContext, delivery: str = "inline"):
        self.specs = {s.name: s for s in specs}
        self.ctx = ctx
        self.delivery = delivery
        self.state = ToolsetState()
        self._validators = {s.name: validate.validator(s) for s in specs}
        self._impls: dict[str, Callable[..., Any]] = {}

    @property
    def delivered(self) -> int:
        return self.state.delivered

    @property
    def names(self) -> list[str]:
        return list(self.specs)

    def schemas(self) -> list[dict]:
        return [s.schema() for s in self.specs.values()]

    def _impl(self, spec: ToolSpec) -> Callable[..., Any]:
        if spec.name not in self._impls:
            module, func = spec.impl.split(":")
            self._impls[spec.name] = getattr(importlib.import_module(f"{__name__}.{module}"), func)
        return self._impls[spec.name]

    def _setup_s(self) -> float:
        timing = getattr(self.ctx.retrieval, "timing", None)
        return float(getattr(timing, "setup_s", 0.0) or 0.0)

    def call(self, name: Any, raw_arguments: Any) -> Outcome:
        start, setup_before = time.monotonic(), self._setup_s()
        self.ctx.programs, self.ctx.paths, self.ctx.opened = [], [], None
        args_text, malformed = _arguments_text(raw_arguments), False
        try:
            if args_text is None:
                raise InvalidCall("arguments must be a JSON object (these cannot be written as JSON: nested too deep?)")
            if not isinstance(name, str):
                raise InvalidCall(f"the tool name must be a string, not {type(name).__name__}")
            spec = self.specs.get(name)
            if spec is None:
                raise InvalidCall(f"unknown tool {valid_text(name)[:200]!r}; available: {', '.join(self.specs)}")
            args = validate.arguments(spec, args_text, self._validators[name])
            text, data = _rendered(self._impl(spec)(self.ctx, **args))
            ok, error = True, ""
        except ToolError as exc:
            text, data, ok, error = f"Error: {exc}", None, False, str(exc)
            malformed = isinstance(exc, InvalidCall)
        except BackendError:
            raise
        except Exception as exc:  # a harness bug is not the model's doing: stop the run, keep the traceback
            raise BackendError(f"tool {name} failed inside the harness: {type(exc).__name__}: {exc}") from exc
        # File names that are not UTF-8 arrive as surrogate escapes: make them printable once, here.
        text, error = valid_text(text), valid_text(error)
        self.ctx.paths = [valid_text(p) for p in self.ctx.paths]
        delivered = ""
        if ok and self.delivery == "file" and name not in INLINE_ALWAYS:
            delivered, shown = self._deliver(name, text)
            data = {"delivered": delivered, "chars": len(text)} if delivered else None  # programs see what the model saw
        else:
            cap = self.ctx.harness.output_cap_chars
            shown = text if len(text) <= cap else text[:cap] + f"\n[output truncated: {len(text)} characters in all]"
        setup_s = self._setup_s() - setup_before
        total_ms = (time.monotonic() - start) * 1000
        return Outcome(name if isinstance(name, str) else str(name), args_text or "", ok, shown, error, list(self.ctx.programs),
                       list(self.ctx.paths), max(0.0, total_ms - setup_s * 1000), setup_s * 1000, len(text), delivered, data, malformed,
                       None if self.ctx.opened is None else [valid_text(p) for p in self.ctx.opened])

    def _deliver(self, name: str, text: str) -> tuple[str, str]:
        """delivery=file: the whole output goes to work/results/<n>-<tool>.txt; the message says where and how long."""
        self.state.delivered += 1
        rel = f"results/{self.state.delivered}-{name}.txt"
        text = _laid_out(text)
        try:
            safefs.write_text(self.ctx.work, rel, text, replace=False)
        except safefs.UnsafePath as exc:  # the agent put something in the way: tell it, as any tool error
            return "", f"Error: could not deliver the result to {rel}: {exc}"
        lines = text.count("\n") + 1 if text else 0
        return rel, f"Result written to {rel} ({len(text)} characters, {lines} lines). Open it with read(path=\"{rel}\")."


def _laid_out(text: str) -> str:
    """A delivered output as its file holds it: JSON (a search's results) one field per line, so that `read` pages
    through it; one line of 12,688 characters showed a reader only its first output cap's worth. Other text as is."""
    if not text.startswith(("{", "[")):
        return text
    try:
        return json.dumps(json.loads(text), ensure_ascii=False, indent=1)
    except (ValueError, RecursionError):
        return text


def _rendered(result: Any) -> tuple[str, Any]:
    """(text the model reads, data for programs): a ToolResult is both, a dict or list is its own data, a string has none."""
    if isinstance(result, ToolResult):
        return str(result.text), result.data
    if isinstance(result, str):
        return result, None
    return json.dumps(result, ensure_ascii=False), result


def _arguments_text(raw: Any) -> Optional[str]:
    """The arguments as text (what the row records; an object a server sent parsed is written back as JSON), None if impossible."""
    if raw is None or isinstance(raw, str):
        return raw if raw is not None else "{}"
    try:
        return json.dumps(raw, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return None
