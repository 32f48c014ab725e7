"""harness=claude-code against the scripted server: Claude Code itself runs (the pinned install, in the run's box);
the scripted server stands in for the model. Claude Code speaks Anthropic's Messages API to the channel, which
translates each request to the plain OpenAI chat request the scripted server answers, as for the native loop; so one
script drives both, and the rows, tokens and answer are compared. Skipped with the reason when Claude Code is not
installed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchbox import paths
from searchbox.grading.evidence import tool_outputs
from searchbox.harness.claudecode import install
from searchbox.run.runner import execute
from searchbox.tools import select
from searchbox.tools.sandbox import bwrap_works
from tests.conftest import REAL_HOME, make_cfg, tables, trace
from tests.fakes.scripted_server import ScriptedServer

REAL_CC = install.PIN.install_dir(Path(REAL_HOME) if REAL_HOME else paths.home())  # read before the home is isolated
QUESTION = "How tall is Gannet Rock?"


@pytest.fixture
def cc(isolated_home):
    """The real Claude Code install, seen from the test's isolated SEARCHBOX_HOME."""
    if not (REAL_CC / install.PIN.__class__.__module__ and REAL_CC / ".searchbox-installed").is_file():
        pytest.skip(f"Claude Code is not installed at {REAL_CC}: run `python -m searchbox setup`")
    if not bwrap_works():
        pytest.skip("bubblewrap unavailable (apt-get install bubblewrap): Claude Code runs in the box")
    target = install.install_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(REAL_CC.resolve())
    return install.require()


def cc_cfg(kind: str = "claude-code", **harness):
    cfg = make_cfg(kind=kind, **harness)
    cfg.retrieval.retriever = "bm25"
    return cfg


def tool_names(request: dict) -> list[str]:
    return sorted(t["function"]["name"] for t in request.get("tools") or [])


SCRIPT = [
    {"tool_calls": [{"name": "bash", "arguments": {"command": "ls dataroom | head -3; grep -ril gannet dataroom | head -2"}}]},
    {"tool_calls": [{"name": "search_dataroom", "arguments": {"query": "Gannet Rock height"}}]},
    {"content": "Gannet Rock is 38.4 metres tall."},
    {"content": "It is 38.4 metres tall."},
]


def test_claude_code_runs_two_turns_accounted_at_the_channel(tmp_path, cc):
    cfg = cc_cfg(budget=2)
    cfg.tools = "high"
    run_dir = tmp_path / "run"
    with ScriptedServer(list(SCRIPT)) as srv:
        meta = execute(cfg, QUESTION, None, run_dir, srv.url)
    print(json.dumps(meta, default=str)[:3000])
    print((run_dir / "claude-code" / "stderr.log").read_text() if (run_dir / "claude-code" / "stderr.log").exists() else "")
    assert meta["stop_reason"] == "budget_spent" and meta["turns"] == 2 and meta["continues_sent"] == 1, meta["stop_detail"]
