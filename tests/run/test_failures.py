"""Failure semantics: backend outages stop the run as tool_error; an unfittable context is a counted result."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pandas as pd

from searchbox.harness.agent import INFRA_STOPS
from tests.conftest import make_cfg, run_script, tables, trace
from tests.fakes.scripted_server import ScriptedServer
from tests.fakes.commands import SWEEP

ROOT = Path(__file__).resolve().parents[2]
SEARCH = {"tool_calls": [{"name": "search_dataroom", "arguments": {"query": "lighthouse height"}}]}


def _dead_embedding_api(cfg):
    cfg.tools = "high"
    cfg.retrieval.embedder = "api"
    cfg.retrieval.api_url = "http://127.0.0.1:9/v1"  # nothing listens there
    cfg.retrieval.cache = False
    return cfg


def test_dead_embedding_backend_stops_the_run_as_tool_error(tmp_path):
    meta, srv, run_dir = run_script(tmp_path, [SEARCH, {"content": "38.4 m"}], _dead_embedding_api(make_cfg(budget=2)))
    assert meta["stop_reason"] == "tool_error" and "embedding" in meta["stop_detail"].lower()
    assert "tool_error" in INFRA_STOPS
    turns, calls = tables(run_dir)
    assert list(calls["tool"]) == ["search_dataroom"] and not calls["ok"].iloc[0]
    assert len(srv.requests) == 1  # the model never saw the outage as a tool result
    assert not any(e.get("message", {}).get("role") == "tool" for e in trace(run_dir) if e["type"] == "message")


def test_model_argument_errors_stay_visible_to_the_model(tmp_path):
    script = [{"tool_calls": [{"name": "read", "arguments": {"path": "dataroom/nope.md"}}]},
              {"tool_calls": [{"name": "search_dataroom", "arguments": {"query": "x", "paths": ["no/such/folder"]}}]},
              {"content": "done"}]
    cfg = make_cfg(budget=1)
    cfg.tools = "high"
    meta, srv, run_dir = run_script(tmp_path, script, cfg)
    assert meta["stop_reason"] == "budget_spent"
    _, calls = tables(run_dir)
    assert list(calls["ok"]) == [False, False] and meta["tool_errors"] == 2
    tool_msgs = [m for m in srv.requests[-1]["messages"] if m["role"] == "tool"]
    assert "no such file" in tool_msgs[0]["content"] and "no file or folder" in tool_msgs[1]["content"]


def test_unfittable_context_is_a_result_not_an_outage(tmp_path):
    big = {"tool_calls": [{"name": "read", "arguments": {"path": "dataroom/reports/gannet-rock-survey.md"}}]}
    cfg = make_cfg(budget=3)
    cfg.model.max_tokens = 64
    meta, _, run_dir = run_script(tmp_path, [big] * 6, cfg, server_kw={"n_ctx": 700})
    assert meta["stop_reason"] == "context_exhausted" and "context_exhausted" not in INFRA_STOPS
    turns, _ = tables(run_dir)
    assert len(turns) >= 1 and meta["turns"] == len(turns)


def _sweep(args, url, root):
    env = {**os.environ, "LLAMA_URL": url, "HYDRA_FULL_ERROR": "1"}
    cmd = [*SWEEP, *args, f"sweep.root={root}", "harness.today=2026-01-01", "model.retries=0"]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_sweep_with_broken_embedder_and_small_context(tmp_path):
    """High-tier runs on a dead embedding API are not results (redone later, listed at the end, exit 3); context exhaustion is one."""
    # tools=high runs first (two questions: one search each), then tools=none reads until the context is full.
    flood = {"tool_calls": [{"name": "bash", "arguments": {"command": "head -c 8000 /dev/zero | tr '\\0' b"}}]}
    script = [SEARCH, SEARCH] + [flood] * 12
    with ScriptedServer(script, n_ctx=1800) as srv:
        proc = _sweep(["tools=high,none", "budget=2", "questions.limit=2", "backend.embedder=api",
                       "backend.api_url=http://127.0.0.1:9/v1", "backend.cache=false", "model.max_tokens=64"], srv.url, tmp_path)
    assert proc.returncode == 3, proc.stderr[-3000:]  # the sweep is incomplete, and says which questions and why
    listed = [line for line in proc.stderr.splitlines() if "run " in line and "tool_error" in line]
    assert "incomplete: 2 run(s) did not finish" in proc.stderr and len(listed) == 2, proc.stderr[-3000:]
    assert {"nw01", "nw02"} == {line.split()[1] for line in listed} and all("tools=high" in line for line in listed)
    assert "Traceback" not in proc.stderr
    runs = pd.read_parquet(tmp_path / "default" / "runs.parquet")
    assert set(runs["tools"]) == {"none"}  # the tool_error runs are not in the table: a relaunch redoes them
    assert list(runs["stop_reason"]) == ["context_exhausted"] * 2
    unfinished = [p for p in (tmp_path / "default" / "runs").iterdir() if not (p / "DONE").exists()]
    assert all(p.name.startswith(".tmp-") for p in unfinished)
