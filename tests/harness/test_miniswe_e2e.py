"""harness=mini-swe-agent through the real llama-server and the bundled SmolLM2: a forced run, resumed once (marked e2e)."""

from __future__ import annotations

import json

import pytest

from searchbox.model import llama
from searchbox.run.runner import execute, resume
from searchbox.tools.sandbox import bwrap_works
from tests.conftest import make_cfg, tables, trace


@pytest.mark.e2e
def test_mini_swe_agent_with_the_bundled_model_forced_then_resumed(tmp_path, real_home):
    if llama.find_server() is None or llama.find_model() is None:
        pytest.skip("embedded default not installed: run `python -m searchbox setup`")
    if not bwrap_works():
        pytest.skip("bubblewrap unavailable: its commands run in the box")
    cfg = make_cfg(kind="mini-swe-agent", budget=2, max_steps_per_turn=4)
    cfg.model.max_tokens = 128
    run_dir = tmp_path / "run"
    with llama.LlamaServer.from_config(cfg.model) as server:
        meta = execute(cfg, "How tall is the Gannet Rock lighthouse?", None, run_dir, server.url)
        assert meta["stop_reason"] == "budget_spent" and meta["turns"] == 2 and meta["continues_sent"] == 1, meta["stop_detail"]
        assert meta["served"]["slot_start"] == "erased" and meta["tokens"]["estimated_calls"] == 0  # llama-server billed every call
        h = meta["harness"]
        assert h["kind"] == "mini-swe-agent" and h["first_prompt_tokens"] > 500 and h["context_window"] == cfg.model.ctx_size
        turns, calls = tables(run_dir)
        assert turns["prompt_tokens"].sum() == meta["tokens"]["prompt"] and list(turns["turn"]) == [1, 2]
        assert turns["llm_calls"].sum() == meta["llm_calls"] and len(calls) == meta["tool_calls"]
        assert set(turns["ended_by"]) <= {"submitted", "max_steps", "malformed_responses"}
        system = next(e["message"]["content"] for e in trace(run_dir) if e["type"] == "message" and e["message"]["role"] == "system")
        assert "mswea_bash_command" in system and "ANSWER.md" in system
        again = resume(run_dir, server.url, budget=3)
    assert again["stop_reason"] == "budget_spent" and again["turns"] == 3 and again["resumes"] == 1, again["stop_detail"]
    turns, _ = tables(run_dir)
    assert list(turns["turn"]) == [1, 2, 3] and turns["prompt_tokens"].sum() == again["tokens"]["prompt"]
    print(json.dumps({k: again[k] for k in ("turns", "llm_calls", "tool_calls", "malformed_replies", "tokens", "answer_source")}))
    print(json.dumps(list(turns["ended_by"])))
