"""Claude Code behind its wall run by a normal user (as root the box drops to uid 65534 itself; a normal user's box is
made in a user namespace), and unboxed (harness.sandbox=none, the explicit opt-out)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from searchbox.run.runner import execute
from tests.conftest import trace
from tests.fakes.scripted_server import ScriptedServer
from tests.harness.test_claudecode import QUESTION, cc, cfg_for  # noqa: F401 (cc: the fixture)
from tests.harness.test_pi_wall import _as_user_argv

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"),
                    reason="needs root (to run the tests as another user), unshare and setpriv")
def test_the_claude_code_wall_holds_with_the_harness_run_as_a_normal_user(tmp_path, cc):
    out = subprocess.run(_as_user_argv([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "hostile or killed or same_rows",
                                        "tests/harness/test_claudecode.py"]), cwd=ROOT, capture_output=True, text=True, timeout=900)
    tail = (out.stdout + out.stderr)[-3000:]
    assert out.returncode == 0 and "3 passed" in tail and "skipped" not in tail.splitlines()[-1], tail


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"),
                    reason="needs root (to run the battery as another user), unshare and setpriv")
def test_the_claude_code_attempts_of_the_hostile_battery_hold_run_as_a_normal_user(tmp_path, cc):
    out = subprocess.run(_as_user_argv([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "cc_",
                                        "tests/test_hostile.py"]), cwd=ROOT, capture_output=True, text=True, timeout=900)
    tail = (out.stdout + out.stderr)[-3000:]
    assert out.returncode == 0 and "11 passed" in tail and "skipped" not in tail.splitlines()[-1], tail


def test_claude_code_unboxed_serves_its_own_process_tree_only(tmp_path, cc):
    cfg = cfg_for("claude-code", budget=1, sandbox="none")
    run_dir = tmp_path / "run"
    host = Path.home() / ".claude"
    before = sorted(p.name for p in host.iterdir()) if host.is_dir() else None
    with ScriptedServer([{"tool_calls": [{"name": "bash", "arguments": {"command": "pwd"}}]}, {"content": "done"}]) as srv:
        meta = execute(cfg, QUESTION, None, run_dir, srv.url)
    assert meta["stop_reason"] == "budget_spent" and meta["sandbox"] == "none", meta["stop_detail"]
    assert meta["harness"]["channel_strangers"] == 0 and meta["llm_calls"] == len(srv.requests) == 2
    system = next(e["message"]["content"] for e in trace(run_dir) if e["type"] == "message" and e["message"]["role"] == "system")
    assert f"Primary working directory: {(run_dir / 'work').resolve()}" in system
    # Its config folder and session are the run's even unboxed; the host's ~/.claude is untouched.
    assert list((run_dir / "claude-code" / "box" / "config" / "projects").glob("*/*.jsonl"))
    assert (sorted(p.name for p in host.iterdir()) if host.is_dir() else None) == before


def test_claude_code_is_a_sweep_axis(tmp_path, cc):
    """`python -m searchbox.sweep -m harness=native,claude-code tools=high,none`: one grid, the same tool sets."""
    import pandas as pd

    from tests.fakes.commands import SWEEP

    with ScriptedServer([]) as srv:
        env = {**os.environ, "LLAMA_URL": srv.url, "HYDRA_FULL_ERROR": "1"}
        cmd = [*SWEEP, "harness=native,claude-code", "tools=high,none", "budget=1", "questions.limit=1", f"sweep.root={tmp_path}",
               "harness.today=2026-01-01", "model.retries=0", "retriever=bm25"]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = pd.read_parquet(tmp_path / "default" / "runs.parquet")
    assert sorted(zip(runs["harness"], runs["tools"])) == [("claude-code", "high"), ("claude-code", "none"), ("native", "high"),
                                                           ("native", "none")]
    assert runs["run_id"].is_unique and set(runs["stop_reason"]) == {"budget_spent"}
    for tier in ("high", "none"):
        assert runs.loc[runs["tools"] == tier, "tools_enabled"].nunique() == 1
    rows = runs[runs["harness"] == "claude-code"]
    assert (rows["harness_kind"] == "claude-code").all() and rows["harness_usage_agree"].all()
    assert (rows["harness_first_prompt_tokens"] > 0).all()
