"""harness=claude-code through the real llama-server and the bundled SmolLM2: a forced two-turn run (marked e2e)."""

from __future__ import annotations

import json

import pytest

from searchbox.harness.claudecode import install
from searchbox.model import llama
from searchbox.run.runner import execute
from searchbox.tools.sandbox import bwrap_works
from tests.conftest import make_cfg, tables, trace


@pytest.mark.e2e
def test_claude_code_with_the_bundled_model_forced(tmp_path, real_home):
    if llama.find_server() is None or llama.find_model() is None:
        pytest.skip("embedded default not installed: run `python -m searchbox setup`")
    if install.find() is None:
        pytest.skip("Claude Code not installed: run `python -m searchbox setup`")
    if not bwrap_works():
        pytest.skip("bubblewrap unavailable: Claude Code runs in the box")
    cfg = make_cfg(kind="claude-code", budget=2)
    cfg.tools = "high"
    cfg.retrieval.retriever = "bm25"
    cfg.model.max_tokens = 128
    run_dir = tmp_path / "run"
    with llama.LlamaServer.from_config(cfg.model) as server:
        meta = execute(cfg, "How tall is the Gannet Rock lighthouse?", None, run_dir, server.url)
    assert meta["stop_reason"] == "budget_spent" and meta["turns"] == 2 and meta["continues_sent"] == 1, meta["stop_detail"]
    assert meta["tokens"]["estimated_calls"] == 0  # llama-server billed every call
    h = meta["harness"]
    assert h["usage_check"]["agree"] and h["first_prompt_tokens"] > 1000 and h["refused_paths"] == [] and h["channel_strangers"] == 0
    assert h["server_renders_tools"] is False  # SmolLM2's template renders no tools (the record says so)
    turns, _ = tables(run_dir)
    assert turns["prompt_tokens"].sum() == meta["tokens"]["prompt"] and list(turns["turn"]) == [1, 2]
    system = next(e["message"]["content"] for e in trace(run_dir) if e["type"] == "message" and e["message"]["role"] == "system")
    assert "Claude Code" in system and "ANSWER.md" in system
    print(json.dumps({k: meta[k] for k in ("turns", "llm_calls", "tool_calls", "tokens", "answer_source")}))
