"""harness=codex through the real llama-server and the bundled SmolLM2: a forced run of two turns (marked e2e)."""

from __future__ import annotations

import json

import pytest

from searchbox.harness.codex import install
from searchbox.model import llama
from searchbox.run.runner import execute
from searchbox.tools.sandbox import bwrap_works
from tests.conftest import make_cfg, tables, trace


@pytest.mark.e2e
def test_codex_with_the_bundled_model_forced(tmp_path, real_home):
    if llama.find_server() is None or llama.find_model() is None:
        pytest.skip("embedded default not installed: run `python -m searchbox setup`")
    if install.find_codex() is None:
        pytest.skip("Codex not installed: run `python -m searchbox setup`")
    if not bwrap_works():
        pytest.skip("bubblewrap unavailable: Codex runs in the box")
    cfg = make_cfg(kind="codex", budget=2)
    cfg.tools = "high"
    cfg.retrieval.retriever = "bm25"
    cfg.model.max_tokens = 128
    run_dir = tmp_path / "run"
    with llama.LlamaServer.from_config(cfg.model) as server:
        meta = execute(cfg, "How tall is the Gannet Rock lighthouse?", None, run_dir, server.url)
    assert meta["stop_reason"] == "budget_spent" and meta["turns"] == 2 and meta["continues_sent"] == 1, meta["stop_detail"]
    assert meta["tokens"]["estimated_calls"] == 0  # llama-server billed every call
    h = meta["harness"]
    assert h["exits"] == [0, 0] and h["thread"] and h["context_window"] == cfg.model.ctx_size
    assert h["first_prompt_tokens"] > 1000 and h["server_renders_tools"] is False  # Codex's own prompt; SmolLM2's template
    turns, _ = tables(run_dir)
    assert turns["prompt_tokens"].sum() == meta["tokens"]["prompt"] and list(turns["turn"]) == [1, 2]
    system = next(e["message"]["content"] for e in trace(run_dir) if e["type"] == "message" and e["message"]["role"] == "system")
    assert "ANSWER.md" in system and "Codex" in system
    print(json.dumps({k: meta[k] for k in ("turns", "llm_calls", "tool_calls", "tokens", "compactions", "answer_source")}))
