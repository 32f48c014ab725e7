"""How tool calls cross the wire: native OpenAI `tools`, or one constrained JSON object per response.

The agent keeps one canonical, OpenAI-format message list (the trace). A protocol only encodes
that list into a request and decodes a response back into a canonical assistant message, so both
protocols drive the same loop to the same artifacts.
"""

from __future__ import annotations

import json
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


def _call_id() -> str:
    return "call_" + uuid.uuid4().hex[:12]


class NativeProtocol:
    """OpenAI function calling: the server's chat template renders tools and parses calls."""

    name = "native"

    def system_suffix(self, tools: list[dict]) -> str:
        return ""

    def request(self, messages: list[dict], tools: list[dict]) -> dict:
        payload: dict = {"messages": messages}
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

    def schema(self, tools: list[dict]) -> dict:
        variants = [
            {
                "type": "object",
                "properties": {"tool": {"const": t["name"]}, "arguments": t.get("parameters") or {"type": "object"}},
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
        return JsonProtocol()
    return NativeProtocol() if template_supports_tools(client.get_json("/props")) else JsonProtocol()
