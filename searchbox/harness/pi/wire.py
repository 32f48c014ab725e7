"""What crosses the channel, as data: Pi's request made the run's request, and the server's answer made Pi's stream.

Pure functions (the forwarder in loop.py calls them): `upstream` keeps only what a chat request may carry to the
run's endpoint (messages, tools, tool choice, a completion cap no larger than the run's); `assistant` is the
server's message in the canonical OpenAI shape the trace keeps (tool call ids made when the server gave none);
`stream` renders it as the server-sent events Pi's OpenAI client reads, with the server's own usage.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from ...model.llm import Response


def upstream(body: dict, max_tokens: int) -> dict:
    """The request the run's endpoint gets: nothing Pi (or anything else in the box) sends may pick the model, the
    server slot, the sampling or the address; ChatClient adds the run's model, temperature, seed and slot."""
    payload: dict[str, Any] = {"messages": body["messages"]}
    if isinstance(body.get("tools"), list) and body["tools"]:
        payload["tools"] = body["tools"]
        if isinstance(body.get("tool_choice"), (str, dict)):
            payload["tool_choice"] = body["tool_choice"]
    asked = body.get("max_tokens", body.get("max_completion_tokens"))
    cap = max_tokens
    if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0:
        cap = min(asked, max_tokens)
    payload["max_tokens"] = cap
    return payload


def is_agent_call(body: dict) -> bool:
    """Pi's agent steps carry its tools; its compaction (a summary of the conversation) carries none."""
    return isinstance(body.get("tools"), list) and len(body["tools"]) > 0


def text_of(content: Any) -> str:
    """A message's content as text (OpenAI content parts joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type", "text") == "text")
    return ""


def assistant(message: dict, id_prefix: str) -> dict:
    """The server's assistant message as the trace keeps it and Pi gets it: text content (or None), reasoning when
    given, and tool calls with string arguments and an id each (made from id_prefix when missing or repeated)."""
    out: dict[str, Any] = {"role": "assistant", "content": text_of(message.get("content")) or None}
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        out["reasoning_content"] = reasoning
    calls, seen = [], set()
    for i, call in enumerate(message.get("tool_calls") or []):
        if not isinstance(call, dict):
            continue
        fn = call.get("function") if isinstance(call.get("function"), dict) else {}
        args = fn.get("arguments")
        if not isinstance(args, str):
            try:
                args = json.dumps(args, ensure_ascii=False) if args is not None else ""
            except (TypeError, ValueError, RecursionError):
                args = ""
        ident = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else f"{id_prefix}_{i}"
        if ident in seen:
            ident = f"{id_prefix}_{i}"
        seen.add(ident)
        name = fn.get("name")
        calls.append({"id": ident, "type": "function", "function": {"name": name if isinstance(name, str) else str(name or ""),
                                                                      "arguments": args}})
    if calls:
        out["tool_calls"] = calls
    return out


def stream(message: dict, resp: Response, model: str) -> list[dict]:
    """Chat-completion chunks for one whole message: the delta, the finish reason, then the server's usage (none
    when the server gave none: Pi then estimates, as it would against that server)."""
    delta: dict[str, Any] = {"role": "assistant"}
    if message.get("content"):
        delta["content"] = message["content"]
    if message.get("reasoning_content"):
        delta["reasoning_content"] = message["reasoning_content"]
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
    finish = resp.finish_reason if resp.finish_reason in ("stop", "length", "tool_calls", "content_filter") else None
    finish = finish or ("tool_calls" if message.get("tool_calls") else "stop")
    head = {"id": "searchbox", "object": "chat.completion.chunk", "created": 0, "model": model}
    chunks = [{**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
              {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}]
    u = resp.usage
    if not u.estimated:
        chunks.append({**head, "choices": [], "usage": {"prompt_tokens": u.prompt, "completion_tokens": u.completion,
                                                         "total_tokens": u.prompt + u.completion,
                                                         "prompt_tokens_details": {"cached_tokens": u.cached}}})
    return chunks


def tool_messages(body: dict) -> list[dict]:
    """The tool results a request carries, as (tool_call_id, text) messages in the canonical shape."""
    out = []
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "tool":
            out.append({"role": "tool", "tool_call_id": str(message.get("tool_call_id") or ""), "content": text_of(message.get("content"))})
    return out


def system_of(body: dict) -> Optional[str]:
    messages = body.get("messages") or []
    first = messages[0] if messages and isinstance(messages[0], dict) else {}
    return text_of(first.get("content")) if first.get("role") in ("system", "developer") else None
