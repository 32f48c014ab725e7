"""harness=claude-code keeps the native loop's guards: the step limit, the token budget, a failing endpoint, a
conversation the server cannot hold, a bad tool call. Claude Code itself runs against the scripted server; skipped
when it is not installed."""

from __future__ import annotations

from searchbox.run.runner import execute
from tests.conftest import tables, trace
from tests.fakes.scripted_server import ScriptedServer
from tests.harness.test_claudecode import QUESTION, cc, cfg_for  # noqa: F401 (the fixture)


def test_the_step_limit_cuts_the_turn_and_the_token_budget_stops_the_run(tmp_path, cc):
    cfg = cfg_for("claude-code", budget=9000, budget_unit="tokens", max_steps_per_turn=2)
    script = [{"tool_calls": [{"name": "ls", "arguments": {"path": "dataroom"}}]}] * 12
    with ScriptedServer(script) as srv:
        meta = execute(cfg, QUESTION, None, tmp_path / "run", srv.url)
    assert meta["stop_reason"] == "token_budget_spent", meta["stop_detail"]
    turns, calls = tables(tmp_path / "run")
    assert turns.iloc[0]["ended_by"] == "max_steps" and meta["tokens"]["total"] >= 9000 and len(turns) >= 2
    steps = [e["step"] for e in trace(tmp_path / "run") if e["type"] == "message" and e.get("purpose") == "agent" and e["turn"] == 1]
    assert steps == [1, 2]  # the third call of the turn was refused (409): Claude Code ended its turn, budget forcing went on
    assert meta["llm_calls"] == len(srv.requests) and meta["tokens"]["prompt"] == srv.usage_total["prompt"]
    assert meta["harness"]["withheld_answers"] == 1  # the answer that spent the budget never reached Claude Code
    assert set(calls["tool"]) == {"ls"} and calls["ok"].all()


def test_a_failing_endpoint_stops_the_run_as_model_error_retried_by_the_client_only(tmp_path, cc):
    cfg = cfg_for("claude-code", budget=2)
    with ScriptedServer([{"status": 503, "message": "boom"}] * 4) as srv:
        meta = execute(cfg, QUESTION, None, tmp_path / "run", srv.url)
    assert meta["stop_reason"] == "model_error" and "503" in meta["stop_detail"], meta["stop_detail"]
    assert len(srv.requests) == cfg.model.retries + 1  # the client's retries, not Claude Code's as well
    turns, _ = tables(tmp_path / "run")
    assert meta["status"] == "complete" and list(turns["ended_by"]) == ["stop"]
    failed = [e for e in trace(tmp_path / "run") if e.get("type") == "request_failed"]
    assert len(failed) == cfg.model.retries + 1 == meta["failed_requests"]


def test_a_conversation_the_server_cannot_hold_is_context_exhausted(tmp_path, cc):
    cfg = cfg_for("claude-code", budget=3)
    with ScriptedServer([], n_ctx=600) as srv:  # Claude Code's system prompt alone is longer
        meta = execute(cfg, QUESTION, None, tmp_path / "run", srv.url)
    assert meta["stop_reason"] == "context_exhausted" and meta["turns"] == 1, (meta["stop_reason"], meta["stop_detail"])


def test_arguments_that_fail_the_schema_are_a_malformed_row_and_work_is_the_runs(tmp_path, cc):
    cfg = cfg_for("claude-code", budget=1)
    script = [{"tool_calls": [{"name": "write", "arguments": {"path": "/work/notes/a.md", "content": "38.4 m"}}]},
              {"tool_calls": [{"name": "bash", "arguments": {"command": "pwd; cat notes/a.md; echo; echo $HOME"}}]},
              {"tool_calls": [{"name": "read", "arguments": {"nopath": 3}}]},
              {"content": "done"}]
    run_dir = tmp_path / "run"
    with ScriptedServer(script) as srv:
        meta = execute(cfg, QUESTION, None, run_dir, srv.url)
    assert meta["stop_reason"] == "budget_spent", meta["stop_detail"]
    assert (run_dir / "work" / "notes" / "a.md").read_text() == "38.4 m"
    _, calls = tables(run_dir)
    assert list(calls["tool"]) == ["write", "bash", "read"] and list(calls["malformed"]) == [False, False, True]
    assert list(calls["ok"]) == [True, True, False] and list(calls["step"]) == [1, 2, 3]
    results = {m["name"]: m["content"] for m in (e["message"] for e in trace(run_dir) if e["type"] == "message") if m["role"] == "tool"}
    assert results["bash"].splitlines()[:3] == ["/work", "38.4 m", "/work"]


def test_a_turn_past_its_deadline_is_interrupted_and_budget_forcing_goes_on(tmp_path, cc):
    cfg = cfg_for("claude-code", budget=2, turn_ceiling_s=4, bash_timeout_s=8)
    script = [{"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 7; echo slept"}}]}, {"content": "after the cut"},
              {"content": "38.4 metres"}]
    with ScriptedServer(script) as srv:
        meta = execute(cfg, QUESTION, None, tmp_path / "run", srv.url)
    assert meta["stop_reason"] == "budget_spent" and meta["turns"] == 2, meta["stop_detail"]
    turns, calls = tables(tmp_path / "run")
    assert list(turns["ended_by"]) == ["turn_ceiling", "idle"] and list(calls["tool"]) == ["bash"]
    # The command Claude Code gave up on ran to its end in searchbox: its row is what ran, in the turn that asked for it.
    row = calls.iloc[0]
    assert bool(row["ok"]) and not bool(row["malformed"]) and row["turn"] == 1 and row["duration_ms"] >= 6500
    assert any(e["type"] == "claude_code_result" and e["turn"] == 1 for e in trace(tmp_path / "run"))  # it went idle when told
    assert meta["llm_calls"] == len(srv.requests)


def test_a_pause_cuts_the_turn_and_the_run_resumes_in_the_same_session(tmp_path, cc):
    from searchbox.run.runner import resume

    cfg = cfg_for("claude-code", budget=2)
    run_dir = tmp_path / "run"
    script = [{"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 2; echo slow"}}]}, {"content": "cut"}]
    with ScriptedServer(script) as srv:
        meta = execute(cfg, QUESTION, None, run_dir, srv.url, should_pause=lambda: len(srv.requests) >= 1)
    assert meta["stop_reason"] == "paused" and meta["turns"] == 1, meta["stop_detail"]
    turns, calls = tables(run_dir)
    # the interrupt may come before Claude Code calls the tool (then nothing ran and there is no row) or after (then it
    # ran to its end in searchbox and is the turn's row): never a row for a call that did not run
    assert list(turns["ended_by"]) == ["paused"] and list(calls["tool"]) in ([], ["bash"]) and calls["ok"].all()
    assert (run_dir / "claude-code" / "checkpoint-session.jsonl").is_file()
    with ScriptedServer([{"content": "38.4 metres."}]) as srv2:
        again = resume(run_dir, srv2.url)
    assert again["stop_reason"] == "budget_spent" and again["turns"] == 2 and again["resumes"] == 1, again["stop_detail"]
    users = [m["content"] for m in srv2.requests[0]["messages"] if m["role"] == "user"]
    # its session as Claude Code keeps a cut turn: its own note of the interrupt, then the next turn's Continue.
    assert users[0] == QUESTION and users[-1] == "Continue." and again["answer"].strip() == "38.4 metres."
    assert all(u.startswith("[Request interrupted by user") for u in users[1:-1])
