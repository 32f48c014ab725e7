"""claude-code's translation (harness/claudecode/wire.py), as data: Anthropic Messages in, the run's OpenAI chat
request out; the server's answer back as Anthropic's message and its event stream. No Claude Code needed."""

from __future__ import annotations

import json

from searchbox.harness.claudecode import wire
from searchbox.harness.pi.wire import assistant
from searchbox.model.llm import Response, Usage

P = "mcp__searchbox__"


def request(**extra) -> dict:
    return {"model": "claude-opus-4", "max_tokens": 32000, "stream": True, "temperature": 1.0, "top_k": 5,
            "thinking": {"type": "adaptive"}, "metadata": {"user_id": "x"}, "output_config": {"effort": "high"},
            "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=1"}, {"type": "text", "text": "You are Claude Code."},
                       {"type": "text", "text": "TASK"}],
            "tools": [{"name": P + "grep", "description": "Search", "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"}}}}],
            "messages": [
                {"role": "user", "content": "Q?"},
                {"role": "system", "content": [{"type": "text", "text": "# Environment\n - OS Version: Linux 6.1.0-host-specific\n\nToday's date is 2031-05-05."}]},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "text", "text": "Looking."},
                                                  {"type": "tool_use", "id": "call_1", "name": P + "grep", "input": {"pattern": "gannet"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": [{"type": "text", "text": "a.txt:1"}]},
                                             {"type": "text", "text": "Continue."}, {"type": "image", "source": {}}]},
            ], **extra}


def test_a_messages_request_keeps_only_the_conversation_tools_and_a_capped_limit():
    out = wire.upstream(request(tool_choice={"type": "any"}), 512, P, "2026-01-01")
    assert set(out) == {"messages", "tools", "tool_choice", "max_tokens"}  # no model, sampling, thinking, metadata
    assert out["max_tokens"] == 512 and out["tool_choice"] == "required"
    assert out["tools"] == [{"type": "function", "function": {"name": "grep", "description": "Search",
                                                              "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}}}}]
    roles = [m["role"] for m in out["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "user"]
    system = out["messages"][0]["content"]
    assert system.startswith("You are Claude Code.\n\nTASK\n\n# Environment") and "billing" not in system
    assert " - OS Version: Linux\n" in system and "Today's date is 2026-01-01." in system and "2031" not in system
    call = out["messages"][2]
    assert call["content"] == "Looking." and call["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "grep", "arguments": json.dumps({"pattern": "gannet"})}}]
    assert out["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "a.txt:1"}
    assert out["messages"][4] == {"role": "user", "content": "Continue.\n\n[image omitted]"}
    assert wire.upstream(request(max_tokens=100), 512, P)["max_tokens"] == 100
    assert wire.upstream(request(max_tokens=True), 512, P)["max_tokens"] == 512
    assert wire.tool_choice({"type": "tool", "name": P + "grep"}, P) == {"type": "function", "function": {"name": "grep"}}
    assert wire.tool_choice("anything", P) is None


def test_hostile_request_shapes_are_taken_without_a_crash():
    for body in ({"messages": [1, None, {"role": "user", "content": 5}, {"role": "assistant", "content": [None, {"type": "tool_use"}]}]},
                 {"messages": [], "tools": [None, {"name": 3}], "system": {"x": 1}}):
        out = wire.upstream(body, 64, P)
        assert out["max_tokens"] == 64 and isinstance(out["messages"], list)


def response(message: dict, finish: str = "tool_calls") -> Response:
    return Response(message=message, usage=Usage(prompt=100, completion=7, cached=40), latency_s=0.1, finish_reason=finish)


def test_the_answer_goes_back_as_anthropic_blocks_and_events_with_mcp_names_and_usage():
    raw = {"role": "assistant", "content": "Let me search.", "tool_calls": [
        {"id": "call:1/x", "type": "function", "function": {"name": "grep", "arguments": "{\"pattern\": \"a\"}"}},
        {"type": "function", "function": {"name": "Bash", "arguments": "not json"}}]}
    message = wire.safe_ids(assistant(raw, "call_1_1"))
    resp = response(raw)
    whole = wire.reply(message, resp, "m", "msg_1", P, ["grep", "bash"])
    assert whole["stop_reason"] == "tool_use" and whole["usage"] == {"input_tokens": 60, "cache_read_input_tokens": 40,
                                                                      "cache_creation_input_tokens": 0, "output_tokens": 7}
    assert whole["content"] == [{"type": "text", "text": "Let me search."},
                                {"type": "tool_use", "id": "call_1_x", "name": P + "grep", "input": {"pattern": "a"}},
                                {"type": "tool_use", "id": "call_1_1_1", "name": "Bash", "input": {}}]  # not the run's: Claude Code refuses it
    names = [n for n, _ in wire.events(whole)]
    assert names == ["message_start"] + ["content_block_start", "content_block_delta", "content_block_stop"] * 3 + ["message_delta", "message_stop"]
    deltas = [d["delta"] for n, d in wire.events(whole) if n == "content_block_delta"]
    assert deltas[0] == {"type": "text_delta", "text": "Let me search."} and json.loads(deltas[1]["partial_json"]) == {"pattern": "a"}
    end = dict(wire.events(whole))["message_delta"]
    assert end["delta"]["stop_reason"] == "tool_use" and end["usage"] == {"output_tokens": 7}
    text = wire.reply(wire.safe_ids(assistant({"content": "done"}, "c")), response({}, "length"), "m", "msg_2", P, [])
    assert text["stop_reason"] == "max_tokens" and text["content"] == [{"type": "text", "text": "done"}]


def test_a_bridge_call_matches_the_models_call_by_name_and_arguments():
    assert wire.call_key("grep", {"a": 1, "b": [2]}) == wire.call_key("grep", json.loads('{"b": [2], "a": 1}'))
    assert wire.call_key("grep", {"a": 1}) != wire.call_key("read", {"a": 1})
    assert wire.parse_input("[1]") is None and wire.parse_input("") == {} and wire.parse_input("{\"x\": 2}") == {"x": 2}
