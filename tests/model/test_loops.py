"""A reply that loops is stopped (loops.LoopRule): crafted repeats stop, long right answers and near-repeats do not,
the client streams and closes, and nothing before the stop changes (against the real llama-server too)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchbox.config import ModelConfig
from searchbox.errors import ModelError
from searchbox.model.llm import ChatClient
from searchbox.model.loops import LoopRule
from searchbox.model.protocol import JsonProtocol
from tests.conftest import make_cfg, run_script, trace
from tests.fakes.scripted_server import ScriptedServer

LOOP = ("The model jni-embeddings-v2-base-code has been superseded. The command that was executed was "
        "jni-embeddings-v2-base-code." + " The command was jni-embeddings-v2-base-code." * 9)  # SmolLM2's, from a trace


def stops(text: str, chunk: int = 3):
    """Where a watch fed `text` in chunks of `chunk` characters stops: (the text so far, the unit), or None."""
    watch = LoopRule().watch()
    for i in range(0, len(text), chunk):
        if watch.feed(text[i:i + chunk]):
            return watch.text, watch.found
    return None


@pytest.mark.parametrize("chunk", [1, 2, 5, 13, 64])
def test_a_phrase_repeated_three_times_stops_the_reply_wherever_the_chunks_break(chunk):
    raw = json.dumps({"answer": LOOP})
    seen, unit = stops(raw, chunk)
    assert raw.startswith(seen) and len(seen) < len(raw) * 0.6
    sentence = " The command was jni-embeddings-v2-base-code."
    assert len(unit) == len(sentence) and unit in sentence * 2  # the sentence, rotated by where the stop fell
    assert seen.endswith(unit * 3)  # three copies end the text read
    assert seen.count("The command was") <= 4  # the fourth begun at most


@pytest.mark.parametrize("chunk", [1, 3, 4, 13])
def test_a_stopped_reply_keeps_two_copies_and_nothing_of_the_last_piece(chunk):
    watch = LoopRule().watch()
    raw = json.dumps({"answer": LOOP})
    pieces = [raw[i:i + chunk] for i in range(0, len(raw), chunk)]
    last = next(i for i, p in enumerate(pieces) if watch.feed(p))
    kept = watch.text[:watch.kept]
    assert kept.endswith(watch.found * 2) and not kept.endswith(watch.found * 3)  # two copies: the third says nothing new
    assert watch.kept <= sum(map(len, pieces[:last]))  # the last piece read is never kept
    assert watch.kept - len('{"answer": "') >= LoopRule().min_string


def test_a_reply_that_arrives_whole_is_not_stopped():
    assert stops(json.dumps({"answer": LOOP}), 10_000) is None  # closed before the watch saw it: nothing left to save


@pytest.mark.parametrize("text", [
    "The Gannet Rock lighthouse is 18 metres tall. It was built in 1881, automated in 1967, and its light is visible "
    "20 nautical miles out; the keepers' logs in dataroom/logs/1881.md and dataroom/logs/1967.md say so, and the "
    "survey of 1990 (dataroom/surveys/1990.md) gives 18.2 metres to the lantern's top. Sources: dataroom/logs/1881.md, "
    "dataroom/logs/1967.md, dataroom/surveys/1990.md",  # a long right answer at the bound
    "0, " * 150,  # one short unit: data, not a loop
    "| --- " * 70,  # a table's rule: fewer than three different words
    "very " * 90,
    "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30",
    "The command was X. The command was X.",  # twice is not yet a loop
    "a cat sat; " * 2 + "a cat sat!",
])
def test_answers_that_do_not_loop_are_never_stopped(text):
    assert stops(json.dumps({"answer": text}), 1) is None


def test_repeats_across_strings_or_outside_them_do_not_stop():
    items = ["dataroom/the cat sat here.md"] * 4  # a list of equal items: each string ends before any repeat
    assert stops(json.dumps({"tool": "read", "arguments": {"paths": items}}), 1) is None
    assert stops('{"a": 1, "b": 2, "c": 3, "a": 1, "b": 2, "c": 3, "a": 1, "b": 2, "c": 3, "a": 1}', 1) is None
    quoted = json.dumps({"answer": 'he said "the cat sat on it" and ' * 6})  # escaped quotes stay inside the string
    assert stops(quoted, 1) is not None


def test_a_hostile_stream_of_tiny_chunks_costs_little():
    import time

    import random

    rng = random.Random(0)
    watch, text = LoopRule().watch(), '{"answer": "' + " ".join(f"w{rng.randrange(500)}" for _ in range(20_000))
    start = time.monotonic()
    assert not any(watch.feed(ch) for ch in text)
    assert time.monotonic() - start < 30  # generous: a 100K-character reply in one-character events


# ---- the client: stream, close at the loop, bill what was seen ------------------------------
def client(srv, **cfg) -> ChatClient:
    return ChatClient(ModelConfig(retries=0, backoff_s=0.0, **cfg), srv.url)


def ask(c: ChatClient, watch=True):
    payload = JsonProtocol().request([{"role": "user", "content": "q"}], [])
    return c.chat(payload, watch=JsonProtocol().watch if watch else None)


def test_the_client_closes_a_looping_stream_and_bills_what_it_read():
    with ScriptedServer([{"content": LOOP}, {"content": LOOP}], slots=1) as srv:
        srv.stream_pause = 0.002  # the server notices the closed connection while it still has events to send
        c = client(srv)
        watched, plain = ask(c), ask(c, watch=False)
    full = json.dumps({"answer": LOOP})
    assert plain.message["content"] == full and plain.finish_reason == "stop"
    text = watched.message["content"]
    assert watched.finish_reason == "loop" and full.startswith(text) and len(text) < len(full) * 0.6
    assert srv.requests[0]["stream"] is True and srv.requests[0]["timings_per_token"] is True  # llama-server: counts so far
    assert "stream" not in srv.requests[1]
    assert srv.streamed[0] < len(full) // 4  # the server stopped sending once the client closed
    # billed from the last event's running timings: every token read, not an estimate (the last copy too: the server
    # generated it, though the reply is kept without it)
    seen, _ = stops(full, 4)
    assert not watched.usage.estimated and watched.usage.completion == -(-len(seen) // 4)
    assert JsonProtocol().decode(watched.message).message["truncated"] is True


def test_a_stopped_reply_is_kept_up_to_its_last_copy_never_with_the_last_piece_read():
    # llama-server computes a token's place in its cache when it samples the next one, so every piece it sent before
    # the last was computed before the client closed, and the last one may or may not have been: kept (schema version
    # 4), the next request found it cached or prefilled it by how soon the server saw the close (1-3 prompt tokens
    # apart between identical runs of the main command; a prefilled token and a cached one differ in the last bits).
    with ScriptedServer([{"content": LOOP}], slots=1) as srv:
        srv.stream_pause = 0.002
        watched = ask(client(srv))
    full, text = json.dumps({"answer": LOOP}), watched.message["content"]
    assert watched.finish_reason == "loop" and full.startswith(text)
    assert stops(text, 1) is None  # two copies: what is kept does not loop by itself
    seen, unit = stops(full, 4)  # the scripted server streams four characters an event
    assert text == seen[:len(seen) - len(unit)] and len(seen) - len(text) >= 4


def test_a_reply_that_does_not_loop_streams_to_the_same_message_and_usage():
    answer = "The lighthouse is 18 metres tall. Sources: dataroom/logs/1881.md"
    with ScriptedServer([{"content": answer}, {"content": answer}], slots=1) as srv:
        c = client(srv)
        watched, plain = ask(c), ask(c, watch=False)
    assert watched.message["content"] == plain.message["content"] == json.dumps({"answer": answer})
    assert watched.finish_reason == plain.finish_reason == "stop"
    assert (watched.usage.prompt, watched.usage.completion, watched.usage.estimated) == (
        plain.usage.prompt, plain.usage.completion, False)


@pytest.mark.parametrize("events, problem", [
    (b"data: {not json\n\n", "unusable response"),
    (b"data: [DONE]\n\n", "unusable response"),
    (b'data: {"error": {"message": "the model crashed"}}\n\n', "the model crashed"),
    (b'data: ["a list"]\n\n', "unusable response"),
])
def test_a_hostile_stream_is_a_one_line_model_error(events, problem):
    with ScriptedServer([{"sse": events}]) as srv:
        with pytest.raises(ModelError, match=problem):
            ask(client(srv))


def test_a_stream_over_the_size_limit_is_a_malformed_reply_not_a_crash():
    chunk = b'data: {"choices": [{"index": 0, "delta": {"content": "' + b"abcdefgh " * 200 + b'"}}]}\n\n'
    with ScriptedServer([{"sse": chunk * 10}]) as srv:
        resp = ask(client(srv, max_response_bytes=4096))
    assert resp.malformed and "4096-byte limit" in resp.malformed


def test_a_server_that_ignores_stream_is_read_as_usual():
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": '{"answer": "18 m"}'}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3}}
    with ScriptedServer([{"body": json.dumps(body)}]) as srv:
        resp = ask(client(srv))
    assert resp.message["content"] == '{"answer": "18 m"}' and resp.usage.completion == 3


# ---- in a run: the answer stopped, kept as written, the next prompt built from the cut ----------
def test_a_run_whose_answer_loops_keeps_the_cut_answer_and_goes_on_from_it(tmp_path):
    cfg = make_cfg(budget=2)
    cfg.model.protocol = "json"
    meta, srv, run_dir = run_script(tmp_path, [{"content": LOOP}, {"content": "18 m"}], cfg, server_kw={"slots": 1})
    replies = [e for e in trace(run_dir) if e.get("type") == "message" and e["message"]["role"] == "assistant"]
    first = replies[0]
    assert first["usage"]["finish_reason"] == "loop" and first["message"]["truncated"] is True
    assert LOOP.startswith(first["message"]["content"]) and len(first["message"]["content"]) < len(LOOP) * 0.6
    # the next request carries the reply as it was read (an open string: nothing the server generated past it)
    sent = [m for m in srv.requests[1]["messages"] if m["role"] == "assistant"][0]["content"]
    assert sent == first["message"]["raw"] and not sent.endswith('"}')
    assert [e["message"]["content"] for e in replies][-1] == "18 m"


def test_a_tool_call_stopped_for_looping_is_fed_back_as_stopped_not_as_bad_json(tmp_path):
    """A bash command that repeats itself is stopped like an answer, but a cut call cannot be run: the reply is
    malformed, and the trace and the model's feedback say the harness stopped it (JSON schema version 6; version 5
    fed back 'response is not valid JSON (Unterminated string...)', a parse error the model never made)."""
    from searchbox.model.protocol import LOOP_STOPPED, JsonProtocol

    command = "grep -rn model dataroom/ | head; " * 8
    cfg = make_cfg(budget=1)
    cfg.model.protocol = "json"
    script = [{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, {"content": "18 m"}]
    meta, srv, run_dir = run_script(tmp_path, script, cfg, server_kw={"slots": 1})
    events = trace(run_dir)
    stopped = [e for e in events if e.get("type") == "message" and e["message"]["role"] == "assistant"][0]
    assert stopped["usage"]["finish_reason"] == "loop" and command.startswith(stopped["message"]["raw"].split('"command": "')[1])
    assert [e["error"] for e in events if e.get("type") == "malformed"] == [LOOP_STOPPED]
    feedback = [m for m in srv.requests[1]["messages"] if m["role"] == "user"][-1]["content"]
    assert LOOP_STOPPED in feedback and "not valid JSON" not in feedback
    assert meta["answer"].strip() == "18 m"
    # Decoding alone: the same cut text without the stop is a parse error, and a stopped answer is still an answer.
    raw = stopped["message"]["raw"]
    assert "not valid JSON" in JsonProtocol().decode({"content": raw}).malformed
    assert JsonProtocol().decode({"content": raw}, "loop").malformed == LOOP_STOPPED
    answer = JsonProtocol().decode({"content": '{"answer": "' + LOOP[:150]}, "loop")
    assert answer.malformed is None and answer.message["truncated"] and answer.message["content"] == LOOP[:150]


# ---- the real llama-server: nothing before the stop changes ------------------------------------
@pytest.mark.e2e
def test_llama_server_stops_smollm2s_loop_and_changes_nothing_before_it(real_home):
    """SmolLM2's own looping reply (tools=high, the packaged question jq001, from a trace): streamed and watched it
    stops at the third copy of its sentence; the same request unwatched, from an erased slot, writes the same text
    on to the bound. The next request reuses the tokens kept and none the server generated past them, however soon
    the server saw the connection close."""
    from searchbox.model import llama

    if llama.find_server() is None or llama.find_model() is None:
        pytest.skip("embedded default not installed: run `python -m searchbox setup` (.ci/run does)")
    payload = json.loads((Path(__file__).parent / "data" / "loop_request.json").read_text())
    with llama.LlamaServer.from_config(ModelConfig()) as server:
        c = ChatClient(ModelConfig(), server.url)
        pairs = []
        for _ in range(3):  # the same pair from an erased slot: the cache the stop leaves must not depend on timing
            c.start_clean(0)
            watched = c.chat(payload, watch=JsonProtocol().watch)
            follow = dict(payload, messages=payload["messages"] + [{"role": "assistant", "content": watched.message["content"]},
                                                                  {"role": "user", "content": "Continue."}], max_tokens=8)
            after = c.chat(follow)
            pairs.append((watched.message["content"], watched.usage.completion, after.usage.cached, after.message["content"]))
        c.start_clean(0)
        plain = c.chat(payload)
    text, full = watched.message["content"], plain.message["content"]
    assert watched.finish_reason == "loop" and plain.finish_reason == "stop"
    assert full.startswith(text) and len(text) < len(full) - 100, (text, full)
    assert text.count("The command was") <= 4 and not watched.usage.estimated
    assert watched.usage.completion < plain.usage.completion
    # cached for the next request: the prompt and the tokens kept, never the last one read, the same every time
    assert len(set(pairs)) == 1, pairs
    assert watched.usage.prompt < after.usage.cached < watched.usage.prompt + watched.usage.completion - 1


def test_no_answer_is_stopped_before_it_has_room_for_every_gold():
    """A stopped answer is never shorter than twice the longest gold of the packaged and tiny sets (and aliases)."""
    from tests.model.test_protocol_bounds import _longest_gold

    rule = LoopRule()
    assert rule.min_string >= 2 * _longest_gold() and rule.min_chars * rule.repeats <= rule.min_string
    phrase = "Gannet Rock is tall. "  # 21 characters, four words
    assert stops(json.dumps({"answer": phrase * 5}), 1) is None  # 105 characters: a repeat, but too short to stop
    watch = rule.watch()
    assert any(watch.feed(ch) for ch in json.dumps({"answer": phrase * 9}))
    assert watch.kept - len('{"answer": "') >= rule.min_string  # what a stop keeps: the reply up to its last copy
