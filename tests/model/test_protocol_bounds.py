"""The JSON protocol's generation bounds: every free string and array of every tool bounded, calls that fit max_tokens."""

from __future__ import annotations

import copy
import json

import httpx
import pytest

from searchbox.model import protocol
from searchbox.model.protocol import CALL_CHARS, REPETITION_CAP, GenerationBounds, JsonProtocol, NativeProtocol, bounded
from searchbox.tools import CATALOG, select

ALL = [s.schema() for s in CATALOG]


def _arguments(schema: dict) -> dict[str, dict]:
    """tool name -> its bounded arguments schema, as the JSON protocol sends it."""
    return {v["properties"]["tool"]["const"]: v["properties"]["arguments"] for v in schema["anyOf"] if "tool" in v["properties"]}


def _free(node: dict) -> bool:
    return not any(k in node for k in ("enum", "const", "pattern", "format"))


def worst_value(node: dict):
    """The longest value the grammar lets a model generate for this schema (a string of maxLength 'x's,
    maxItems of the longest item, the widest integer of the range, 16+16 digits for a number)."""
    kind = node.get("type")
    if "enum" in node:
        return max(node["enum"], key=lambda v: len(json.dumps(v)))
    if kind == "string":
        return "x" * node["maxLength"]
    if kind == "array":
        return [worst_value(node["items"])] * node["maxItems"]
    if kind == "integer":
        return max(abs(node.get("minimum", -(10**16))), abs(node.get("maximum", 10**16))) * (-1 if "minimum" not in node else 1)
    if kind == "number":
        return -1234567890123456.1234567890123456
    if kind == "boolean":
        return False
    if kind == "object":
        return {k: worst_value(v) for k, v in node["properties"].items()}
    raise AssertionError(f"no worst case for {node}")


def test_every_free_string_and_array_of_every_tool_is_bounded():
    args = _arguments(JsonProtocol().schema(ALL))
    assert set(args) == {s.name for s in CATALOG}
    limits = GenerationBounds()
    for tool, schema in args.items():
        for name, node in schema["properties"].items():
            if node.get("type") == "string" and _free(node):
                assert node["maxLength"] == limits.chars(name) <= REPETITION_CAP, (tool, name, node)
            if node.get("type") == "array":
                assert node["maxItems"] == limits.max_items(name) and node["items"]["maxLength"] == limits.chars(name), (tool, name)
            if "enum" in node:
                assert "maxLength" not in node, (tool, name)
    assert args["write"]["properties"]["content"]["maxLength"] == args["edit"]["properties"]["new"]["maxLength"] == limits.content
    assert limits.content > limits.command > limits.path > limits.query > limits.text
    assert args["search_dataroom"]["properties"]["paths"]["maxItems"] == limits.path_items
    timeout = args["bash"]["properties"]["timeout"]  # a number's range is no grammar bound in llama.cpp; an integer's is
    catalog_timeout = next(s for s in CATALOG if s.name == "bash").parameters["properties"]["timeout"]
    assert timeout == {"type": "integer", "minimum": catalog_timeout["minimum"], "maximum": catalog_timeout["maximum"]}
    assert args["cluster"]["properties"]["threshold"]["type"] == "number"  # a fraction stays a number


def test_every_named_kind_is_a_real_argument_of_the_catalog():
    names = {name for s in CATALOG for name in s.parameters.get("properties", {})}
    assert {name for name, _ in GenerationBounds().kinds} <= names  # a renamed argument would fall back to `text` silently
    assert set(GenerationBounds().whole) <= names


def test_a_whole_call_fits_the_call_budget_except_write_and_edit():
    args = _arguments(JsonProtocol().schema(ALL))
    for tool, schema in args.items():
        call = json.dumps({"tool": tool, "arguments": worst_value(schema)}, separators=(",", ":"))
        if tool in ("write", "edit"):
            assert len(call) > CALL_CHARS  # content keeps a larger bound
        else:
            assert len(call) <= CALL_CHARS, (tool, len(call))


def test_the_catalog_is_left_as_it_is_and_its_tighter_bounds_win():
    before = copy.deepcopy(ALL)
    JsonProtocol().schema(ALL)
    assert ALL == before  # a generation view, never an edit of the single source of truth
    tight = {"type": "object", "properties": {"query": {"type": "string", "maxLength": 10}, "paths": {"type": "array", "items": {"type": "string"}, "maxItems": 1},
                                              "huge": {"type": "string", "maxLength": 10**6}, "at_least": {"type": "string", "minLength": 200}}}
    out = bounded(tight, GenerationBounds())["properties"]
    assert out["query"]["maxLength"] == 10 and out["paths"]["maxItems"] == 1 and out["paths"]["items"]["maxLength"] == 112
    assert out["huge"]["maxLength"] == 48  # a validation bound of a million characters is no grammar bound
    assert out["at_least"]["maxLength"] == 200  # never below minLength: the grammar must stay satisfiable
    assert "maxLength" not in bounded({"type": "string", "maxLength": 9}, None) and "maxItems" not in bounded(
        {"type": "array", "items": {"type": "string", "maxLength": 9}, "maxItems": 3}, None)["items"]


def test_schema_version_and_the_unbounded_ablation(monkeypatch):
    assert JsonProtocol().version == protocol.JSON_SCHEMA_VERSION == 6 and JsonProtocol(None).version == 1
    assert JsonProtocol().watch is not None and JsonProtocol(None).watch is None
    monkeypatch.setenv(protocol.BOUNDS_ENV, "off")
    assert protocol.json_bounds() is None
    proto = protocol.choose("json", None)
    assert proto.version == 1 and "maxLength" not in json.dumps(proto.schema(ALL))
    monkeypatch.setenv(protocol.BOUNDS_ENV, "calls")  # the calls bounded, the answer not: version 2
    proto = protocol.choose("json", None)
    assert proto.version == 2 and "maxLength" not in json.dumps(_answer_schema(proto)) and "maxLength" in json.dumps(proto.schema(ALL))
    assert proto.watch is None
    monkeypatch.setenv(protocol.BOUNDS_ENV, "answer")  # the answer bounded too, no reply stopped for looping: version 3
    proto = protocol.choose("json", None)
    assert proto.version == 3 and proto.watch is None and "maxLength" in json.dumps(_answer_schema(proto))
    monkeypatch.delenv(protocol.BOUNDS_ENV)
    assert protocol.choose("json", None).version == 6


def _answer_schema(proto: JsonProtocol) -> dict:
    return next(v for v in proto.schema(ALL)["anyOf"] if "answer" in v["properties"])["properties"]["answer"]


def _longest_gold() -> int:
    from importlib import resources

    longest = 0
    for name in ("questions.jsonl", "jina-questions.jsonl"):  # the tiny and the packaged sets
        for line in resources.files("searchbox.builtin").joinpath(name).read_text(encoding="utf-8").splitlines():
            if line.strip():
                q = json.loads(line)
                longest = max([longest, len(q["answer"]), *(len(a) for a in q.get("aliases") or [])])
    return longest


def test_the_final_answer_is_bounded_with_room_for_every_gold():
    """Schema version 3 bounds the answer as it bounds a call's strings: far above what a right answer needs
    (the longest gold of the packaged and tiny sets, with room for a Sources line), and not at all in version 1."""
    answer = _answer_schema(JsonProtocol())
    assert answer["maxLength"] == GenerationBounds().answer >= 8 * _longest_gold()
    assert "maxLength" not in _answer_schema(JsonProtocol(None))


def test_an_answer_at_the_bound_is_marked_cut_and_kept_as_written():
    proto, limit = JsonProtocol(), GenerationBounds().answer
    whole = proto.decode({"content": json.dumps({"answer": "Paris\nSources: dataroom/a.md"})})
    assert whole.malformed is None and whole.message["content"].startswith("Paris") and not whole.message.get("truncated")
    looping = ("the answer is " * 100)[:limit]  # a phrase repeated until the grammar closed the string
    cut = proto.decode({"content": json.dumps({"answer": looping})})
    assert cut.malformed is None and cut.message["truncated"] is True and cut.message["content"] == looping
    unbounded = JsonProtocol(None).decode({"content": json.dumps({"answer": looping})})
    assert not unbounded.message.get("truncated")  # version 1 has no bound to be cut at


def test_the_prompt_and_the_native_protocol_do_not_change():
    tools = [s.schema() for s in select("all")]
    assert JsonProtocol().system_suffix(tools) == JsonProtocol(None).system_suffix(tools)  # same words to the model
    assert "maxLength" not in JsonProtocol().system_suffix(tools)
    native = NativeProtocol().request([], tools)
    assert [t["function"] for t in native["tools"]] == tools  # the catalog's schemas as they are


def test_the_schema_version_reaches_the_run_key(monkeypatch):
    from searchbox.config import RunConfig
    from searchbox.run.identity import run_key
    from searchbox.record.record import Served

    cfg = RunConfig(tools="high")
    cfg.model.protocol = "json"
    served = Served(model_id="m", gguf_sha256="abc")
    keys = {"json": run_key(cfg, "q1", "Q?", "data", served, protocol="json"),
            "native": run_key(cfg, "q1", "Q?", "data", served, protocol="native")}
    monkeypatch.setenv(protocol.BOUNDS_ENV, "off")
    assert run_key(cfg, "q1", "Q?", "data", served, protocol="json") != keys["json"]  # another grammar, another run
    assert run_key(cfg, "q1", "Q?", "data", served, protocol="native") == keys["native"]  # native sends no grammar


@pytest.mark.e2e
def test_llama_server_builds_the_bounded_grammar_and_the_reply_respects_it(real_home):
    """The real llama-server accepts the bounded schema of every tool at once, and SmolLM2 held to one tool and
    asked to fill its widest arguments still closes the call: valid JSON, every bound kept, stopped by the grammar
    before max_tokens; and a final answer asked to run on stops at its own bound, before max_tokens."""
    from searchbox.model import llama
    from searchbox.config import ModelConfig

    if llama.find_server() is None or llama.find_model() is None:
        pytest.skip("embedded default not installed: run `python -m searchbox setup` (.ci/run does)")
    proto = JsonProtocol()
    tools = [s.schema() for s in select("all")]
    limits = GenerationBounds()
    asks = {  # each invites a long string or a full array
        "search_dataroom": "Search with a very long query that repeats every word of this sentence, and list ten paths to search in.",
        "similarity": "Compare ten texts in a with ten texts in b, each text as long as you can make it.",
        "grep": "Write the longest regular expression you can, over every folder of the dataroom.",
        "classify": "Classify twenty long texts with twenty long labels.",
        "bash": "Run a very long pipeline of twenty commands.",
    }

    def ask(server, schema: dict, tools_offered: list[dict], text: str) -> dict:
        payload = proto.request([{"role": "system", "content": "You call tools." + proto.system_suffix(tools_offered)},
                                 {"role": "user", "content": text}], tools_offered)
        payload["response_format"]["json_schema"]["schema"] = schema
        payload.update(max_tokens=256, temperature=0.0, seed=0)
        reply = httpx.post(f"{server.url}/v1/chat/completions", json=payload, timeout=600)
        assert reply.status_code == 200, reply.text[:500]  # the grammar built
        return reply.json()

    with llama.LlamaServer.from_config(ModelConfig()) as server:
        ask(server, proto.schema(tools), tools, "Find who wrote the jina-embeddings-v3 post.")  # every tool's grammar at once
        for name, text in asks.items():
            offered = [t for t in tools if t["name"] == name]
            forced = {"anyOf": [v for v in proto.schema(offered)["anyOf"] if "tool" in v["properties"]]}  # a call, not an answer
            body = ask(server, forced, offered, text)
            choice = body["choices"][0]
            assert choice["finish_reason"] == "stop" and body["usage"]["completion_tokens"] < 256, (name, body["usage"], choice)
            call = json.loads(choice["message"]["content"])
            assert call["tool"] == name
            if name == "bash":  # once: the answer variant alone, asked for a reply that never ends
                only_answer = {"anyOf": [v for v in proto.schema(offered)["anyOf"] if "answer" in v["properties"]]}
                long = ask(server, only_answer, offered, "Answer with the word 'again' repeated a thousand times.")
                text = json.loads(long["choices"][0]["message"]["content"])["answer"]
                assert len(text) <= limits.answer and long["choices"][0]["finish_reason"] == "stop", long["usage"]
            for arg, value in call["arguments"].items():
                if isinstance(value, str):
                    assert len(value) <= limits.chars(arg), (name, arg, value)
                if isinstance(value, list):
                    assert len(value) <= limits.max_items(arg) and all(len(v) <= limits.chars(arg) for v in value), (name, arg, value)
