"""Anything the model sends is the model's: every malformed reply or call is a result the model reads, never an outage.

Each reproduction of issue 20 (model output that ended a run as tool_error, or killed the run) runs through the
real loop against the scripted server: the run must finish as a result, with its tables written.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from searchbox.model.llm import parse_usage
from searchbox.model.protocol import JsonProtocol, NativeProtocol
from tests.conftest import make_cfg, run_script, tables, trace

DONE = {"content": "done"}


def call(name, arguments):
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def deep(n: int) -> str:
    return "[" * n + "]" * n


def _result_run(tmp_path, script, cfg=None, **kw):
    """Run the script; the run must end as a result (not an infrastructure stop) with readable tables."""
    meta, srv, run_dir = run_script(tmp_path, script, cfg or make_cfg(budget=1), **kw)
    assert meta["stop_reason"] in ("budget_spent", "token_budget_spent", "first_turn_done"), (meta["stop_reason"], meta["stop_detail"])
    assert json.loads((run_dir / "run_meta.json").read_text())["status"] == "complete"
    turns, calls = tables(run_dir)
    return meta, srv, run_dir, turns, calls


def _refused_call(tmp_path, script, needle, cfg=None):
    """The one call in the script is refused as malformed, the model reads why, and the run goes on.

    The context is wide: a huge call stays in the conversation, and this is about the call, not the window."""
    meta, srv, run_dir, _, calls = _result_run(tmp_path, script + [DONE], cfg, server_kw={"n_ctx": 400_000})
    assert list(calls["ok"]) == [False] and list(calls["malformed"]) == [True], calls[["tool", "error"]].to_dict("records")
    assert needle in calls["error"].iloc[0], calls["error"].iloc[0]
    assert meta["malformed_calls"] == 1 and meta["tool_errors"] == 1
    tool_msg = [m for m in srv.requests[-1]["messages"] if m["role"] == "tool"][0]
    assert tool_msg["content"].startswith("Error:") and needle in tool_msg["content"]
    return meta, run_dir, calls


# ---- arguments a tool cannot take: refused before anything runs -----------------------------------
def test_nul_in_bash_command(tmp_path):
    _refused_call(tmp_path, [call("bash", {"command": "echo a\x00b"})], "NUL")


def test_nul_in_grep_pattern(tmp_path):
    _refused_call(tmp_path, [call("grep", {"pattern": "a\x00b", "path": "dataroom"})], "NUL")


def test_200kb_bash_command(tmp_path):
    _refused_call(tmp_path, [call("bash", {"command": "echo " + "x" * 200_000})], "more than the 100000 allowed")


def test_140kb_glob(tmp_path):
    _refused_call(tmp_path, [call("grep", {"pattern": "a", "glob": "[" * 140_000})], "more than the 4096 allowed")


def test_read_offset_as_float(tmp_path):
    _refused_call(tmp_path, [call("read", {"path": "dataroom/README.md", "offset": 2.0})], "is not of type 'integer'")


def test_bash_timeout_nan(tmp_path):
    _refused_call(tmp_path, [call("bash", '{"command": "echo hi", "timeout": NaN}')], "NaN is not a number JSON allows")


def test_arguments_nested_100000_deep_in_the_arguments_string(tmp_path):
    _refused_call(tmp_path, [call("bash", '{"command": ' + deep(100_000) + "}")], "nested too deep")


def test_lone_surrogate_in_arguments(tmp_path):
    meta, run_dir, calls = _refused_call(tmp_path, [call("write", {"path": "ANSWER.md", "content": "half \ud83d emoji"})], "not valid Unicode")
    assert not (run_dir / "work" / "ANSWER.md").read_text().startswith("half")  # nothing was written: the backstop's text


def test_raw_lone_surrogate_inside_the_arguments_string(tmp_path):
    # The arguments text itself holds the surrogate (not a JSON escape of it): the row that records it must still write.
    meta, run_dir, calls = _refused_call(tmp_path, [call("bash", '{"command": "echo \ud83d"}')], "not valid Unicode")
    assert "\ufffd" in calls["arguments"].iloc[0]
    assert pq.read_table(run_dir / "tool_calls.parquet").num_rows == 1


def test_lone_surrogate_in_content_reaches_the_answer_as_replacement(tmp_path):
    meta, _, run_dir, _, _ = _result_run(tmp_path, [{"content": "38.4 m \ud83d"}])
    assert (run_dir / "work" / "ANSWER.md").read_text().strip() == "38.4 m \ufffd"
    assert (run_dir / "snapshots" / "ANSWER-t1.md").exists() and meta["answer_source"] == "backstop"


# ---- replies the loop cannot take apart: a malformed step, the model is told ----------------------
@pytest.mark.parametrize("tool_calls, needle", [
    ("ls", "must be a list"),
    (["ls", 5], "not an object with a `function` object"),
    ([{"id": "c1", "type": "function", "function": "ls"}], "not an object with a `function` object"),
    ([{"id": "c1", "type": "function", "function": {"name": 5, "arguments": "{}"}}], "must be a non-empty string"),
])
def test_tool_calls_of_the_wrong_shape(tmp_path, tool_calls, needle):
    script = [{"message": {"role": "assistant", "content": None, "tool_calls": tool_calls}}, DONE]
    meta, _, run_dir, turns, calls = _result_run(tmp_path, script)
    assert calls.empty and list(turns["malformed"]) == [1] and meta["malformed_replies"] == 1
    assert any(e["type"] == "malformed" and needle in e["error"] for e in trace(run_dir))


def test_content_parts_are_text(tmp_path):
    parts = [{"type": "text", "text": "It is "}, {"type": "text", "text": "38.4 metres."}]
    meta, _, run_dir, turns, _ = _result_run(tmp_path, [{"message": {"role": "assistant", "content": parts}}])
    assert meta["answer"].strip() == "It is 38.4 metres." and list(turns["malformed"]) == [0]


def test_content_as_a_number_is_malformed(tmp_path):
    meta, _, run_dir, turns, _ = _result_run(tmp_path, [{"message": {"role": "assistant", "content": 42}}, DONE])
    assert list(turns["malformed"]) == [1] and meta["answer"].strip() == "done"


def test_arguments_nested_100000_deep_in_the_response_body(tmp_path):
    body = ('{"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, '
            '"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": ' + deep(100_000) + "}}]}}]}")
    meta, _, run_dir, turns, calls = _result_run(tmp_path, [{"body": body}, DONE])
    assert calls.empty and list(turns["malformed"]) == [1]
    assert any(e["type"] == "malformed" and "nested too deep" in e["error"] for e in trace(run_dir))
    assert meta["tokens"]["estimated_calls"] >= 1  # the deep reply billed nothing readable: estimated, and marked


def test_arguments_nested_100000_deep_through_the_json_protocol(tmp_path):
    cfg = make_cfg(budget=1)
    cfg.model.protocol = "json"
    script = [{"raw": '{"tool": "ls", "arguments": ' + deep(100_000) + "}"}, DONE]
    meta, _, run_dir, turns, calls = _result_run(tmp_path, script, cfg, server_kw={"n_ctx": 400_000})
    assert calls.empty and list(turns["malformed"]) == [1]


def test_numeric_tool_name(tmp_path):
    script = [{"message": {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": 12345, "arguments": "{}"}}]}}, DONE]
    meta, _, run_dir, turns, _ = _result_run(tmp_path, script)
    assert list(turns["malformed"]) == [1]


def test_a_50mb_reply_is_refused_at_the_size_limit(tmp_path):
    cfg = make_cfg(budget=1)
    big = "x" * (12 * 1024**2)  # past the default 8 MiB limit, so the client stops reading early
    meta, _, run_dir, turns, _ = _result_run(tmp_path, [{"content": big}, DONE], cfg)
    bad = [e for e in trace(run_dir) if e["type"] == "malformed"]
    assert len(bad) == 1 and "over the 8388608-byte limit" in bad[0]["error"] and "bytes" in bad[0]["error"]
    assert (run_dir / "state.json").stat().st_size < 1024**2
    assert (run_dir / "trace.jsonl").stat().st_size < 1024**2
    assert meta["answer"].strip() == "done"


def test_response_size_limit_is_configurable(tmp_path):
    cfg = make_cfg(budget=1)
    cfg.model.max_response_bytes = 4096
    meta, _, run_dir, turns, _ = _result_run(tmp_path, [{"content": "y" * 10_000}, DONE], cfg)
    assert list(turns["malformed"]) == [1] and meta["answer"].strip() == "done"


# ---- usage and timings: nonsense is estimated and marked, never counted as given -------------------
def test_timings_with_strings_and_no_usage(tmp_path):
    script = [{"content": "38.4", "usage": None, "timings": {"prompt_n": "lots", "predicted_n": "some", "cache_n": {"x": 1}}}]
    meta, _, _, turns, _ = _result_run(tmp_path, script)
    assert meta["tokens"]["estimated_calls"] == 1 and meta["tokens"]["prompt"] > 0 and meta["tokens"]["completion"] > 0


def test_cached_tokens_past_any_count(tmp_path):
    script = [{"content": "38.4", "usage": {"prompt_tokens": 100, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 10**30}}}]
    meta, _, run_dir, turns, _ = _result_run(tmp_path, script)
    assert meta["tokens"]["estimated_calls"] == 1 and meta["tokens"]["cached"] <= meta["tokens"]["prompt"]
    assert int(turns["cached_tokens"].iloc[0]) <= int(turns["prompt_tokens"].iloc[0])


def test_negative_and_non_numeric_usage_cannot_run_a_token_budget_for_free(tmp_path):
    nonsense = {"prompt_tokens": -500, "completion_tokens": "many"}
    script = [{**call("ls", {"path": "dataroom"}), "usage": nonsense}] * 200
    meta, _, _, turns, _ = _result_run(tmp_path, script, make_cfg(budget=2000, budget_unit="tokens", max_turns=64))
    assert meta["stop_reason"] == "token_budget_spent" and meta["turns"] < 64
    assert meta["tokens"]["total"] >= 2000 and meta["tokens"]["estimated_calls"] == meta["llm_calls"]


def test_infinite_prompt_tokens(tmp_path):
    body = ('{"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "38.4"}}], '
            '"usage": {"prompt_tokens": 1e999, "completion_tokens": 3}}')
    meta, _, _, turns, _ = _result_run(tmp_path, [{"body": body}])
    assert meta["tokens"]["estimated_calls"] == 1 and 0 < meta["tokens"]["prompt"] < 10**6


@pytest.mark.parametrize("usage, estimated", [
    ({"prompt_tokens": 10, "completion_tokens": 2}, False),
    ({"prompt_tokens": 10.0, "completion_tokens": 2}, False),
    ({"prompt_tokens": -500, "completion_tokens": "many"}, True),
    ({"prompt_tokens": 10.5, "completion_tokens": 2}, True),
    ({"prompt_tokens": float("inf"), "completion_tokens": 2}, True),
    ({"prompt_tokens": True, "completion_tokens": 2}, True),
    ({"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 10**30}}, True),
    ({"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 11}}, True),
    ({"prompt_tokens": 10}, True),
])
def test_usage_values_must_be_finite_non_negative_integers(usage, estimated):
    parsed, _ = parse_usage({"usage": usage})
    assert parsed.estimated is estimated
    assert all(isinstance(v, int) and 0 <= v <= 10**9 for v in (parsed.prompt, parsed.completion, parsed.cached))


def test_timings_keep_numbers_only():
    usage, timings = parse_usage({"timings": {"prompt_n": 5, "cache_n": 2, "predicted_n": 3, "note": "x", "nested": {"a": 1},
                                              "inf": float("inf"), 7: 1}})
    assert (usage.prompt, usage.completion, usage.cached, usage.estimated) == (7, 3, 2, False)
    assert timings == {"prompt_n": 5, "cache_n": 2, "predicted_n": 3}


# ---- the decoders alone -------------------------------------------------------------------------
def test_native_decoder_keeps_the_text_of_a_malformed_reply():
    decoded = NativeProtocol().decode({"content": "thinking \ud83d", "tool_calls": "ls"})
    assert decoded.malformed and decoded.message == {"role": "assistant", "content": "thinking \ufffd"}
    decoded = NativeProtocol().decode({"content": None, "tool_calls": [{"function": {"name": "ls", "arguments": {"path": "."}}}]})
    assert not decoded.malformed and json.loads(decoded.message["tool_calls"][0]["function"]["arguments"]) == {"path": "."}
    assert NativeProtocol().decode({"content": "", "tool_calls": [{"function": {"name": "ls"}}] * 65}).malformed


def test_json_decoder_refuses_what_it_cannot_name():
    proto = JsonProtocol()
    assert proto.decode({"content": '{"tool": 5, "arguments": {}}'}).malformed
    assert proto.decode({"content": '{"tool": "ls\\ud83d", "arguments": {}}'}).malformed
    assert proto.decode({"content": ["not", "text"]}).malformed
    ok = proto.decode({"content": [{"type": "text", "text": '{"answer": "38.4"}'}]})
    assert not ok.malformed and ok.message["content"] == "38.4"
