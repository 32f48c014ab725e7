"""The agent loop against a scripted server over real HTTP: budgets, stops, backstop, accounting, protocols."""

from __future__ import annotations

import json

import pytest

from searchbox.harness.agent import STOP_REASONS
from tests.conftest import make_cfg, run_script, tables, trace

READ = {"tool_calls": [{"name": "read", "arguments": {"path": "dataroom/reports/gannet-rock-survey.md"}}]}
WRITE = {"tool_calls": [{"name": "write", "arguments": {"path": "ANSWER.md", "content": "38.4 metres"}}]}


@pytest.mark.parametrize("budget", [1, 3, 5])
def test_continue_sent_budget_minus_one_times(tmp_path, budget):
    script = [READ, {"content": "first"}] + [{"content": f"more {i}"} for i in range(budget)]
    meta, srv, run_dir = run_script(tmp_path, script, make_cfg(budget=budget))
    assert meta["stop_reason"] == "budget_spent"
    assert meta["turns"] == budget
    assert srv.user_messages("Continue.") == budget - 1
    assert meta["continues_sent"] == budget - 1
    turns, _ = tables(run_dir)
    assert list(turns["turn"]) == list(range(1, budget + 1))


def test_no_forcing_stops_after_first_turn(tmp_path):
    meta, srv, _ = run_script(tmp_path, [READ, {"content": "done"}], make_cfg(budget=10, force_budget=False))
    assert meta["stop_reason"] == "first_turn_done" and meta["turns"] == 1
    assert srv.user_messages("Continue.") == 0


def test_token_budget(tmp_path):
    script = [READ] * 50
    meta, _, run_dir = run_script(tmp_path, script, make_cfg(budget=3000, budget_unit="tokens", token_metric="total"))
    assert meta["stop_reason"] == "token_budget_spent"
    assert meta["tokens"]["total"] >= 3000
    turns, _ = tables(run_dir)
    assert turns["prompt_tokens"].sum() + turns["completion_tokens"].sum() == meta["tokens"]["total"]


def test_token_budget_forces_turns_until_spent(tmp_path):
    script = [{"content": "short"}] * 40
    meta, srv, _ = run_script(tmp_path, script, make_cfg(budget=2500, budget_unit="tokens", token_metric="prompt"))
    assert meta["stop_reason"] == "token_budget_spent" and meta["turns"] > 1
    assert srv.user_messages("Continue.") == meta["turns"] - 1


def test_run_ceiling(tmp_path):
    script = [{"sleep": 0.6, **READ}] * 10
    meta, _, run_dir = run_script(tmp_path, script, make_cfg(budget=5, run_ceiling_s=1.0))
    assert meta["stop_reason"] == "ceiling_seconds"
    turns, calls = tables(run_dir)
    assert len(turns) == 1 and len(calls) >= 1  # the cut turn still has its row


def test_turn_ceiling_ends_the_turn_not_the_run(tmp_path):
    script = [{"sleep": 0.4, **READ}] * 4 + [{"content": "a"}, {"content": "b"}]
    meta, _, run_dir = run_script(tmp_path, script, make_cfg(budget=2, turn_ceiling_s=0.5))
    assert meta["stop_reason"] == "budget_spent" and meta["turns"] == 2
    turns, _ = tables(run_dir)
    assert turns["ended_by"].iloc[0] == "turn_ceiling"


def test_model_error_after_retries_keeps_finished_turns(tmp_path):
    script = [READ, {"content": "turn one"}, {"status": 500}, {"status": 500}, {"status": 500}]
    meta, srv, run_dir = run_script(tmp_path, script, make_cfg(budget=3))
    assert meta["stop_reason"] == "model_error" and "500" in meta["stop_detail"]
    turns, calls = tables(run_dir)
    assert list(turns["turn"]) == [1, 2] and len(calls) == 1
    assert (run_dir / "work" / "ANSWER.md").read_text().strip() == "turn one"


def test_retry_recovers_from_one_failure(tmp_path):
    meta, _, _ = run_script(tmp_path, [{"status": 503}, {"content": "ok"}], make_cfg(budget=1))
    assert meta["stop_reason"] == "budget_spent" and meta["answer"].strip() == "ok"


def test_dead_endpoint_is_model_error(tmp_path):
    from searchbox.run.runner import execute

    cfg = make_cfg()
    meta = execute(cfg, "q?", None, tmp_path / "r", "http://127.0.0.1:9")
    assert meta["stop_reason"] == "model_error"
    assert json.loads((tmp_path / "r" / "run_meta.json").read_text())["status"] == "complete"


def test_paused_and_interrupted(tmp_path):
    meta, _, _ = run_script(tmp_path, [READ] * 5, make_cfg(budget=3), name="p", should_pause=lambda: True)
    assert meta["stop_reason"] == "paused"
    calls = {"n": 0}

    def interrupt():
        calls["n"] += 1
        if calls["n"] > 2:
            raise KeyboardInterrupt
        return False

    meta, _, run_dir = run_script(tmp_path, [READ] * 5, make_cfg(budget=3), name="i", should_pause=interrupt)
    assert meta["stop_reason"] == "interrupted"
    assert (run_dir / "turns.parquet").exists() and json.loads((run_dir / "run_meta.json").read_text())["stop_reason"] == "interrupted"


def test_every_stop_reason_is_known():
    assert set(STOP_REASONS) == {"budget_spent", "first_turn_done", "token_budget_spent", "ceiling_seconds", "context_exhausted", "model_error", "tool_error", "interrupted", "paused"}


def test_backstop_fills_from_assistant_text_only(tmp_path):
    meta, _, run_dir = run_script(tmp_path, [READ, {"content": "<think>hmm</think>It is 38.4 m."}], make_cfg(budget=1))
    assert (run_dir / "work" / "ANSWER.md").read_text().strip() == "It is 38.4 m."
    assert meta["answer_source"] == "backstop"


def test_backstop_never_captures_user_or_tool_text(tmp_path):
    meta, _, run_dir = run_script(tmp_path, [READ, {"content": ""}], make_cfg(budget=1))
    assert not (run_dir / "work" / "ANSWER.md").exists()
    assert meta["answer_present"] is False


def test_backstop_never_clobbers_model_answer(tmp_path):
    script = [WRITE, {"content": "final words that differ"}, {"content": "turn two words"}]
    meta, _, run_dir = run_script(tmp_path, script, make_cfg(budget=2))
    assert (run_dir / "work" / "ANSWER.md").read_text() == "38.4 metres"
    assert meta["answer_source"] == "model"
    snaps = sorted(p.name for p in (run_dir / "snapshots").iterdir())
    assert snaps == ["ANSWER-t1.md"]  # unchanged in turn 2: no new snapshot


def test_backstop_updates_its_own_text_and_snapshots_changes(tmp_path):
    script = [{"content": "guess one"}, {"content": "guess two"}, WRITE, {"content": "x"}]
    meta, _, run_dir = run_script(tmp_path, script, make_cfg(budget=3))
    snaps = {p.name: p.read_text() for p in (run_dir / "snapshots").iterdir()}
    assert snaps["ANSWER-t1.md"].strip() == "guess one"
    assert snaps["ANSWER-t2.md"].strip() == "guess two"
    assert snaps["ANSWER-t3.md"] == "38.4 metres"
    turns, _ = tables(run_dir)
    assert list(turns["answer_changed"]) == [True, True, True]


def test_malformed_calls_are_survived(tmp_path):
    script = [
        {"tool_calls": [{"name": "read", "arguments": "{not json"}]},
        {"tool_calls": [{"name": "teleport", "arguments": {}}]},
        {"tool_calls": [{"name": "read", "arguments": {}}]},
        {"tool_calls": [{"name": "read", "arguments": {"path": "../../etc/passwd"}}]},
        READ,
        {"content": "38.4 metres"},
    ]
    meta, _, run_dir = run_script(tmp_path, script, make_cfg(budget=1))
    assert meta["stop_reason"] == "budget_spent"
    _, calls = tables(run_dir)
    assert list(calls["ok"]) == [False, False, False, False, True]
    errors = list(calls["error"])
    assert "not valid JSON" in errors[0] and "unknown tool" in errors[1]
    assert "path" in errors[2] and "outside the working directory" in errors[3]
    tool_msgs = [e["message"] for e in trace(run_dir) if e["type"] == "message" and e["message"]["role"] == "tool"]
    assert tool_msgs[0]["content"].startswith("Error:")


def test_json_protocol_survives_unparseable_response(tmp_path):
    cfg = make_cfg(budget=1)
    cfg.model.protocol = "json"
    meta, srv, run_dir = run_script(tmp_path, [{"raw": '{"tool": "read", "argu'}, READ, {"content": "38.4"}], cfg)
    assert meta["stop_reason"] == "budget_spent" and meta["protocol"] == "json"
    turns, calls = tables(run_dir)
    # A malformed reply is not a tool call: it is counted on its own, and its error is in the trace.
    assert list(calls["tool"]) == ["read"] and list(turns["malformed"]) == [1] and meta["malformed_replies"] == 1
    assert any(e["type"] == "malformed" and "not valid JSON" in e["error"] for e in trace(run_dir))
    assert "response_format" in srv.requests[0] and "tools" not in srv.requests[0]


SCRIPT = [
    {"tool_calls": [{"name": "ls", "arguments": {"path": "dataroom"}}]},
    {"tool_calls": [{"name": "grep", "arguments": {"pattern": "Gannet", "path": "dataroom"}}]},
    READ,
    {"content": "It is 38.4 metres."},
    WRITE,
    {"content": "written"},
]


def test_both_protocols_same_artifacts(tmp_path):
    results = {}
    for proto in ("native", "json"):
        cfg = make_cfg(budget=2)
        cfg.model.protocol = proto
        meta, srv, run_dir = run_script(tmp_path, SCRIPT, cfg, name=proto)
        turns, calls = tables(run_dir)
        snaps = {p.name: p.read_text() for p in (run_dir / "snapshots").iterdir()}
        results[proto] = (meta["stop_reason"], meta["turns"], meta["answer"], snaps,
                          calls[["turn", "step", "tool", "arguments", "ok", "output_chars"]].to_dict("records"),
                          turns[["turn", "llm_calls", "tool_calls", "answer_chars", "answer_changed"]].to_dict("records"))
        assert meta["protocol"] == proto
    assert results["native"] == results["json"]


def test_auto_protocol_follows_props(tmp_path):
    cfg = make_cfg()
    cfg.model.protocol = "auto"
    meta, _, _ = run_script(tmp_path, [{"content": "x"}], cfg, name="a", server_kw={"supports_tools": False})
    assert meta["protocol"] == "json"
    meta, _, _ = run_script(tmp_path, [{"content": "x"}], make_cfg(), name="b", server_kw={"supports_tools": True})
    assert meta["protocol"] == "native"


def test_token_columns_sum_to_server_usage_across_compaction(tmp_path):
    big = {"tool_calls": [{"name": "bash", "arguments": {"command": "head -c 3000 /dev/zero | tr '\\0' a"}}]}
    script = ([big] * 3 + [{"content": "turn"}]) * 4
    cfg = make_cfg(budget=4)
    cfg.model.max_tokens = 200
    meta, srv, run_dir = run_script(tmp_path, script, cfg, server_kw={"n_ctx": 2600})
    assert meta["stop_reason"] == "budget_spent", meta["stop_detail"]
    assert meta["compactions"] > 0
    turns, _ = tables(run_dir)
    assert turns["compactions"].sum() == meta["compactions"]
    assert turns["prompt_tokens"].sum() == srv.usage_total["prompt"] == meta["tokens"]["prompt"]
    assert turns["completion_tokens"].sum() == srv.usage_total["completion"]
    assert turns["cached_tokens"].sum() == srv.usage_total["cached"]
    assert turns["prompt_tokens_cum"].iloc[-1] == srv.usage_total["prompt"]
    assert all(r["messages"][0]["role"] == "system" and r["messages"][1]["content"] == "How tall is Gannet Rock?" for r in srv.requests)
    assert all(turns["context_tokens"] <= 2600)


def test_system_prompt_and_question(tmp_path):
    _, srv, _ = run_script(tmp_path, [{"content": "x"}], make_cfg())
    msgs = srv.requests[0]["messages"]
    assert msgs[0]["role"] == "system" and "2026-01-01" in msgs[0]["content"] and "ANSWER.md" in msgs[0]["content"]
    assert "network" in msgs[0]["content"] and "dataroom/" in msgs[0]["content"]
    assert msgs[1] == {"role": "user", "content": "How tall is Gannet Rock?"}


def test_run_meta_fields(tmp_path):
    meta, _, run_dir = run_script(tmp_path, SCRIPT, make_cfg(budget=2))
    on_disk = json.loads((run_dir / "run_meta.json").read_text())
    for key in ("run_id", "question", "stop_reason", "turns", "budget", "budget_unit", "force_budget", "tokens", "tool_calls",
                "elapsed_s", "llm_s", "tool_s", "answer_present", "answer_chars", "model", "tools", "config", "schema_version"):
        assert key in on_disk, key
    assert set(on_disk["tokens"]) >= {"prompt", "completion", "cached", "total"}
    assert on_disk["server"]["prefill_tokens_per_s"] == 123.5
    _, calls = tables(run_dir)
    assert on_disk["tool_calls"] == len(calls)


def test_repeated_identical_calls_end_the_turn(tmp_path):
    script = [READ] * 10 + [{"content": "ok"}]
    meta, srv, run_dir = run_script(tmp_path, script, make_cfg(budget=2, max_repeat_calls=3))
    turns, calls = tables(run_dir)
    assert turns["ended_by"].iloc[0] == "repeated_calls"
    assert list(calls["turn"]).count(1) == 3
    assert meta["turns"] == 2


def test_truncated_json_answer_is_salvaged_and_malformed_loops_end_the_turn(tmp_path):
    cfg = make_cfg(budget=2, max_repeat_calls=3)
    cfg.model.protocol = "json"
    script = [{"raw": '{"answer": "It is 38.4 m\\u00e9tres and the survey says'}] + [{"raw": "{oops"}] * 3 + [{"content": "x"}]
    meta, srv, run_dir = run_script(tmp_path, script, cfg)
    snaps = {p.name: p.read_text() for p in (run_dir / "snapshots").iterdir()}
    assert snaps["ANSWER-t1.md"].strip() == "It is 38.4 métres and the survey says"
    turns, calls = tables(run_dir)
    assert list(turns["ended_by"]) == ["no_tool_calls", "malformed_responses"]
    assert calls.empty and list(turns["malformed"]) == [0, 3] and meta["malformed_replies"] == 3


def test_server_reported_overflow_compacts_and_retries(tmp_path):
    big = {"tool_calls": [{"name": "bash", "arguments": {"command": "head -c 2000 /dev/zero | tr '\\0' b"}}]}
    overflow = {"status": 400, "message": "the request exceeds the available context size, try increasing it"}
    script = [big, {"content": "one"}, big, overflow, {"content": "two"}]
    meta, srv, run_dir = run_script(tmp_path, script, make_cfg(budget=2))
    assert meta["stop_reason"] == "budget_spent", meta["stop_detail"]
    assert meta["compactions"] >= 1
    retried = srv.requests[-1]["messages"]
    assert any(m.get("content", "").startswith("[compacted") for m in retried)
    turns, _ = tables(run_dir)
    assert turns["prompt_tokens"].sum() == srv.usage_total["prompt"]  # the refused request billed nothing


def test_pause_file_pauses_the_run(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "PAUSE").touch()
    meta, _, _ = run_script(tmp_path, [READ] * 3, make_cfg(budget=3))
    assert meta["stop_reason"] == "paused"


def test_non_utf8_file_names_never_crash_a_run(tmp_path):
    import os

    src = tmp_path / "src"
    src.mkdir()
    with open(os.path.join(os.fsencode(src), b"caf\xe9.txt"), "wb") as fh:
        fh.write(b"hello \xff world")
    script = [{"tool_calls": [{"name": name, "arguments": args}]} for name, args in
              [("ls", {"path": "dataroom"}), ("grep", {"pattern": "hello", "path": "dataroom"}), ("find", {"pattern": "*.txt"}),
               ("bash", {"command": "ls dataroom; cat dataroom/*"})]] + [{"content": "done"}]
    meta, _, run_dir = run_script(tmp_path, script, make_cfg(), dataroom=src)
    assert meta["stop_reason"] == "budget_spent"
    _, calls = tables(run_dir)
    assert calls["ok"].all() and len(calls) == 4
    assert any("caf\ufffd.txt" in e["message"].get("content", "") for e in trace(run_dir) if e["type"] == "message")


def test_dropped_connection_is_retried(tmp_path):
    meta, srv, _ = run_script(tmp_path, [{"drop": True}, {"content": "recovered"}], make_cfg(budget=1))
    assert meta["stop_reason"] == "budget_spent" and meta["answer"].strip() == "recovered"
    assert len(srv.requests) == 2


def test_system_prompt_offers_bash_only_when_it_is_enabled(tmp_path):
    cfg = make_cfg(budget=1)
    cfg.tools = "grep_only"
    _, srv, _ = run_script(tmp_path, [{"content": "x"}], cfg, name="g")
    system = srv.requests[0]["messages"][0]["content"]
    assert "bash" not in system and "Sources:" in system
    _, srv, _ = run_script(tmp_path, [{"content": "x"}], make_cfg(budget=1), name="n")
    assert "bash runs in your working directory" in srv.requests[0]["messages"][0]["content"]


@pytest.mark.parametrize("protocol", ["native", "json"])
def test_tool_data_is_in_the_trace_and_never_sent(tmp_path, monkeypatch, protocol):
    from searchbox.tools import ToolResult, builtins

    monkeypatch.setattr(builtins, "ls", lambda ctx, path=".": ToolResult("listing for the model", {"entries": ["gold-data-7"]}))
    cfg = make_cfg(budget=1)
    cfg.model.protocol = protocol
    meta, srv, run_dir = run_script(tmp_path, [{"tool_calls": [{"name": "ls", "arguments": {}}]}, {"content": "x"}], cfg)
    tool_msgs = [e["message"] for e in trace(run_dir) if e["type"] == "message" and e["message"]["role"] == "tool"]
    assert tool_msgs[0]["data"] == {"entries": ["gold-data-7"]} and tool_msgs[0]["content"] == "listing for the model"
    assert "listing for the model" in json.dumps(srv.requests[1])
    assert all("gold-data-7" not in json.dumps(r) and '"data"' not in json.dumps(r["messages"]) for r in srv.requests)


# ---- compaction: down to a low-water mark, so that the prompt cache it breaks is paid rarely -----------------------
# SmolLM2 under tools=none repeats one short bash call (results/benchmarks/main_command_loops.md): compacting to just
# under compact_at replaced its short outputs with notes as long, saved ~6% and broke the server's cache from the
# third message, so the next call prefilled 3,793 tokens again (30 s of a 4-minute command) and compacted again 9
# calls later. Compacting down to compact_to of the window pays that once.
SHORT = {"tool_calls": [{"name": "bash", "arguments": {"command": "head -c 120 /dev/zero | tr '\\0' s"}}]}  # a note saves little


def _compactions(run_dir) -> list[dict]:
    return [e for e in trace(run_dir) if e.get("type") == "compaction"]


def _refilled(srv) -> int:
    """Prompt tokens the server had to prefill again (not served from its cache) over the run."""
    return sum(r["usage"]["prompt_tokens"] - r["usage"]["prompt_tokens_details"]["cached_tokens"] for r in srv.responses)


@pytest.mark.parametrize("compact_to", [0.5, 0.4])
def test_a_compaction_goes_down_to_compact_to_of_the_window(tmp_path, compact_to):
    cfg = make_cfg(budget=12, max_repeat_calls=0, compact_to=compact_to)
    cfg.model.max_tokens = 100
    meta, srv, run_dir = run_script(tmp_path, ([SHORT] * 3 + [{"content": "turn"}]) * 12, cfg, server_kw={"n_ctx": 3000})
    assert meta["stop_reason"] == "budget_spent", meta["stop_detail"]
    events = _compactions(run_dir)
    assert events and all(e["estimated_after"] <= int(3000 * compact_to) - 100 for e in events)
    assert all(e["estimated_before"] > e["target"] for e in events)  # nothing compacts before compact_at is passed


def test_compacting_to_a_low_water_mark_compacts_and_prefills_less_than_just_under_compact_at(tmp_path):
    script = ([SHORT] * 3 + [{"content": "turn"}]) * 12
    runs = {}
    for compact_to in (None, 0.5):
        cfg = make_cfg(budget=12, max_repeat_calls=0, compact_to=compact_to)
        cfg.model.max_tokens = 100
        meta, srv, run_dir = run_script(tmp_path, script, cfg, name=f"to-{compact_to}", server_kw={"n_ctx": 3000})
        assert meta["stop_reason"] == "budget_spent", meta["stop_detail"]
        runs[compact_to] = (len(_compactions(run_dir)), _refilled(srv), _compactions(run_dir))
    (old_n, old_refill, old_events), (new_n, new_refill, _) = runs[None], runs[0.5]
    # null is the loop as it was: each compaction stops at the first stage that gets under compact_at
    assert all(e["estimated_after"] <= e["target"] for e in old_events)
    assert new_n < old_n and new_refill < old_refill, runs
