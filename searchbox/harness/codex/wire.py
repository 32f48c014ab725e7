"""What crosses the channel for Codex, as data: its Responses API request made the run's chat request, and the
server's chat answer made the Responses API's server-sent events Codex reads.

Pure functions (loop.py calls them). Codex 0.171 speaks only the Responses API (`wire_api = "responses"`, the one
value it accepts); the harness translates instead of forwarding to llama-server's own /v1/responses so that every
harness shares one Accountant, one client (its retries, its token accounting, its llama.cpp timings), one scripted
test server, and so that `model=openai` endpoints without /v1/responses work too.

`upstream` keeps what a request may carry to the run's endpoint: the instructions and the input items (messages,
function calls and their outputs; reasoning items and any other item are dropped and counted), the run's tools
(the MCP server's namespace, `mcp__searchbox`, flattened to the catalog's names; Codex's own function tools are
dropped: `request_user_input`, which exec mode refuses, and the MCP resource helpers, which no 0.171 setting turns
off), and a completion cap no larger than the run's. Nothing in the body picks the model, sampling, slot or address:
the client adds the run's. `events` renders one whole chat answer as the Responses stream: response.created, each
output item added and done (text with its delta), response.completed with the server's usage.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from ...model.llm import Response

NAMESPACE = "mcp__searchbox"  # how Codex names the tools of the MCP server `searchbox` (launch.MCP_SERVER)
ENV_OPEN, DATE_OPEN, DATE_CLOSE = "<environment_context>", "<current_date>", "</current_date>"


@dataclass
class Translation:
    """The chat request for one Responses request, and what the translation left out (for the trace)."""

    payload: dict
    dropped_items: dict[str, int] = field(default_factory=dict)  # input item type -> how many (reasoning, ...)
    dropped_tools: list[str] = field(default_factory=list)  # Codex's own tools the model is not offered


def text_of(content: Any) -> str:
    """A Responses content (a string, or parts of type input_text/output_text/text) as text, parts joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content
                         if isinstance(p, dict) and p.get("type") in ("input_text", "output_text", "text") and isinstance(p.get("text"), str))
    return ""


def _dated(text: str, today: Optional[str]) -> str:
    """Codex's environment context names the machine's date; the run's is harness.today (as Pi's prompt gets it)."""
    if not today or not text.lstrip().startswith(ENV_OPEN):
        return text
    start = text.find(DATE_OPEN)
    end = text.find(DATE_CLOSE, start + len(DATE_OPEN)) if start >= 0 else -1
    return text if end < 0 else text[:start + len(DATE_OPEN)] + today + text[end:]


def _arguments(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False) if value is not None else ""
    except (TypeError, ValueError, RecursionError):
        return ""


def messages(body: dict, today: Optional[str] = None) -> tuple[list[dict], dict[str, int]]:
    """The conversation as chat messages: the instructions and the leading developer messages as one system message
    (chat templates want one, first); a developer message later on as a user message (a second system message is
    refused by many templates); function calls folded into the assistant message before them; function outputs as
    tool messages. Returns the messages and the item types dropped."""
    out: list[dict] = []
    dropped: dict[str, int] = {}
    system = [body["instructions"]] if isinstance(body.get("instructions"), str) and body["instructions"] else []
    items = body.get("input") if isinstance(body.get("input"), list) else [{"type": "message", "role": "user", "content": body.get("input")}]
    leading = True
    for item in items:
        if not isinstance(item, dict):
            dropped["not an object"] = dropped.get("not an object", 0) + 1
            continue
        kind = item.get("type", "message")
        if kind == "message":
            role, text = item.get("role"), text_of(item.get("content"))
            if role in ("developer", "system") and leading:
                system.append(text)
                continue
            leading = False
            if role == "assistant":
                out.append({"role": "assistant", "content": text or None})
            elif role in ("user", "developer", "system"):
                out.append({"role": "user", "content": _dated(text, today)})
            else:
                dropped[f"message role {str(role)[:40]}"] = dropped.get(f"message role {str(role)[:40]}", 0) + 1
        elif kind == "function_call":
            leading = False
            call = {"id": str(item.get("call_id") or ""), "type": "function",
                    "function": {"name": str(item.get("name") or ""), "arguments": _arguments(item.get("arguments"))}}
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            leading = False
            output = item.get("output")
            out.append({"role": "tool", "tool_call_id": str(item.get("call_id") or ""),
                        "content": output if isinstance(output, str) else text_of(output)})
        else:  # reasoning (encrypted or summarised: nothing a chat server takes), and any item no tool of ours makes
            dropped[str(kind)[:40]] = dropped.get(str(kind)[:40], 0) + 1
    if system:
        out.insert(0, {"role": "system", "content": "\n\n".join(system)})
    return out, dropped


def tools(body: dict) -> tuple[list[dict], list[str]]:
    """The run's tools as chat tools (the MCP namespace's, under the catalog's names), and the names of Codex's own
    tools left out."""
    offered, dropped = [], []
    for tool in body.get("tools") if isinstance(body.get("tools"), list) else []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace" and tool.get("name") == NAMESPACE:
            for inner in tool.get("tools") if isinstance(tool.get("tools"), list) else []:
                if isinstance(inner, dict) and inner.get("type") == "function" and isinstance(inner.get("name"), str):
                    offered.append({"type": "function", "function": {"name": inner["name"], "description": str(inner.get("description") or ""),
                                                                     "parameters": inner.get("parameters") or {"type": "object"}}})
        else:
            dropped.append(str(tool.get("name") or tool.get("type"))[:100])
    return offered, dropped


def upstream(body: dict, max_tokens: int, today: Optional[str] = None) -> Translation:
    """The request the run's endpoint gets for one Responses request."""
    chat, dropped_items = messages(body, today)
    offered, dropped_tools = tools(body)
    payload: dict[str, Any] = {"messages": chat}
    if offered:
        payload["tools"] = offered
        if body.get("tool_choice") in ("auto", "none", "required"):
            payload["tool_choice"] = body["tool_choice"]
    asked = body.get("max_output_tokens")
    cap = max_tokens
    if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0:
        cap = min(asked, max_tokens)
    payload["max_tokens"] = cap
    return Translation(payload, dropped_items, dropped_tools)


def is_agent_call(body: dict) -> bool:
    """Codex's agent steps carry its tools; its compaction (a summary of the conversation) carries none."""
    return isinstance(body.get("tools"), list) and len(body["tools"]) > 0


def system_of(payload: dict) -> Optional[str]:
    first = (payload.get("messages") or [{}])[0]
    return first.get("content") if isinstance(first, dict) and first.get("role") == "system" else None


def output_items(message: dict, run_tools: set[str], response_id: str) -> list[dict]:
    """The canonical assistant message as Responses output items: its text as a message item, each tool call as a
    function_call item (a run's tool in the MCP namespace, so Codex sends it to the bridge; any other name bare, so
    Codex refuses it as it would any tool it lacks)."""
    items: list[dict] = []
    if message.get("content"):
        items.append({"type": "message", "id": f"msg_{response_id}", "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": message["content"], "annotations": []}]})
    for i, call in enumerate(message.get("tool_calls") or []):
        name = call["function"]["name"]
        item = {"type": "function_call", "id": f"fc_{response_id}_{i}", "call_id": call["id"], "name": name,
                "arguments": call["function"]["arguments"], "status": "completed"}
        if name in run_tools:
            item["namespace"] = NAMESPACE
        items.append(item)
    return items


def usage_of(resp: Response) -> Optional[dict]:
    u = resp.usage
    if u.estimated:
        return None  # the server gave none: Codex then counts none, as it would against that server
    return {"input_tokens": u.prompt, "input_tokens_details": {"cached_tokens": u.cached}, "output_tokens": u.completion,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": u.prompt + u.completion}


def events(message: dict, resp: Response, model: str, run_tools: set[str], response_id: str) -> list[tuple[str, dict]]:
    """The Responses API's server-sent events for one whole answer (Codex acts on each output item when it is done)."""
    head = {"id": f"resp_{response_id}", "object": "response", "model": model, "created_at": 0}
    items = output_items(message, run_tools, response_id)
    out: list[tuple[str, dict]] = [("response.created", {"type": "response.created", "response": {**head, "status": "in_progress", "output": []}})]
    for index, item in enumerate(items):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            out.append(("response.output_item.added", {"type": "response.output_item.added", "output_index": index,
                                                       "item": {**item, "status": "in_progress", "content": []}}))
            out.append(("response.output_text.delta", {"type": "response.output_text.delta", "item_id": item["id"], "output_index": index,
                                                       "content_index": 0, "delta": text}))
            out.append(("response.output_text.done", {"type": "response.output_text.done", "item_id": item["id"], "output_index": index,
                                                      "content_index": 0, "text": text}))
        else:
            out.append(("response.output_item.added", {"type": "response.output_item.added", "output_index": index,
                                                       "item": {**item, "status": "in_progress"}}))
        out.append(("response.output_item.done", {"type": "response.output_item.done", "output_index": index, "item": item}))
    completed = {**head, "status": "completed", "output": items}
    usage = usage_of(resp)
    if usage is not None:
        completed["usage"] = usage
    out.append(("response.completed", {"type": "response.completed", "response": completed}))
    return out
