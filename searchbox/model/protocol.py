"""How tool calls cross the wire: native OpenAI `tools`, or one constrained JSON object per response.

The agent keeps one canonical, OpenAI-format message list (the trace). A protocol only encodes
that list into a request and decodes a response back into a canonical assistant message, so both
protocols drive the same loop to the same artifacts.
"""

from __future__ import annotations

import json
import math
import os
import re
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .. import bounds
from .llm import ChatClient
from .loops import LoopRule, LoopWatch

MAX_CALLS = 64  # tool calls in one reply; more is a malformed reply (each would run)
NAME_CHARS = 256  # a tool name or call id


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
# the `paths` array) with a repeating phrase until max_tokens, so the call never closed and no tool ran;
# maxLength 48 plus maxItems 4 gave a complete, valid call in 185 tokens (max_tokens 256). Paths and queries
# get room for what they really hold (the packaged corpus's paths and questions), arrays of paths fewer items,
# so that every call but write/edit fits in CALL_CHARS. These are generation bounds only: the catalog's
# schemas (and its validation bounds) stay as they are, the prompt shows no bound, and the native protocol
# sends the catalog's schemas unchanged.
# The final answer is bounded the same way (schema version 3): under version 2 SmolLM2's `answer` text, no tool
# argument, repeated a phrase to max_tokens in 35 of 123 turns of the main command (results/benchmarks/main_command.md).
# Since version 4 a reply that loops (one passage three times in a row in a string it is writing: loops.LoopRule) is
# stopped there; the reply is streamed to watch it, and nothing before the stop changes. Since version 5 the stopped
# reply was kept without the piece that proved the loop, whose place in the server's cache depended on timing; since
# version 6 it is kept up to where the passage's last copy begins (always before that piece: SmolLM2 went on longer
# from a third copy's start), and a tool call stopped so is fed back as stopped, not as a parse error.
JSON_SCHEMA_VERSION = 6  # 1: no bound; 2: GenerationBounds on every string, array and whole number of a call; 3: the answer too; 4: loops stopped; 5: kept without the last piece; 6: kept up to its last copy
# The feedback for a tool call the loop watch stopped: the model's JSON was sound, the harness ended it.
LOOP_STOPPED = "the call was stopped before it was complete: it wrote one passage three times in a row in a string"
BOUNDS_ENV = "SEARCHBOX_JSON_BOUNDS"  # ablations (benchmarks/main_command.py): "off" is version 1, "calls" 2, "answer" 3
REPETITION_CAP = 2000  # llama.cpp's grammar parser: a longer {0,N} is silently unbounded (or refused, by version)
# The longest call any tool but write/edit can be made to generate, in characters (compact JSON): SmolLM2's
# runaway text ran about 2.8 characters per token, so about 170 tokens, well inside its max_tokens of 256.
CALL_CHARS = 480


@dataclass(frozen=True)
class GenerationBounds:
    """Most characters per string and items per array the JSON protocol lets a model generate, by argument kind."""

    text: int = 48  # patterns, globs, labels, the texts of a list, a file name: a phrase
    query: int = 96  # a search query or question (the packaged questions run 47-163 characters, median 88)
    path: int = 112  # a path (the packaged corpus's, dataroom/ included, run 20-106 characters, median 68)
    command: int = 160  # a bash command line
    content: int = 1200  # what write and edit put into a file: a paragraph
    # The final answer: 8 x the longest gold of the packaged and tiny question sets (60 characters,
    # builtin/jina-questions.jsonl), which leaves room for the answer line and a Sources line naming three files
    # of the packaged corpus's median path (68 characters). An answer cut here is marked `truncated` and graded as written.
    answer: Optional[int] = 480  # None: schema version 2, the calls bounded and the answer not
    loop: Optional[LoopRule] = LoopRule()  # a looping reply is stopped (schema version 6); None: version 3
    items: int = 4  # items of an array of texts
    path_items: int = 2  # items of an array of paths (a search's scope): each may be a long path
    kinds: tuple[tuple[str, str], ...] = (  # catalog argument name -> kind; every other string is `text`
        ("path", "path"), ("paths", "path"), ("query", "query"), ("question", "query"), ("command", "command"),
        ("content", "content"), ("old", "content"), ("new", "content"),
    )
    # Numbers generated as whole numbers within the catalog's range: llama.cpp's grammar enforces an integer's
    # minimum and maximum but not a number's (SmolLM2 sent bash timeouts of 1000000000000000.0000000000000001).
    whole: tuple[str, ...] = ("timeout",)

    def kind(self, argument: str) -> str:
        return dict(self.kinds).get(argument, "text")

    def chars(self, argument: str) -> int:
        return getattr(self, self.kind(argument))

    def max_items(self, argument: str) -> int:
        return self.path_items if self.kind(argument) == "path" else self.items


def json_bounds() -> Optional[GenerationBounds]:
    """The bounds the JSON protocol applies: GenerationBounds(), or an ablation's by $SEARCHBOX_JSON_BOUNDS: off (None),
    calls (the calls bounded only), answer (the answer too, no reply stopped for looping)."""
    value = os.environ.get(BOUNDS_ENV, "").strip().lower()
    if value in ("off", "0", "false", "no"):
        return None
    if value == "calls":
        return GenerationBounds(answer=None, loop=None)
    return GenerationBounds(loop=None) if value == "answer" else GenerationBounds()


def bounded(schema: dict, limits: Optional[GenerationBounds]) -> dict:
    """A tool's parameter schema with every free string and every array bounded for generation (a copy; the
    catalog's own bounds win where they are tighter). Enums, consts, patterns and formats are left alone.

    limits=None strips every maxLength and maxItems instead: the grammar as it was before generation bounds
    (the catalog's validation bounds, up to a million characters, would be no bound for a grammar anyway)."""

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
        if "array" in types and isinstance(node.get("items"), dict):
            out["items"] = walk(node["items"], argument)
        if limits is None:
            out.pop("maxLength", None)
            out.pop("maxItems", None)
            return out
        if "number" in types and argument in limits.whole and "minimum" in node and "maximum" in node:
            out.update(type="integer", minimum=math.ceil(node["minimum"]), maximum=math.floor(node["maximum"]))
        if "string" in types and free:
            limit = min(limits.chars(argument), REPETITION_CAP)
            out["maxLength"] = max(min(int(node.get("maxLength", limit)), limit), int(node.get("minLength", 0)))
        if "array" in types:
            items = limits.max_items(argument)
            out["maxItems"] = max(min(int(node.get("maxItems", items)), items), int(node.get("minItems", 0)))
        return out

    return walk(schema, "")


def _with_limits(tool: dict) -> dict:
    """A catalog tool's parameters with its validation limits (the model-facing schema leaves them out; the grammar
    derives its ranges from them), else the parameters as given."""
    from ..tools.catalog import BY_NAME

    spec = BY_NAME.get(tool.get("name"))
    if spec is not None and spec.schema()["parameters"] == tool.get("parameters"):
        return spec.schema(limits=True)["parameters"]
    return tool.get("parameters") or {"type": "object"}


def text_of(content: Any) -> tuple[str, Optional[str]]:
    """(the text of a reply's content, or why it has none): a string, or OpenAI content parts whose text parts are joined."""
    if content is None:
        return "", None
    if isinstance(content, str):
        return bounds.valid_text(content), None
    if isinstance(content, list):
        texts = [part.get("text") for part in content if isinstance(part, dict) and part.get("type") in ("text", "output_text")]
        if all(isinstance(t, str) for t in texts):
            return bounds.valid_text("".join(texts)), None
    return "", f"the reply's content is {type(content).__name__}, not text"


def _name(value: Any, what: str) -> tuple[str, Optional[str]]:
    if not isinstance(value, str) or not value:
        return "", f"{what} must be a non-empty string, not {type(value).__name__ if value != '' else 'empty'}"
    if len(value) > NAME_CHARS or not bounds.is_valid_text(value) or "\x00" in value:
        return "", f"{what} is not a usable name (over {NAME_CHARS} characters, not valid Unicode, or holding NUL)"
    return value, None


def decode_calls(raw: Any) -> tuple[list[dict], Optional[str]]:
    """Canonical tool calls from a reply's `tool_calls`, or why they cannot be carried out (then none of them is run).

    The arguments stay as the model sent them (text): the Toolset checks them and answers what is wrong.
    """
    if raw is None:
        return [], None
    if not isinstance(raw, list):
        return [], f"tool_calls must be a list of calls, not {type(raw).__name__}"
    if len(raw) > MAX_CALLS:
        return [], f"{len(raw)} tool calls in one reply; at most {MAX_CALLS}"
    calls = []
    for i, call in enumerate(raw):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            return [], f"tool call {i + 1} is not an object with a `function` object"
        name, problem = _name(fn.get("name"), f"tool call {i + 1}'s function name")
        if problem:
            return [], problem
        args = fn.get("arguments")
        if not isinstance(args, str):
            try:
                args = json.dumps(args if args is not None else {}, ensure_ascii=False)
            except (TypeError, ValueError, RecursionError):
                return [], f"tool call {i + 1}'s arguments cannot be read as JSON (nested too deep?)"
        call_id = call.get("id")
        call_id = call_id if _name(call_id, "id")[1] is None else _call_id()
        calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": args}})
    return calls, None


class NativeProtocol:
    """OpenAI function calling: the server's chat template renders tools and parses calls."""

    name = "native"
    watch = None  # replies are never stopped early: loops.LoopRule's reasoning needs the JSON protocol's open string

    def system_suffix(self, tools: list[dict]) -> str:
        return ""

    def request(self, messages: list[dict], tools: list[dict]) -> dict:
        payload: dict = {"messages": [wire(m) for m in messages]}
        if tools:
            payload["tools"] = [{"type": "function", "function": t} for t in tools]
            payload["tool_choice"] = "auto"
        return payload

    def decode(self, message: dict, finish_reason: Optional[str] = None) -> Decoded:
        """The reply as a canonical assistant message; a reply that cannot be carried out is malformed (its text is kept).
        The finish reason is not read: no native reply is stopped early."""
        content, problem = text_of(message.get("content"))
        out = {"role": "assistant", "content": content}
        reasoning = message.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            out["reasoning_content"] = bounds.valid_text(reasoning)
        calls, call_problem = decode_calls(message.get("tool_calls"))
        if calls and not problem:
            out["tool_calls"] = calls
        return Decoded(out, problem or call_problem)

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

    def __init__(self, limits: Optional[GenerationBounds] = GenerationBounds()):
        self.limits = limits  # None: no string or array bound in the grammar (schema version 1, an ablation)

    @property
    def version(self) -> int:
        """The schema rules' version: part of the run key (through the request it sends), since the grammar decides
        what the model can say."""
        if not self.limits:
            return 1
        return (JSON_SCHEMA_VERSION if self.limits.loop else 3) if self.limits.answer else 2

    @property
    def watch(self) -> Optional[Callable[[], LoopWatch]]:
        """A fresh loop watcher per reply (ChatClient.chat streams the reply through it), or None: no reply is stopped."""
        return self.limits.loop.watch if self.limits and self.limits.loop else None

    def schema(self, tools: list[dict]) -> dict:
        variants = [
            {
                "type": "object",
                "properties": {"tool": {"const": t["name"]},
                               "arguments": bounded(_with_limits(t), self.limits)},
                "required": ["tool", "arguments"],
                "additionalProperties": False,
            }
            for t in tools
        ]
        answer = {"type": "string", **({"maxLength": self.limits.answer} if self.limits and self.limits.answer else {})}
        variants.append({"type": "object", "properties": {"answer": answer}, "required": ["answer"], "additionalProperties": False})
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
                    args = bounds.loads(fn["arguments"])
                except (ValueError, TypeError):
                    args = fn["arguments"]
                return {"role": "assistant", "content": json.dumps({"tool": fn["name"], "arguments": args})}
            return {"role": "assistant", "content": message.get("raw") or json.dumps({"answer": message.get("content") or ""})}
        if role == "tool":
            return {"role": "user", "content": f"Result of {message.get('name', 'tool')}:\n{message.get('content', '')}"}
        return {"role": role, "content": message.get("content", "")}

    def decode(self, message: dict, finish_reason: Optional[str] = None) -> Decoded:
        """The reply as a canonical assistant message. An answer cut (by max_tokens or a loop's stop) is kept, marked
        `truncated`; a tool call cut is malformed, and one the loop watch stopped (`finish_reason` "loop") says so: the
        model's JSON was sound, the harness ended it (since version 6; before, the feedback read as a parse error)."""
        raw, problem = text_of(message.get("content"))
        if problem:
            return Decoded({"role": "assistant", "content": "", "raw": ""}, problem)
        try:
            obj = bounds.loads(raw)
        except ValueError as exc:
            partial = PARTIAL_ANSWER.match(raw)
            if partial:  # an answer cut off at max_tokens: keep what was said rather than loop on it
                return Decoded({"role": "assistant", "content": bounds.valid_text(_unescape(partial.group(1))), "raw": raw, "truncated": True})
            if finish_reason == "loop":
                return Decoded({"role": "assistant", "content": "", "raw": raw}, LOOP_STOPPED)
            where = f" ({exc.msg} at char {exc.pos})" if isinstance(exc, json.JSONDecodeError) else f" ({exc})"
            return Decoded({"role": "assistant", "content": "", "raw": raw}, f"response is not valid JSON{where}")
        if isinstance(obj, dict) and "tool" in obj:
            name, problem = _name(obj["tool"], "the tool name")
            if problem:
                return Decoded({"role": "assistant", "content": "", "raw": raw}, problem)
            try:
                args = json.dumps(obj.get("arguments", {}), ensure_ascii=False)
            except (ValueError, RecursionError):
                return Decoded({"role": "assistant", "content": "", "raw": raw}, "the arguments are nested too deep")
            call = {"id": _call_id(), "type": "function", "function": {"name": name, "arguments": args}}
            return Decoded({"role": "assistant", "content": "", "tool_calls": [call]})
        if isinstance(obj, dict) and isinstance(obj.get("answer"), str):
            text = bounds.valid_text(obj["answer"])
            if self.limits and self.limits.answer and len(obj["answer"]) >= self.limits.answer:  # the grammar closed it at its bound: a cut answer
                return Decoded({"role": "assistant", "content": text, "raw": raw, "truncated": True})
            return Decoded({"role": "assistant", "content": text})
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
