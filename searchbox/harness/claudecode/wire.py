"""What crosses the channel for Claude Code, as data: its Anthropic Messages request made the run's OpenAI chat
request, and the server's answer made the Anthropic message (JSON or server-sent events) Claude Code reads.

Pure functions (loop.py calls them). The translation keeps only what a request may carry to the run's endpoint:
the conversation, the tools and the tool choice, and a completion cap no larger than the run's; nothing Claude Code
sends (its model name, `thinking`, `effort`, `metadata`, `temperature`, betas) picks the model, the sampling, the slot
or the address: ChatClient adds the run's.

Tool names: Claude Code names an MCP server's tools `mcp__searchbox__<name>`; the model sees the catalog's own
names (the task appended to the system prompt names them so, as under the native loop), and a call of one of the
run's tools goes back to Claude Code under its MCP name.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Optional

from ...model.llm import Response

ATTRIBUTION = "x-anthropic-billing-header:"  # Claude Code's attribution line (off by env; dropped if it comes)
_ID = re.compile(r"[^A-Za-z0-9_-]")


def strip(name: str, prefix: str) -> str:
    return name[len(prefix):] if isinstance(name, str) and name.startswith(prefix) else str(name or "")


def outward(name: str, prefix: str, tools: Iterable[str]) -> str:
    """A tool name the model called, as Claude Code knows it: the run's tools under their MCP name; any other as the
    model wrote it (Claude Code answers that it has no such tool)."""
    return prefix + name if name in set(tools) else name


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"]
    return []


# Claude Code's environment note says the machine's date and kernel release; the run says its own date
# (harness.today, as the task does) and no release, so the prompt is the same from host to host and day to day.
_DATE_LINE = re.compile(r"^Today's date is \d{4}-\d{2}-\d{2}\.$", re.MULTILINE)
_OS_LINE = re.compile(r"^( - OS Version: \w+) .*$", re.MULTILINE)


def steady(text: str, today: Optional[str]) -> str:
    text = _OS_LINE.sub(r"\1", text)
    return _DATE_LINE.sub(f"Today's date is {today}.", text) if today else text


def system_text(body: dict, today: Optional[str] = None) -> str:
    """Claude Code's system prompt and its mid-conversation system turns (its environment note, made steady), as
    one system message: chat templates take one, first."""
    parts = [t for t in _texts(body.get("system")) if not t.startswith(ATTRIBUTION)]
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "system":
            parts += [steady(t, today) for t in _texts(message.get("content"))]
    return "\n\n".join(p for p in parts if p)


def _result_text(block: dict) -> str:
    content = block.get("content")
    if isinstance(content, list):
        text = "".join(str(b.get("text", "")) if b.get("type") == "text" else f"[{b.get('type')} omitted]"
                       for b in content if isinstance(b, dict))
    else:
        text = str(content) if content is not None else ""
    return text


def _arguments(value: Any) -> str:
    try:
        return json.dumps(value if value is not None else {}, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return "{}"


def messages(body: dict, prefix: str, today: Optional[str] = None) -> list[dict]:
    """The conversation in OpenAI's shape: tool_result blocks become tool messages (before the user's own text in
    the same message), tool_use blocks tool calls, thinking blocks are dropped, other blocks are named as omitted."""
    out: list[dict] = []
    system = system_text(body, today)
    if system:
        out.append({"role": "system", "content": system})
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role, content = message.get("role"), message.get("content")
        if role == "system":
            continue  # in the system message above
        if role == "user":
            if isinstance(content, str):
                out.append({"role": "user", "content": content})
                continue
            texts = []
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                kind = block.get("type")
                if kind == "tool_result":
                    out.append({"role": "tool", "tool_call_id": str(block.get("tool_use_id") or ""), "content": _result_text(block)})
                elif kind == "text":
                    texts.append(str(block.get("text", "")))
                else:
                    texts.append(f"[{kind} omitted]")
            if texts:
                out.append({"role": "user", "content": "\n\n".join(texts)})
        elif role == "assistant":
            text, calls = [], []
            for block in [{"type": "text", "text": content}] if isinstance(content, str) else (content if isinstance(content, list) else []):
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text":
                    text.append(str(block.get("text", "")))
                elif block.get("type") == "tool_use":
                    calls.append({"id": str(block.get("id") or ""), "type": "function",
                                  "function": {"name": strip(block.get("name"), prefix), "arguments": _arguments(block.get("input"))}})
            entry: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
    return out


def tools(body: dict, prefix: str) -> list[dict]:
    out = []
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            out.append({"type": "function", "function": {"name": strip(tool["name"], prefix), "description": str(tool.get("description") or ""),
                                                         "parameters": tool.get("input_schema") if isinstance(tool.get("input_schema"), dict)
                                                         else {"type": "object", "properties": {}}}})
    return out


def tool_choice(choice: Any, prefix: str) -> Optional[Any]:
    if not isinstance(choice, dict):
        return None
    kind = choice.get("type")
    if kind == "tool" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": strip(choice["name"], prefix)}}
    return {"auto": "auto", "any": "required", "none": "none"}.get(kind)


def upstream(body: dict, max_tokens: int, prefix: str, today: Optional[str] = None) -> dict:
    """The OpenAI chat request the run's endpoint gets for Claude Code's Messages request."""
    payload: dict[str, Any] = {"messages": messages(body, prefix, today)}
    offered = tools(body, prefix)
    if offered:
        payload["tools"] = offered
        choice = tool_choice(body.get("tool_choice"), prefix)
        if choice is not None:
            payload["tool_choice"] = choice
    asked = body.get("max_tokens")
    cap = max_tokens
    if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0:
        cap = min(asked, max_tokens)
    payload["max_tokens"] = cap
    return payload


def parse_input(arguments: str) -> Optional[dict]:
    """A tool call's arguments as the JSON object Claude Code passes on (None when they are not one)."""
    try:
        value = json.loads(arguments) if arguments else {}
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def call_key(name: str, arguments: Any) -> str:
    """A tool call as the bridge sends it (its id is ""): the name and the arguments, canonical."""
    try:
        args = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        args = repr(arguments)
    return f"{name}\x00{args}"


def safe_ids(message: dict) -> dict:
    """The canonical message with tool call ids Anthropic's API takes (letters, digits, _ and -)."""
    for call in message.get("tool_calls") or []:
        call["id"] = _ID.sub("_", call["id"]) or "toolu"
    return message


def blocks(message: dict, prefix: str, run_tools: Iterable[str]) -> list[dict]:
    """The canonical assistant message (pi.wire.assistant) as Anthropic content blocks."""
    out: list[dict] = []
    if message.get("content"):
        out.append({"type": "text", "text": message["content"]})
    names = list(run_tools)
    for call in message.get("tool_calls") or []:
        fn = call["function"]
        out.append({"type": "tool_use", "id": call["id"], "name": outward(fn["name"], prefix, names),
                    "input": parse_input(fn["arguments"]) or {}})
    return out


def stop_reason(resp: Response, message: dict) -> str:
    if message.get("tool_calls"):
        return "tool_use"
    return "max_tokens" if resp.finish_reason == "length" else "end_turn"


def usage(resp: Response) -> dict:
    u = resp.usage
    return {"input_tokens": max(0, u.prompt - u.cached), "cache_read_input_tokens": u.cached, "cache_creation_input_tokens": 0,
            "output_tokens": u.completion}


def reply(message: dict, resp: Response, model: str, ident: str, prefix: str, run_tools: Iterable[str]) -> dict:
    """The whole Anthropic message (a request without `stream`)."""
    return {"id": ident, "type": "message", "role": "assistant", "model": model, "content": blocks(message, prefix, run_tools),
            "stop_reason": stop_reason(resp, message), "stop_sequence": None, "usage": usage(resp)}


def events(whole: dict) -> list[tuple[str, dict]]:
    """The same message as Anthropic's stream: message_start, each block's start, one delta and stop, message_delta
    (stop reason, usage), message_stop."""
    u = whole["usage"]
    head = {**whole, "content": [], "stop_reason": None, "usage": {**u, "output_tokens": 0}}
    out: list[tuple[str, dict]] = [("message_start", {"type": "message_start", "message": head})]
    for i, block in enumerate(whole["content"]):
        if block["type"] == "text":
            start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        else:
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"], ensure_ascii=False)}
        out += [("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}),
                ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}),
                ("content_block_stop", {"type": "content_block_stop", "index": i})]
    out += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
                               "usage": {"output_tokens": u["output_tokens"]}}),
            ("message_stop", {"type": "message_stop"})]
    return out


def error_body(message: str, kind: str = "api_error") -> dict:
    """Anthropic's error shape (Claude Code shows its message)."""
    return {"type": "error", "error": {"type": kind, "message": message}}


def tool_results(body: dict) -> list[dict]:
    """The tool results the request carries (the model's view of each call), canonical: tool_call_id, text, error."""
    out = []
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "user" and isinstance(message.get("content"), list):
            for block in message["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    out.append({"tool_call_id": str(block.get("tool_use_id") or ""), "content": _result_text(block),
                                "is_error": bool(block.get("is_error"))})
    return out
