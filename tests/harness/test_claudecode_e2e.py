"""harness=claude-code through the real llama-server and the bundled SmolLM2: a forced two-turn run (marked e2e)."""

from __future__ import annotations

import json

import pytest

from searchbox.harness.claudecode import install
from searchbox.model import llama
from tests.conftest import tables, trace
from tests.harness.agent_e2e import execute_as_a_sweep_does, forced_agent_cfg


@pytest.mark.e2e
def test_claude_code_with_the_bundled_model_forced(tmp_path, real_home):
    cfg = forced_agent_cfg("claude-code", install.find(), "Claude Code")
    with llama.LlamaServer.from_config(cfg.model) as server:
        meta, run_dir = execute_as_a_sweep_does(cfg, tmp_path, server.url)
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
