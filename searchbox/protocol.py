"""How tool calls cross the wire: native OpenAI `tools`, or one constrained JSON object per response.

The agent keeps one canonical, OpenAI-format message list (the trace). A protocol only encodes
that list into a request and decodes a response back into a canonical assistant message, so both
protocols drive the same loop to the same artifacts.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import dataclass
from typing import Optional

from .llm import ChatClient


@dataclass
class Decoded:
    """A canonical assistant message, or the reason the response could not be understood."""

    message: dict
    malformed: Optional[str] = None


PARTIAL_ANSWER = re.compile(r'^\s*\{\s*"answer"\s*:\s*"(.*)$', re.DOTALL)


def _unescape(fragment: str) -> str:
    """Decode a JSON string body that may stop mid-escape."""
    for cut in range(0, 7):
        try:
            return json.loads('"' + fragment[: len(fragment) - cut] + '"')
        except ValueError:
            continue
    return fragment


# What an OpenAI-style server reads of a canonical message; the rest (a tool result's `data`) is the harness's own.
WIRE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content")


def wire(message: dict) -> dict:
    """A canonical message as the server gets it: only the keys of the chat format."""
    return {k: message[k] for k in WIRE_KEYS if k in message}


def _call_id() -> str:
    return "call_" + uuid.uuid4().hex[:12]


# ---- generation bounds of the constrained JSON protocol -----------------------------------------
# llama-server turns the response schema into a grammar, so a bound in the schema is a bound on what the
# model can generate: with none, SmolLM2 filled a string (then, once strings were capped at 120 characters,
# the `paths` array) with a repeating phrase until max_tokens, so the call never closed and no tool ran.
# maxLength 48 plus maxItems 4 gave complete, valid calls in under 190 tokens (max_tokens is 256). These are
# generation bounds only: the catalog's schemas (and its validation bounds) stay as they are, the prompt
# shows no bound, and the native protocol sends the catalog's schemas unchanged.
JSON_SCHEMA_VERSION = 2  # 1: the catalog's schemas as they are; 2: GenerationBounds on every string and array
BOUNDS_ENV = "SEARCHBOX_JSON_BOUNDS"  # "off": schema version 1 (an ablation: benchmarks/main_command.py)
REPETITION_CAP = 2000  # llama.cpp's grammar parser: a longer {0,N} is silently unbounded (or refused, by version)


@dataclass(frozen=True)
class GenerationBounds:
    """Most characters per string and items per array the JSON protocol lets a model generate."""

    text: int = 48  # queries, questions, patterns, paths, globs, labels, texts: a phrase
    command: int = 160  # a bash command line
    content: int = 1200  # what write and edit put into a file: a paragraph
    items: int = 4  # every array (paths, texts, documents, labels)
    wide: tuple[tuple[str, str, str], ...] = (  # (tool, argument, which bound) for the arguments wider than `text`
        ("bash", "command", "command"), ("write", "content", "content"), ("edit", "old", "content"), ("edit", "new", "content"),
    )

    def chars(self, tool: str, argument: str) -> int:
        for t, a, which in self.wide:
            if (t, a) == (tool, argument):
                return getattr(self, which)
        return self.text


def json_bounds() -> Optional[GenerationBounds]:
    """The bounds the JSON protocol applies: GenerationBounds(), or None where $SEARCHBOX_JSON_BOUNDS=off."""
    return None if os.environ.get(BOUNDS_ENV, "").strip().lower() in ("off", "0", "false", "no") else GenerationBounds()


def json_schema_version(protocol: str, policy: Optional[str] = None) -> Optional[int]:
    """The JSON schema version a run with this model.protocol may use (None: native only, or a control without a model).

    `auto` counts: it picks the JSON protocol for models whose template has no tool calls, SmolLM2 among them."""
    if policy or protocol == "native":
        return None
    return JsonProtocol(json_bounds()).version


def bounded(tool: str, schema: dict, bounds: Optional[GenerationBounds]) -> dict:
    """A tool's parameter schema with every free string and every array bounded for generation (a copy; the
    catalog's own bounds win where they are tighter). Enums, consts, patterns and formats are left alone."""
    if bounds is None:
        return schema

    def walk(node, argument: str):
        if not isinstance(node, dict):
            return node
        out = dict(node)
        if isinstance(node.get("properties"), dict):
            out["properties"] = {name: walk(sub, name) for name, sub in node["properties"].items()}
        for key in ("anyOf", "oneOf", "allOf"):
            if isinstance(node.get(key), list):
                out[key] = [walk(sub, argument) for sub in node[key]]
        types = node.get("type") if isinstance(node.get("type"), list) else [node.get("type")]
        free = not any(k in node for k in ("enum", "const", "pattern", "format"))
        if "string" in types and free:
            limit = min(bounds.chars(tool, argument), REPETITION_CAP)
            out["maxLength"] = max(min(int(node.get("maxLength", limit)), limit), int(node.get("minLength", 0)))
        if "array" in types:
            out["maxItems"] = max(min(int(node.get("maxItems", bounds.items)), bounds.items), int(node.get("minItems", 0)))
            if isinstance(node.get("items"), dict):
                out["items"] = walk(node["items"], argument)
        return out

    return walk(schema, "")


class NativeProtocol:
    """OpenAI function calling: the server's chat template renders tools and parses calls."""

    name = "native"

    def system_suffix(self, tools: list[dict]) -> str:
        return ""

    def request(self, messages: list[dict], tools: list[dict]) -> dict:
        payload: dict = {"messages": [wire(m) for m in messages]}
        if tools:
            payload["tools"] = [{"type": "function", "function": t} for t in tools]
            payload["tool_choice"] = "auto"
        return payload

    def decode(self, message: dict) -> Decoded:
        out = {"role": "assistant", "content": message.get("content") or ""}
        if message.get("reasoning_content"):
            out["reasoning_content"] = message["reasoning_content"]
        calls = []
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {}
            args = fn.get("arguments")
            if not isinstance(args, str):
                args = json.dumps(args if args is not None else {})
            calls.append({"id": call.get("id") or _call_id(), "type": "function", "function": {"name": fn.get("name") or "", "arguments": args}})
        if calls:
            out["tool_calls"] = calls
        return Decoded(out)

    def feedback(self, error: str) -> dict:
        return {"role": "user", "content": f"Error: {error}"}


class JsonProtocol:
    """Constrained decoding: every response is exactly one tool call or a final answer, as JSON.

    For models whose chat template has no tool calls (SmolLM2 among them), the tools are described
    in the system prompt and the server's JSON-schema decoding guarantees a parseable reply.
    """

    name = "json"

    def system_suffix(self, tools: list[dict]) -> str:
        lines = [
            "",
            "## How to act",
            "Reply with exactly one JSON object and nothing else. Either call one tool:",
            '  {"tool": "<name>", "arguments": {...}}',
            "or, when you are done, give your final message:",
            '  {"answer": "<text>"}',
            "Tool results come back in the next message. Tools:",
        ]
        for tool in tools:
            params = tool.get("parameters", {}).get("properties", {})
            required = set(tool.get("parameters", {}).get("required", []))
            sig = ", ".join(f"{k}{'' if k in required else '?'}: {v.get('type', 'any')}" for k, v in params.items())
            lines.append(f"- {tool['name']}({sig}): {tool.get('description', '')}")
        return "\n".join(lines)

    def __init__(self, bounds: Optional["GenerationBounds"] = None):
        self.bounds = bounds  # None: the catalog's schemas as they are (schema version 1, the ablation)

    @property
    def version(self) -> int:
        """The schema rules' version: part of the run key, since the grammar decides what the model can say."""
        return JSON_SCHEMA_VERSION if self.bounds else 1

    def schema(self, tools: list[dict]) -> dict:
        variants = [
            {
                "type": "object",
                "properties": {"tool": {"const": t["name"]},
                               "arguments": bounded(t["name"], t.get("parameters") or {"type": "object"}, self.bounds)},
                "required": ["tool", "arguments"],
                "additionalProperties": False,
            }
            for t in tools
        ]
        variants.append({"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"], "additionalProperties": False})
        return {"anyOf": variants}

    def request(self, messages: list[dict], tools: list[dict]) -> dict:
        return {
            "messages": [self._encode(m) for m in messages],
            "response_format": {"type": "json_schema", "json_schema": {"name": "action", "schema": self.schema(tools), "strict": True}},
        }

    def _encode(self, message: dict) -> dict:
        role = message["role"]
        if role == "assistant":
            calls = message.get("tool_calls") or []
            if calls:
                fn = calls[0]["function"]
                try:
                    args = json.loads(fn["arguments"])
                except (ValueError, TypeError):
                    args = fn["arguments"]
                return {"role": "assistant", "content": json.dumps({"tool": fn["name"], "arguments": args})}
            return {"role": "assistant", "content": message.get("raw") or json.dumps({"answer": message.get("content") or ""})}
        if role == "tool":
            return {"role": "user", "content": f"Result of {message.get('name', 'tool')}:\n{message.get('content', '')}"}
        return {"role": role, "content": message.get("content", "")}

    def decode(self, message: dict) -> Decoded:
        raw = message.get("content") or ""
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            partial = PARTIAL_ANSWER.match(raw)
            if partial:  # an answer cut off at max_tokens: keep what was said rather than loop on it
                return Decoded({"role": "assistant", "content": _unescape(partial.group(1)), "raw": raw, "truncated": True})
            return Decoded({"role": "assistant", "content": "", "raw": raw}, f"response is not valid JSON ({exc.msg} at char {exc.pos})")
        if isinstance(obj, dict) and isinstance(obj.get("tool"), str):
            args = obj.get("arguments", {})
            call = {"id": _call_id(), "type": "function", "function": {"name": obj["tool"], "arguments": json.dumps(args)}}
            return Decoded({"role": "assistant", "content": "", "tool_calls": [call]})
        if isinstance(obj, dict) and isinstance(obj.get("answer"), str):
            return Decoded({"role": "assistant", "content": obj["answer"]})
        return Decoded({"role": "assistant", "content": "", "raw": raw}, 'expected {"tool": ..., "arguments": {...}} or {"answer": ...}')

    def feedback(self, error: str) -> dict:
        return {"role": "user", "content": f'Error: {error}. Reply with one JSON object: {{"tool": ..., "arguments": {{...}}}} or {{"answer": ...}}.'}


def template_supports_tools(props: dict | None) -> bool:
    """Whether llama-server's /props says the chat template renders tool calls."""
    if not props:
        return True  # not llama.cpp (or unknown): assume an OpenAI-style server with native tools
    caps = props.get("chat_template_caps")
    if isinstance(caps, dict) and ("supports_tool_calls" in caps or "supports_tools" in caps):
        return bool(caps.get("supports_tool_calls") or caps.get("supports_tools"))
    template = props.get("chat_template") or ""
    return "tool_calls" in template or "tools" in template


def choose(protocol: str, client: ChatClient) -> NativeProtocol | JsonProtocol:
    """Resolve native|json|auto; auto asks the server's /props."""
    if protocol == "native":
        return NativeProtocol()
    if protocol == "json":
        return JsonProtocol(json_bounds())
    return NativeProtocol() if template_supports_tools(client.get_json("/props")) else JsonProtocol(json_bounds())
