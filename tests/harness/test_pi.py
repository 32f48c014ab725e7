"""harness=pi against the scripted server: the reference protocol, the channel's accounting, the same tools, resume.

Pi itself runs (the pinned install, in the run's box); the scripted server stands in for the model. Pi streams
from the channel (server-sent events the harness renders); the channel calls the model with plain requests, so
the scripted server answers as it does for the native loop. Skipped with the reason when Pi is not installed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from searchbox import paths
from searchbox.grading.evidence import tool_outputs
from searchbox.harness.pi import install
from searchbox.run.runner import execute, resume
from searchbox.tools import select
from searchbox.tools.sandbox import bwrap_works
from tests.conftest import REAL_HOME, make_cfg, tables, trace
from tests.fakes.scripted_server import ScriptedServer

REAL_PI = install.install_dir(Path(REAL_HOME) if REAL_HOME else paths.home())  # read before the home is isolated
QUESTION = "How tall is Gannet Rock?"


@pytest.fixture
def pi(isolated_home):
    """The real Pi install, seen from the test's isolated SEARCHBOX_HOME."""
    if not (REAL_PI / install.STAMP).is_file():
        pytest.skip(f"Pi is not installed at {REAL_PI}: run `python -m searchbox setup`")
    if not bwrap_works():
        pytest.skip("bubblewrap unavailable (apt-get install bubblewrap): Pi runs in the box")
    target = install.install_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(REAL_PI.resolve())
    return install.require_pi()


class PiServer(ScriptedServer):
    """The scripted server; Pi's compaction calls (no tools) get a fixed summary outside the script."""

    compaction_calls = 0

    def _respond(self, body):
        if not body.get("tools"):
            with self._lock:
                self.compaction_calls += 1
                self.script.insert(0, {"content": "## Goal\nAnswer the question.\n## Progress\nSearched."})
        return super()._respond(body)


def pi_cfg(**harness):
    cfg = make_cfg(kind="pi", **harness)
    cfg.retrieval.retriever = "bm25"  # search_dataroom without loading an embedder
    return cfg


def tool_names(request: dict) -> list[str]:
    return sorted(t["function"]["name"] for t in request.get("tools") or [])


def test_pi_runs_the_reference_protocol_accounted_at_the_channel_and_resumes(tmp_path, pi):
    cfg = pi_cfg(budget=2)
    cfg.tools = "high"
    script = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "ls dataroom | head -3; grep -ril gannet dataroom | head -2"}}]},
        {"tool_calls": [{"name": "search_dataroom", "arguments": {"query": "Gannet Rock height"}}]},
        {"content": "Gannet Rock is 38.4 metres tall."},  # no ANSWER.md written: the backstop's job
        {"content": "It is 38.4 metres tall."},
    ]
    run_dir = tmp_path / "run"
    with PiServer(script) as srv:
        meta = execute(cfg, QUESTION, None, run_dir, srv.url)
    assert meta["stop_reason"] == "budget_spent" and meta["turns"] == 2 and meta["continues_sent"] == 1, meta["stop_detail"]
    agent = [r for r in srv.requests if r.get("tools")]
    # The same tools as the native loop would have: Pi's built-ins for the catalog's, the dataroom tool from the catalog.
    assert all(tool_names(r) == sorted(s.name for s in select("high")) for r in agent)
    assert all("stream" not in r and r["max_tokens"] <= cfg.model.max_tokens and "id_slot" not in r for r in srv.requests)
    # Every call Pi made was billed once and counted once, compaction calls included; the turns add up to the run.
    assert meta["llm_calls"] == len(srv.requests) and meta["tokens"]["prompt"] == srv.usage_total["prompt"]
    turns, calls = tables(run_dir)
    assert list(turns["turn"]) == [1, 2] and turns["prompt_tokens"].sum() == meta["tokens"]["prompt"]
    assert meta["compactions"] == srv.compaction_calls == turns["compactions"].sum() >= 1  # Pi's own, at its threshold, counted
    h = meta["harness"]
    assert h["kind"] == "pi" and h["pi_version"] == install.pinned_version() and h["compaction_calls"] == srv.compaction_calls
    assert h["usage_check"]["agree"] and h["usage_check"]["session"]["answers"] == len(agent)  # Pi's session sums to the forwarder's
    assert h["first_prompt_tokens"] > 1000  # Pi's system prompt and tools, before the question (visible against the window)
    assert (run_dir / "pi" / "session.jsonl").is_file() and (run_dir / "pi" / "checkpoint-session.jsonl").is_file() and h["session_missing"] == []
    # Tool rows as the native loop writes them: bash split by program, the dataroom tool's paths.
    bash = calls[calls["tool"] == "bash"].iloc[0]
    assert list(bash["programs"]) == ["ls", "head", "grep", "head"] and bash["ok"] and bash["step"] == 1 and bash["turn"] == 1
    search = calls[calls["tool"] == "search_dataroom"].iloc[0]
    assert search["ok"] and search["step"] == 2 and len(search["paths"]) > 0
    # The trace in the canonical shape: Pi's system prompt with the task appended and the run's date, tool results
    # under the ids the model gave, the dataroom tool's data beside its text; evidence reads it as for the native loop.
    events = trace(run_dir)
    messages = [e["message"] for e in events if e["type"] == "message"]
    system = next(m["content"] for m in messages if m["role"] == "system")
    assert "operating inside pi" in system and "ANSWER.md" in system and "Current date: 2026-01-01" in system
    assert "Current working directory: /work" in system
    asked = {c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []}
    results = [m for m in messages if m["role"] == "tool"]
    assert {m["tool_call_id"] for m in results} == asked and all(m["name"] in ("bash", "search_dataroom") for m in results)
    assert next(m for m in results if m["name"] == "search_dataroom")["data"]["results"]
    assert [o.tool for o in tool_outputs(run_dir / "trace.jsonl")] == ["bash", "search_dataroom"]
    # The backstop: the model's last own words (not a compaction summary), since it wrote no ANSWER.md.
    assert meta["answer_source"] == "backstop" and meta["answer"].strip() == "It is 38.4 metres tall."
    # Resume: Pi continues its own session, the accounting goes on from the checkpoint.
    with PiServer([{"content": "Final: 38.4 metres."}]) as srv2:
        again = resume(run_dir, srv2.url, budget=3)
    assert again["stop_reason"] == "budget_spent" and again["turns"] == 3 and again["resumes"] == 1
    first = next(r for r in srv2.requests if r.get("tools"))
    said = [m.get("content") for m in first["messages"]]
    assert any(QUESTION in json.dumps(c) for c in said) and sum(json.dumps(c).count("Continue.") for c in said) == 2
    assert again["tokens"]["prompt"] == meta["tokens"]["prompt"] + srv2.usage_total["prompt"]
    turns = pd.read_parquet(run_dir / "turns.parquet")
    assert list(turns["turn"]) == [1, 2, 3] and turns["prompt_tokens"].sum() == again["tokens"]["prompt"]
    assert again["harness"]["usage_check"]["agree"] and again["answer"].strip() == "Final: 38.4 metres."


def test_pi_with_vector_only_and_file_delivery_writes_its_own_answer_and_stops_after_one_turn(tmp_path, pi):
    cfg = pi_cfg(budget=3, force_budget=False, delivery="file")
    cfg.tools = "vector_only"
    script = [
        {"tool_calls": [{"name": "search_dataroom", "arguments": {"query": "Gannet Rock"}}]},
        {"tool_calls": [{"name": "read", "arguments": {"path": "results/1-search_dataroom.txt"}}]},
        {"tool_calls": [{"name": "write", "arguments": {"path": "ANSWER.md", "content": "38.4 metres\n"}}]},
        {"content": "I wrote the answer."},
    ]
    with PiServer(script) as srv:
        meta = execute(cfg, QUESTION, None, tmp_path / "run", srv.url)
    assert meta["stop_reason"] == "first_turn_done" and meta["turns"] == 1 and meta["continues_sent"] == 0
    assert tool_names(next(r for r in srv.requests if r.get("tools"))) == sorted(s.name for s in select("vector_only"))
    _, calls = tables(tmp_path / "run")
    assert list(calls["tool"]) == ["search_dataroom", "read", "write"] and calls["ok"].all()
    assert calls.iloc[0]["delivered"] == "results/1-search_dataroom.txt"
    read = next(e["message"] for e in trace(tmp_path / "run") if e["type"] == "message" and e["message"].get("name") == "read")
    assert "gannet" in read["content"].lower()  # the delivered result reached Pi's box
    assert meta["answer_source"] == "model" and meta["answer"] == "38.4 metres\n"  # never overwritten by the backstop
    assert (tmp_path / "run" / "work" / "results" / "1-search_dataroom.txt").is_file()


def test_pi_keeps_the_guards_step_limit_and_token_budget(tmp_path, pi):
    cfg = pi_cfg(budget=9000, budget_unit="tokens", max_steps_per_turn=2)
    cfg.tools = "none"
    script = [{"tool_calls": [{"name": "ls", "arguments": {"path": "dataroom"}}]}] * 12
    with PiServer(script) as srv:
        meta = execute(cfg, QUESTION, None, tmp_path / "run", srv.url)
    assert meta["stop_reason"] == "token_budget_spent", meta["stop_detail"]
    turns, _ = tables(tmp_path / "run")
    assert turns.iloc[0]["ended_by"] == "max_steps" and meta["tokens"]["total"] >= 9000
    steps = [e["step"] for e in trace(tmp_path / "run") if e["type"] == "message" and e.get("purpose") == "agent" and e["turn"] == 1]
    assert steps == [1, 2]  # the third call of the turn was refused: the turn was cut, budget forcing went on
    assert meta["llm_calls"] == len(srv.requests) and meta["tokens"]["prompt"] == srv.usage_total["prompt"]
    h = meta["harness"]
    assert h["withheld_answers"] == 1 and h["usage_check"]["agree"]  # the answer that spent the budget never reached Pi


def test_pi_tool_rows_are_what_the_harness_ran_and_a_refused_call_is_a_malformed_row(tmp_path, pi):
    """Issue 36: rows came from Pi's own events, which a command could forge. Now every tool (Pi's built-in names
    too) runs in searchbox over the channel; a call Pi refuses before that (a tool the run lacks, arguments that
    fail the schema) is a malformed row taken from the request that shows the model Pi's refusal."""
    cfg = pi_cfg(budget=1)
    cfg.tools = "none"
    script = [{"tool_calls": [{"name": "write", "arguments": {"path": "/work/notes/a.md", "content": "38.4 m"}}]},
              {"tool_calls": [{"name": "bash", "arguments": {"command": "pwd; cat notes/a.md; echo $HOME"}}]},
              {"tool_calls": [{"name": "no_such_tool", "arguments": {"x": 1}}]},
              {"tool_calls": [{"name": "read", "arguments": {"nopath": 3}}]},
              {"content": "done"}]
    run_dir = tmp_path / "run"
    with PiServer(script) as srv:
        meta = execute(cfg, QUESTION, None, run_dir, srv.url)
    assert meta["stop_reason"] == "budget_spent", meta["stop_detail"]
    assert (run_dir / "work" / "notes" / "a.md").read_text() == "38.4 m"  # /work is work/: the harness wrote it on disk
    _, calls = tables(run_dir)
    assert list(calls["tool"]) == ["write", "bash", "no_such_tool", "read"] and list(calls["malformed"]) == [False, False, True, True]
    assert list(calls["ok"]) == [True, True, False, False] and list(calls["step"]) == [1, 2, 3, 4]
    results = {m["name"]: m["content"] for m in (e["message"] for e in trace(run_dir) if e["type"] == "message") if m["role"] == "tool"}
    assert results["bash"].splitlines()[:2] == ["/work", "38.4 m/work"]  # the harness's box, work/ at /work (and HOME)
    assert meta["tool_calls"] == 4 and meta["malformed_calls"] == 2


def test_a_failing_endpoint_stops_a_pi_run_as_model_error(tmp_path, pi):
    cfg = pi_cfg(budget=2)
    with PiServer([{"status": 503, "message": "boom"}] * 4) as srv:  # 503 is retried (a 500 that says why is not)
        meta = execute(cfg, QUESTION, None, tmp_path / "run", srv.url)
    assert meta["stop_reason"] == "model_error" and "503" in meta["stop_detail"]
    assert len(srv.requests) == cfg.model.retries + 1  # the client's retries, not Pi's as well
    turns, _ = tables(tmp_path / "run")
    assert meta["status"] == "complete" and list(turns["ended_by"]) == ["stop"]  # the turn cut short still has its row
    failed = [e for e in trace(tmp_path / "run") if e.get("type") == "request_failed"]  # each failed request in the trace (31.2)
    assert len(failed) == cfg.model.retries + 1 == meta["failed_requests"]
    assert all(e["status"] == 503 and e["seconds"] >= 0 for e in failed)


def test_harness_is_a_sweep_axis(tmp_path, pi):
    """`python -m searchbox.sweep -m harness=native,pi tools=high,none`: one grid, both harnesses, the same tool sets."""
    import os
    import subprocess

    from tests.fakes.commands import SWEEP

    root = Path(__file__).resolve().parents[2]
    with PiServer([]) as srv:
        env = {**os.environ, "LLAMA_URL": srv.url, "HYDRA_FULL_ERROR": "1"}
        cmd = [*SWEEP, "harness=native,pi", "tools=high,none", "budget=1", "questions.limit=1", f"sweep.root={tmp_path}",
               "harness.today=2026-01-01", "model.retries=0", "retriever=bm25"]
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = pd.read_parquet(tmp_path / "default" / "runs.parquet")
    assert sorted(zip(runs["harness"], runs["tools"])) == [("native", "high"), ("native", "none"), ("pi", "high"), ("pi", "none")]
    assert runs["run_id"].is_unique and set(runs["stop_reason"]) == {"budget_spent"}
    for tier in ("high", "none"):  # the same tools under both harnesses
        assert runs.loc[runs["tools"] == tier, "tools_enabled"].nunique() == 1
    pi_rows = runs[runs["harness"] == "pi"]
    assert (pi_rows["harness_kind"] == "pi").all() and pi_rows["harness_usage_agree"].all()
    assert (pi_rows["harness_first_prompt_tokens"] > 0).all()


def test_a_conversation_the_server_cannot_hold_is_context_exhausted_after_pis_own_recovery(tmp_path, pi):
    """The server refuses Pi's request as too long; Pi compacts and retries once (its own recovery, untouched); when
    that fails the run stops as context_exhausted, a result, as the native loop's does."""
    cfg = pi_cfg(budget=3)
    with PiServer([], n_ctx=600) as srv:
        meta = execute(cfg, QUESTION, None, tmp_path / "run", srv.url)
    assert meta["stop_reason"] == "context_exhausted", (meta["stop_reason"], meta["stop_detail"])
    assert meta["harness"]["overflows"] >= 1 and meta["turns"] == 1
    assert any(e["type"] == "compaction" and e["reason"] == "overflow" for e in trace(tmp_path / "run"))


def test_a_tool_still_running_when_the_turn_is_cut_has_its_row_and_time_in_that_turn(tmp_path, pi):
    # The turn's ceiling passes while the model's bash call runs: the turn's row is written once the call is done
    # (CliRun._settle_tools), so the call's row, and its seconds, belong to the turn it ran in, as under Claude Code.
    cfg = pi_cfg(budget=2, turn_ceiling_s=1.5)
    cfg.tools = "none"
    script = [{"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 4; echo slept"}}]},
              {"content": "first"}, {"content": "second"}]
    run_dir = tmp_path / "run"
    with PiServer(script) as srv:
        meta = execute(cfg, QUESTION, None, run_dir, srv.url)
    assert meta["stop_reason"] == "budget_spent", meta["stop_detail"]
    turns, calls = tables(run_dir)
    assert list(calls["turn"]) == [1] and calls["duration_ms"].iloc[0] >= 3500
    first = turns.iloc[0]
    assert first["ended_by"] == "turn_ceiling" and first["tool_calls"] == 1 and first["tool_ms"] >= 3500, turns.to_dict("records")
    assert turns.iloc[1]["tool_calls"] == 0 and turns.iloc[1]["tool_ms"] < 1000
