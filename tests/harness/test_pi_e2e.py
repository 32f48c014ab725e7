"""harness=pi through the real llama-server and the bundled SmolLM2: a forced run, resumed once (marked e2e)."""

from __future__ import annotations

import json

import pytest

from searchbox.model import llama
from searchbox.harness.pi import install
from searchbox.run.runner import execute, resume
from tests.conftest import tables, trace
from tests.harness.agent_e2e import QUESTION, forced_agent_cfg


@pytest.mark.e2e
def test_pi_with_the_bundled_model_forced_then_resumed(tmp_path, real_home):
    cfg = forced_agent_cfg("pi", install.find_pi(), "Pi")
    run_dir = tmp_path / "run"
    with llama.LlamaServer.from_config(cfg.model) as server:
        meta = execute(cfg, QUESTION, None, run_dir, server.url)
        assert meta["stop_reason"] == "budget_spent" and meta["turns"] == 2 and meta["continues_sent"] == 1, meta["stop_detail"]
        assert meta["served"]["slot_start"] == "erased" and meta["tokens"]["estimated_calls"] == 0  # llama-server billed every call
        h = meta["harness"]
        assert h["usage_agree"] and h["first_prompt_tokens"] > 500 and h["context_window"] == cfg.model.ctx_size
        # SmolLM2's chat template renders no tools: the record says so (the native loop's auto protocol falls back to JSON)
        assert h["server_renders_tools"] is False
        turns, _ = tables(run_dir)
        assert turns["prompt_tokens"].sum() == meta["tokens"]["prompt"] and list(turns["turn"]) == [1, 2]
        system = next(e["message"]["content"] for e in trace(run_dir) if e["type"] == "message" and e["message"]["role"] == "system")
        assert "ANSWER.md" in system and "search_dataroom" in system
        assert meta["answer_source"] in ("model", "backstop", "none")
        again = resume(run_dir, server.url, budget=3)
    assert again["stop_reason"] == "budget_spent" and again["turns"] == 3 and again["resumes"] == 1, again["stop_detail"]
    assert again["tokens"]["prompt"] > meta["tokens"]["prompt"] and again["harness"]["usage_agree"]
    turns, _ = tables(run_dir)
    assert list(turns["turn"]) == [1, 2, 3] and turns["prompt_tokens"].sum() == again["tokens"]["prompt"]
    print(json.dumps({k: again[k] for k in ("turns", "llm_calls", "tool_calls", "tokens", "compactions", "answer_source")}))
