"""--resume of a run whose state.json or run_meta.json is damaged: one line naming the problem, never a traceback, and
nothing of the run written before the check (issue 36 part 3)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from searchbox.errors import SearchboxError
from searchbox.run.runner import execute, resume
from tests.conftest import make_cfg
from tests.fakes.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = [{"tool_calls": [{"name": "grep", "arguments": {"pattern": "metres"}}]}, {"content": "one"}, {"content": "two"}]


@pytest.fixture(scope="module")
def paused_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("paused") / "run"

    def pause() -> bool:
        path = run_dir / "turns.parquet"
        return path.exists() and len(pd.read_parquet(path)) >= 1

    with ScriptedServer(list(SCRIPT)) as srv:
        meta = execute(make_cfg(budget=3), "How tall?", None, run_dir, srv.url, should_pause=pause)
    assert meta["stop_reason"] == "paused"
    return run_dir


def _digest(run_dir: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run_dir.iterdir() if p.is_file() and not p.is_symlink()}


def _damage_state(run_dir: Path, how: str, host: Path) -> None:
    state = run_dir / "state.json"
    good = json.loads(state.read_text())
    state.unlink()
    if how == "link":
        host.write_text(json.dumps(good))
        state.symlink_to(host)
        return
    state.write_text({
        "empty": "",
        "garbage": "\x00\x01 {not json",
        "deep": "[" * 30_000 + "]" * 30_000,
        "list": "[1, 2, 3]",
        "no-loop": json.dumps({"harness": "native", "version": 2}),
        "wrong-types": json.dumps({**good, "loop": {**good["loop"], "turn": "three", "messages": {"a": 1}}}),
        "harness-number": json.dumps({**good, "harness": 7}),
        "unknown-harness": json.dumps({**good, "harness": "nope"}),
    }[how])


STATE_HOWS = ["empty", "garbage", "deep", "list", "no-loop", "wrong-types", "harness-number", "unknown-harness", "link"]


@pytest.mark.parametrize("how", STATE_HOWS)
def test_resume_of_a_damaged_state_is_one_line_and_writes_nothing(paused_run, tmp_path, how):
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(paused_run, run_dir, symlinks=True)
    _damage_state(run_dir, how, tmp_path / "host-state.json")
    before = _digest(run_dir)
    with pytest.raises(SearchboxError) as err:
        resume(run_dir, "http://127.0.0.1:9", budget=3)
    assert "\n" not in str(err.value) and ("state.json" in str(err.value) or "checkpoint" in str(err.value))
    assert _digest(run_dir) == before  # the record, the trace and the tables as they were


@pytest.mark.parametrize("how", ["empty", "deep", "link", "wrong-shape"])
def test_the_resume_command_says_one_line_for_a_damaged_record(paused_run, tmp_path, how):
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(paused_run, run_dir, symlinks=True)
    meta = run_dir / "run_meta.json"
    if how == "link":
        host = tmp_path / "host.json"
        host.write_text(meta.read_text())
        meta.unlink()
        meta.symlink_to(host)
    else:
        meta.write_text({"empty": "", "deep": "{\"a\":" * 30_000 + "1" + "}" * 30_000,
                         "wrong-shape": json.dumps({"run_id": "r", "config": "yes", "tokens": [1]})}[how])
    before = _digest(run_dir)
    proc = subprocess.run([sys.executable, "-m", "searchbox.run", "--resume", str(run_dir), "--endpoint", "http://127.0.0.1:9"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert len(proc.stderr.strip().splitlines()) == 1 and "run_meta.json" in proc.stderr, proc.stderr
    assert _digest(run_dir) == before
