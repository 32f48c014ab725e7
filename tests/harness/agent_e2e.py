"""What every agent harness's end-to-end test starts from: the embedded model, the agent and the box, or a skip saying
which is missing; then the same forced two-turn run config (tools=high over BM25, short replies)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from searchbox.model import llama
from searchbox.tools.sandbox import bwrap_works
from tests.conftest import make_cfg

QUESTION = "How tall is the Gannet Rock lighthouse?"


def forced_agent_cfg(kind: str, installed: Any, agent: str):
    """The run config of a forced two-turn e2e run of harness `kind`; `installed`: the agent's install lookup (None
    when it is missing), `agent`: its name in the skip."""
    if llama.find_server() is None or llama.find_model() is None:
        pytest.skip("embedded default not installed: run `python -m searchbox setup`")
    if installed is None:
        pytest.skip(f"{agent} not installed: run `python -m searchbox setup`")
    if not bwrap_works():
        pytest.skip(f"bubblewrap unavailable: {agent} runs in the box")
    cfg = make_cfg(kind=kind, budget=2)
    cfg.tools = "high"
    cfg.retrieval.retriever = "bm25"
    cfg.model.max_tokens = 128
    return cfg


def execute_as_a_sweep_does(cfg, folder, url: str) -> tuple[dict, Path]:
    """One run as a sweep runs it: an infrastructure stop (harness.base.INFRA_STOPS: the agent process died under it)
    is redone once in a fresh folder, as a relaunch would. The first attempt's record must still name its cause.
    Claude Code 2.1.332 and Codex 0.171.0 have each been seen to die mid-run under load (Claude Code by SIGABRT just
    after a reply, about 1 run in 50), which the harness records as tool_error; this test is about the rest."""
    from searchbox.harness.base import INFRA_STOPS
    from searchbox.run.runner import execute

    meta = execute(cfg, QUESTION, None, folder / "run", url)
    if meta["stop_reason"] not in INFRA_STOPS:
        return meta, folder / "run"
    assert meta["stop_detail"], "an infrastructure stop without its cause"
    print(f"first attempt: {meta['stop_reason']}: {meta['stop_detail']} (redone once, as a sweep's relaunch would)")
    return execute(cfg, QUESTION, None, folder / "again", url), folder / "again"
