"""Tools the agent can call: the catalog selects them, the Toolset validates arguments and runs them."""

from __future__ import annotations

import importlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from jsonschema import Draft202012Validator

from .. import safefs
from ..errors import BackendError
from .catalog import CATALOG, ToolSpec, select
from .context import InvalidCall, ToolContext, ToolError, ToolResult

__all__ = ["CATALOG", "ToolSpec", "ToolContext", "ToolError", "InvalidCall", "ToolResult", "Toolset", "Outcome", "select",
           "BackendError"]

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


class Toolset:
    """The enabled tools of one run.

    `call` turns every failure caused by the model's arguments into an error Outcome the model reads.
    A failure of the harness's own backends (BackendError), or a bug, is raised: the run stops as
    `tool_error` instead of counting a broken embedder as model behaviour.
    """

    def __init__(self, specs: list[ToolSpec], ctx: ToolContext, delivery: str = "inline"):
        self.specs = {s.name: s for s in specs}
        self.ctx = ctx
        self.delivery = delivery
        self.delivered = 0  # results written under work/results/
        self._validators = {s.name: Draft202012Validator(s.parameters) for s in specs}
        self._impls: dict[str, Callable[..., Any]] = {}

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

    def call(self, name: str, raw_arguments: str | dict | None) -> Outcome:
        start, setup_before = time.monotonic(), self._setup_s()
        self.ctx.programs, self.ctx.paths = [], []
        args_text = raw_arguments if isinstance(raw_arguments, str) else json.dumps(raw_arguments or {})
        try:
            spec = self.specs.get(name)
            if spec is None:
                raise ToolError(f"unknown tool {name!r}; available: {', '.join(self.specs)}")
            args = self._parse(args_text)
            errors = sorted(self._validators[name].iter_errors(args), key=lambda e: list(e.path))
            if errors:
                raise ToolError("invalid arguments: " + "; ".join(_describe(e) for e in errors[:3]))
            text, data = _rendered(self._impl(spec)(self.ctx, **args))
            ok, error = True, ""
        except ToolError as exc:
            text, data, ok, error = f"Error: {exc}", None, False, str(exc)
        except BackendError:
            raise
        except Exception as exc:  # a harness bug is not the model's doing: stop the run, keep the traceback
            raise BackendError(f"tool {name} failed inside the harness: {type(exc).__name__}: {exc}") from exc
        # File names that are not UTF-8 arrive as surrogate escapes: make them printable once, here.
        text, error = _printable(text), _printable(error)
        self.ctx.paths = [_printable(p) for p in self.ctx.paths]
        delivered = ""
        if ok and self.delivery == "file" and name not in INLINE_ALWAYS:
            delivered, shown = self._deliver(name, text)
            data = {"delivered": delivered, "chars": len(text)} if delivered else None  # programs see what the model saw
        else:
            cap = self.ctx.harness.output_cap_chars
            shown = text if len(text) <= cap else text[:cap] + f"\n[output truncated: {len(text)} characters in all]"
        setup_s = self._setup_s() - setup_before
        total_ms = (time.monotonic() - start) * 1000
        return Outcome(name, args_text, ok, shown, error, list(self.ctx.programs), list(self.ctx.paths),
                       max(0.0, total_ms - setup_s * 1000), setup_s * 1000, len(text), delivered, data)

    def _deliver(self, name: str, text: str) -> tuple[str, str]:
        """delivery=file: the whole output goes to work/results/<n>-<tool>.txt; the message says where and how long."""
        self.delivered += 1
        rel = f"results/{self.delivered}-{name}.txt"
        try:
            safefs.write_text(self.ctx.work, rel, text, replace=False)
        except safefs.UnsafePath as exc:  # the agent put something in the way: tell it, as any tool error
            return "", f"Error: could not deliver the result to {rel}: {exc}"
        lines = text.count("\n") + 1 if text else 0
        return rel, f"Result written to {rel} ({len(text)} characters, {lines} lines). Open it with read(path=\"{rel}\")."

    @staticmethod
    def _parse(text: str) -> dict:
        try:
            args = json.loads(text) if text and text.strip() else {}
        except ValueError as exc:
            raise ToolError(f"arguments are not valid JSON ({exc})") from exc
        if not isinstance(args, dict):
            raise ToolError("arguments must be a JSON object")
        return args


def _rendered(result: Any) -> tuple[str, Any]:
    """(text the model reads, data for programs): a ToolResult is both, a dict or list is its own data, a string has none."""
    if isinstance(result, ToolResult):
        return str(result.text), result.data
    if isinstance(result, str):
        return result, None
    return json.dumps(result, ensure_ascii=False), result


def _printable(text: str) -> str:
    """Valid Unicode: lone surrogates (undecodable bytes of file names) become U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace") if text else text


def _describe(err) -> str:
    where = ".".join(str(p) for p in err.path)
    return f"{where}: {err.message}" if where else err.message
