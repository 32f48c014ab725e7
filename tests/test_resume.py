"""Pause and resume continue the same run: same turn rows and token sums as a run straight through."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from searchbox.errors import SearchboxError
from searchbox.run import execute, resume
from tests.conftest import make_cfg, tables, trace
from tests.fakes.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[1]
READ = {"tool_calls": [{"name": "read", "arguments": {"path": "dataroom/reports/gannet-rock-survey.md"}}]}
GREP = {"tool_calls": [{"name": "grep", "arguments": {"pattern": "metres"}}]}
SCRIPT = [READ, {"content": "one"}, GREP, {"content": "two"}, READ, GREP, {"content": "three"}, {"content": "four"}]
SAME = ["turn", "prompt_tokens", "completion_tokens", "cached_tokens", "prompt_tokens_cum", "completion_tokens_cum",
        "cached_tokens_cum", "tool_calls", "llm_calls", "ended_by", "answer_chars"]


def _turns_done(run_dir: Path, n: int):
    def pause() -> bool:
        path = run_dir / "turns.parquet"
        return path.exists() and len(pd.read_parquet(path)) >= n
    return pause


def _straight(tmp_path):
    with ScriptedServer(list(SCRIPT)) as srv:
        meta = execute(make_cfg(budget=4), "How tall?", None, tmp_path / "straight", srv.url)
    return meta, tables(tmp_path / "straight")


def test_paused_after_turn_two_and_resumed_to_four_equals_straight_run(tmp_path):
    straight, (s_turns, s_calls) = _straight(tmp_path)
    run_dir = tmp_path / "paused"
    with ScriptedServer(list(SCRIPT)) as srv:
        paused = execute(make_cfg(budget=4), "How tall?", None, run_dir, srv.url, should_pause=_turns_done(run_dir, 2))
        assert paused["stop_reason"] == "paused" and paused["turns"] == 2
        resumed = resume(run_dir, srv.url, budget=4)
    turns, calls = tables(run_dir)
    assert resumed["stop_reason"] == "budget_spent" and resumed["run_id"] == paused["run_id"] and resumed["resumes"] == 1
    pd.testing.assert_frame_equal(turns[SAME], s_turns[SAME])
    assert list(calls["tool"]) == list(s_calls["tool"])
    assert resumed["tokens"] == straight["tokens"] and resumed["turns"] == straight["turns"] == 4
    assert [e["type"] for e in trace(run_dir)].count("resume") == 1


def test_budget_extension_continues_a_finished_run(tmp_path):
    straight, (s_turns, _) = _straight(tmp_path)
    run_dir = tmp_path / "short"
    with ScriptedServer(list(SCRIPT)) as srv:
        first = execute(make_cfg(budget=2), "How tall?", None, run_dir, srv.url)
        assert first["stop_reason"] == "budget_spent"
        with pytest.raises(SearchboxError, match="budget above 2"):
            resume(run_dir, srv.url)
        resumed = resume(run_dir, srv.url, budget=4)
    turns, _ = tables(run_dir)
    pd.testing.assert_frame_equal(turns[SAME], s_turns[SAME])
    assert resumed["tokens"] == straight["tokens"]


def test_pause_mid_turn_resumes_the_same_turn(tmp_path):
    straight, (s_turns, _) = _straight(tmp_path)
    run_dir = tmp_path / "mid"
    calls_seen = []

    def pause_after_third_call() -> bool:
        path = run_dir / "trace.jsonl"
        n = sum(1 for line in path.read_text().splitlines() if '"role": "tool"' in line) if path.exists() else 0
        calls_seen.append(n)
        return n >= 3  # inside turn 3: after its READ, before its GREP

    with ScriptedServer(list(SCRIPT)) as srv:
        paused = execute(make_cfg(budget=4), "How tall?", None, run_dir, srv.url, should_pause=pause_after_third_call)
        assert paused["stop_reason"] == "paused" and paused["turns"] == 3
        assert len(tables(run_dir)[0]) == 2  # the unfinished turn has no row yet
        resumed = resume(run_dir, srv.url)
    turns, _ = tables(run_dir)
    pd.testing.assert_frame_equal(turns[SAME], s_turns[SAME])
    assert resumed["tokens"] == straight["tokens"]


def test_interrupted_run_resumes_from_its_last_step(tmp_path):
    run_dir = tmp_path / "int"
    state = {"n": 0}

    def interrupt() -> bool:
        state["n"] += 1
        if state["n"] == 4:
            raise KeyboardInterrupt
        return False

    straight, (s_turns, _) = _straight(tmp_path)
    with ScriptedServer(list(SCRIPT)) as srv:
        cut = execute(make_cfg(budget=4), "How tall?", None, run_dir, srv.url, should_pause=interrupt)
        assert cut["stop_reason"] == "interrupted"
        resumed = resume(run_dir, srv.url)
    turns, _ = tables(run_dir)
    pd.testing.assert_frame_equal(turns[SAME], s_turns[SAME])
    assert resumed["stop_reason"] == "budget_spent"


def _cli(*args, url):
    env = {**os.environ, "LLAMA_URL": url}
    return subprocess.run([sys.executable, "-m", "searchbox.run", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_cli_out_must_be_new_unless_resume_or_overwrite(tmp_path):
    out = tmp_path / "out"
    with ScriptedServer([{"content": "a"}, {"content": "b"}, {"content": "c"}]) as srv:
        first = _cli("How tall?", "--out", str(out), "--budget", "1", url=srv.url)
        assert first.returncode == 0, first.stderr
        again = _cli("How tall?", "--out", str(out), url=srv.url)
        assert again.returncode == 2 and again.stderr.count("\n") == 1 and "not empty" in again.stderr
        more = _cli("--resume", str(out), "--budget", "2", url=srv.url)
        assert more.returncode == 0, more.stderr
        assert json.loads((out / "run_meta.json").read_text())["turns"] == 2
        fresh = _cli("How tall?", "--out", str(out), "--overwrite", url=srv.url)
        assert fresh.returncode == 0, fresh.stderr
        assert json.loads((out / "run_meta.json").read_text())["turns"] == 1
