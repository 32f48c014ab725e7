"""What every agent harness's end-to-end test starts from: the embedded model, the agent and the box, or a skip saying
which is missing; then the same forced two-turn run config (tools=high over BM25, short replies)."""

from __future__ import annotations

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
