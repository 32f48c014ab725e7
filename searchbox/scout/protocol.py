"""How scout actions cross the wire: a constrained JSON array of 1-3 actions, or native parallel tool calls.

The loop keeps one canonical, OpenAI-format message list (assistant messages with `tool_calls`,
one `tool` message per call); a protocol encodes it into a request and decodes a response into
calls, like searchbox.model.protocol does for the dataroom agent.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Optional

from ..model.llm import ChatClient
from ..model.protocol import NativeProtocol, _call_id, template_supports_tools
from ..tools.catalog import ToolSpec
from .actions import ACTIONS, signature

STRING_CAP = 200  # longest string the constrained grammar lets a model emit (a tiny model otherwise runs on)
KEPT_CHARS = 8000  # longest text of one response the history keeps (the whole response is the model's, not the context's)


@dataclass
class Call:
    """One action the model asked for; `error` when its arguments could not be read."""

    id: str
    name: str
    arguments: dict
    error: str = ""


def _text(value) -> str:
    """A name or id from the model as a plain string that any writer can encode (lone surrogates escaped)."""
    text = value if isinstance(value, str) else ("" if value is None else json.dumps(value)[:200] if _scalar(value) else type(value).__name__)
    return text[:200].encode("utf-8", errors="backslashreplace").decode("utf-8")


def _scalar(value) -> bool:
    return isinstance(value, (int, float, bool))


def calls_of(message: dict) -> list[Call]:
    """The calls of a canonical assistant message; a call the model sent malformed carries its `error`."""
    out = []
    calls = message.get("tool_calls") or []
    for call in calls if isinstance(calls, list) else [calls]:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            out.append(Call(_call_id(), "", {}, "a tool call must be an object with a function {name, arguments}"))
            continue
        cid = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else _call_id()
        name = _text(fn.get("name"))
        if not isinstance(fn.get("name"), str):
            out.append(Call(_text(cid), name, {}, f"the action name must be a string, got {name!r}"))
            continue
        raw = fn.get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) and raw.strip() else (raw or {})
        except ValueError as exc:
            out.append(Call(_text(cid), name, {}, f"arguments are not valid JSON ({_text(str(exc))})"))
            continue
        except RecursionError:
            out.append(Call(_text(cid), name, {}, "arguments are nested too deep"))
            continue
        if not isinstance(args, dict):
            out.append(Call(_text(cid), name, {}, "arguments must be a JSON object"))
            continue
        out.append(Call(_text(cid), name, args))
    return out


def kept(message: dict, calls: list[Call], cap: int = KEPT_CHARS) -> dict:
    """The assistant message as the history keeps it (resent every round, traced): each call's arguments as the JSON
    of what was read ("{}" when unreadable: the call's error says why), texts capped and valid Unicode."""
    out = {k: _clean(v, cap) for k, v in message.items() if k in ("role", "content", "raw", "reasoning_content") and isinstance(v, str)}
    out["role"] = "assistant"
    out.setdefault("content", "")
    if calls:
        out["tool_calls"] = [{"id": c.id, "type": "function",
                              "function": {"name": c.name, "arguments": "{}" if c.error else _args_json(c.arguments, cap)}} for c in calls]
    return out


def _args_json(args: dict, cap: int) -> str:
    text = json.dumps(args)  # ASCII: lone surrogates become escapes, which any writer can encode
    return text if len(text) <= cap else json.dumps({k: (v[:200] + " [cut]" if isinstance(v, str) else v) for k, v in args.items()})[:cap * 2]


def _clean(text: str, cap: int) -> str:
    text = text if len(text) <= cap else text[:cap] + " [cut]"
    return text.encode("utf-8", errors="backslashreplace").decode("utf-8")


def _canonical(actions: list[dict]) -> dict:
    calls = []
    for act in actions:
        args = {k: v for k, v in act.items() if k != "action"}
        calls.append({"id": _call_id(), "type": "function", "function": {"name": str(act.get("action", "")), "arguments": json.dumps(args)}})
    return {"role": "assistant", "content": "", "tool_calls": calls}


class ScoutJsonProtocol:
    """Constrained decoding (llama-server JSON-schema grammar): every response is a JSON array of 1..n actions."""

    name = "json"

    def __init__(self, max_actions: int = 3, actions: tuple[ToolSpec, ...] = ACTIONS):
        self.max_actions = max_actions
        self.actions = actions

    def system_suffix(self) -> str:
        lines = [
            "",
            "## How to act",
            f"Reply with a JSON array of 1 to {self.max_actions} actions and nothing else; they run in order. Each action is an",
            'object with "action" set to its name plus its arguments, for example:',
            '  [{"action": "grep", "pattern": "def parse_version", "glob": "*.py"}, {"action": "files", "glob": "src/**"}]',
            "Actions:",
        ]
        lines += [f"- {signature(s)}: {s.description}" for s in self.actions]
        return "\n".join(lines)

    def schema(self) -> dict:
        variants = []
        for spec in self.actions:
            props = copy.deepcopy(spec.parameters.get("properties", {}))
            for value in props.values():
                if value.get("type") == "string":
                    value["maxLength"] = STRING_CAP
            variants.append({"type": "object", "properties": {"action": {"const": spec.name}, **props},
                             "required": ["action", *spec.parameters.get("required", [])], "additionalProperties": False})
        return {"type": "array", "items": {"anyOf": variants}, "minItems": 1, "maxItems": self.max_actions}

    def request(self, messages: list[dict]) -> dict:
        return {"messages": self.encode(messages),
                "response_format": {"type": "json_schema", "json_schema": {"name": "actions", "schema": self.schema(), "strict": True}}}

    def encode(self, messages: list[dict]) -> list[dict]:
        """Assistant calls become their JSON array; the tool results of one response become one user message."""
        out: list[dict] = []
        results: list[str] = []
        for m in messages:
            if m["role"] == "tool":
                results.append(f"Result of {m.get('name', 'action')}:\n{m.get('content', '')}")
                continue
            if results:
                out.append({"role": "user", "content": "\n\n".join(results)})
                results = []
            if m["role"] == "assistant":
                if m.get("tool_calls"):
                    acts = [{"action": c.name, **c.arguments} for c in calls_of(m)]
                    out.append({"role": "assistant", "content": json.dumps(acts)})
                else:
                    out.append({"role": "assistant", "content": m.get("raw") or m.get("content") or ""})
            elif m["role"] == "user" and out and out[-1]["role"] == "user":
                out[-1] = {"role": "user", "content": out[-1]["content"] + "\n\n" + m.get("content", "")}
            else:
                out.append({"role": m["role"], "content": m.get("content", "")})
        if results:
            out.append({"role": "user", "content": "\n\n".join(results)})
        return out

    def decode(self, message: dict) -> tuple[dict, Optional[str]]:
        """(canonical assistant message, reason it is malformed or None)."""
        raw = message.get("content") or ""
        if not isinstance(raw, str):
            return {"role": "assistant", "content": "", "raw": ""}, f"response content must be text, got {type(raw).__name__}"
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            return {"role": "assistant", "content": "", "raw": raw}, f"response is not valid JSON ({exc.msg} at char {exc.pos})"
        except RecursionError:
            return {"role": "assistant", "content": "", "raw": raw[:2000]}, "response is nested too deep"
        if isinstance(obj, dict):
            obj = obj.get("actions", [obj])  # tolerate {"actions": [...]} or one bare action
        if not isinstance(obj, list) or not obj or not all(isinstance(a, dict) and isinstance(a.get("action"), str) for a in obj):
            return {"role": "assistant", "content": "", "raw": raw}, 'expected a JSON array of actions such as [{"action": "grep", "pattern": "..."}]'
        return _canonical(obj), None

    def feedback(self, error: str) -> dict:
        return {"role": "user", "content": f'Error: {error}. Reply with a JSON array of 1 to {self.max_actions} actions, e.g. [{{"action": "files", "glob": "*.py"}}].'}


class ScoutNativeProtocol:
    """OpenAI function calling with parallel tool calls: the server's template renders the actions."""

    name = "native"

    def __init__(self, max_actions: int = 3, actions: tuple[ToolSpec, ...] = ACTIONS):
        self.max_actions = max_actions
        self.actions = actions
        self._native = NativeProtocol()

    def system_suffix(self) -> str:
        return (f"\n\nCall the tools; you may call up to {self.max_actions} in one response and they run in order. "
                "End with finish (lines you have read) or not_found.")

    def request(self, messages: list[dict]) -> dict:
        payload = self._native.request(messages, [s.schema() for s in self.actions])
        payload["tool_choice"] = "required"  # every round must act: text alone would waste it
        payload["parallel_tool_calls"] = True
        return payload

    def decode(self, message: dict) -> tuple[dict, Optional[str]]:
        try:
            decoded = self._native.decode(message)
            json.dumps(decoded.message)  # a message the loop cannot keep (nested past the limit) is the model's error too
        except (AttributeError, TypeError, ValueError, RecursionError):
            return {"role": "assistant", "content": ""}, "tool_calls must be a list of {id, type, function: {name, arguments}}"
        if not decoded.message.get("tool_calls"):
            return decoded.message, "no tool call in the response"
        return decoded.message, None

    def feedback(self, error: str) -> dict:
        return {"role": "user", "content": f"Error: {error}. Call one of the tools: {', '.join(s.name for s in self.actions)}."}


def choose(protocol: str, client: ChatClient, max_actions: int = 3) -> ScoutJsonProtocol | ScoutNativeProtocol:
    """native | json | auto (auto asks llama-server's /props whether the template renders tool calls)."""
    if protocol == "native":
        return ScoutNativeProtocol(max_actions)
    if protocol == "json":
        return ScoutJsonProtocol(max_actions)
    return ScoutNativeProtocol(max_actions) if template_supports_tools(client.get_json("/props")) else ScoutJsonProtocol(max_actions)
