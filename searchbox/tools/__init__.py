"""Tools the agent can call: the catalog selects them, the Toolset validates arguments and runs them."""

from __future__ import annotations

import importlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from jsonschema import Draft202012Validator

from .catalog import CATALOG, ToolSpec, select
from .context import ToolContext, ToolError

__all__ = ["CATALOG", "ToolSpec", "ToolContext", "ToolError", "Toolset", "Outcome", "select"]


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
    duration_ms: float = 0.0
    output_chars: int = 0  # before capping


class Toolset:
    """The enabled tools of one run. `call` never raises: every failure becomes an error Outcome."""

    def __init__(self, specs: list[ToolSpec], ctx: ToolContext):
        self.specs = {s.name: s for s in specs}
        self.ctx = ctx
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

    def call(self, name: str, raw_arguments: str | dict | None) -> Outcome:
        start = time.monotonic()
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
            result = self._impl(spec)(self.ctx, **args)
            text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
            ok, error = True, ""
        except ToolError as exc:
            text, ok, error = f"Error: {exc}", False, str(exc)
        except Exception as exc:  # a tool bug must not end the run; the model sees it, the log keeps it
            text, ok, error = f"Error: {type(exc).__name__}: {exc}", False, f"{type(exc).__name__}: {exc}"
        # File names that are not UTF-8 arrive as surrogate escapes: make them printable once, here.
        text, error = _printable(text), _printable(error)
        self.ctx.paths = [_printable(p) for p in self.ctx.paths]
        cap = self.ctx.harness.output_cap_chars
        shown = text if len(text) <= cap else text[:cap] + f"\n[output truncated: {len(text)} characters in all]"
        return Outcome(name, args_text, ok, shown, error, list(self.ctx.programs), list(self.ctx.paths),
                       (time.monotonic() - start) * 1000, len(text))

    @staticmethod
    def _parse(text: str) -> dict:
        try:
            args = json.loads(text) if text and text.strip() else {}
        except ValueError as exc:
            raise ToolError(f"arguments are not valid JSON ({exc})") from exc
        if not isinstance(args, dict):
            raise ToolError("arguments must be a JSON object")
        return args


def _printable(text: str) -> str:
    """Valid Unicode: lone surrogates (undecodable bytes of file names) become U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace") if text else text


def _describe(err) -> str:
    where = ".".join(str(p) for p in err.path)
    return f"{where}: {err.message}" if where else err.message
