"""The single-run CLI: a one-line summary and the answer path; refused input exits non-zero with one line."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from tests.fakes.scripted_server import ScriptedServer


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "searchbox.run", *args], capture_output=True, text=True, timeout=120, env=env)


def test_cli_runs_and_prints_summary(tmp_path):
    script = [{"tool_calls": [{"name": "grep", "arguments": {"pattern": "Tobias", "path": "dataroom"}}]}, {"content": "Tobias Wren"}]
    with ScriptedServer(script) as srv:
        proc = _cli("Who led the restoration?", "--budget", "1", "--out", str(tmp_path / "r"), "--endpoint", srv.url)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("budget_spent: 1 turns, 1 tool calls")
    assert lines[1].endswith("work/ANSWER.md")
    assert (tmp_path / "r" / "work" / "ANSWER.md").read_text().strip() == "Tobias Wren"


def test_cli_endpoint_from_env(tmp_path):
    import os

    with ScriptedServer([{"content": "x"}]) as srv:
        env = {**os.environ, "LLAMA_URL": srv.url + "/v1", "MODEL_ID": "my-model"}
        proc = _cli("q?", "--no-force-budget", "--budget", "5", "--out", str(tmp_path / "r"), env=env)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("first_turn_done")
        assert srv.requests[0]["model"] == "my-model"


def test_cli_refuses_hostile_zip_with_one_line(tmp_path):
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("../../escape.txt", "x")
    proc = _cli("q?", str(bad), "--out", str(tmp_path / "r"), "--endpoint", "http://127.0.0.1:9")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "path traversal" in proc.stderr and "escape.txt" in proc.stderr


def test_cli_refuses_unknown_tool(tmp_path):
    proc = _cli("q?", "--tools", "telepathy", "--out", str(tmp_path / "r"), "--endpoint", "http://127.0.0.1:9")
    assert proc.returncode == 2 and "unknown tool 'telepathy'" in proc.stderr
    assert not (tmp_path / "r").exists()


def test_cli_prints_the_servers_reason_and_no_missing_answer_path(tmp_path):
    # llama-server --no-jinja answers a request with tools so; the CLI says it, once, and does not retry it.
    script = [{"status": 500, "message": "tools param requires --jinja flag"}] * 5
    with ScriptedServer(script) as srv:
        proc = _cli("q?", "--budget", "1", "--tools", "low", "--protocol", "native", "--out", str(tmp_path / "r"), "--endpoint", srv.url)
        assert len(srv.requests) == 1
    assert proc.returncode == 1
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("model_error")
    assert lines[1].startswith("reason: ") and "tools param requires --jinja flag" in lines[1]
    assert "ANSWER.md" not in lines[2] and "no answer written" in lines[2]
