"""harness=codex against the scripted server: the real Codex CLI (the pinned install, in the run's box), its Responses
API calls translated at the channel, the run's tools over MCP; parity with the native loop, a hostile model, a kill.

The channel calls the model with plain chat requests, so one script drives the native loop and Codex alike.
Skipped with the reason when Codex is not installed (`python -m searchbox setup`).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import tomllib
from pathlib import Path

import pytest

from searchbox import paths
from searchbox.errors import SetupError
from searchbox.harness.codex import install, launch, wire
from searchbox.run.runner import execute, resume
from searchbox.tools import select
from searchbox.tools.sandbox import bwrap_works
from tests.conftest import REAL_HOME, make_cfg, tables, trace
from tests.fakes.scripted_server import ScriptedServer

REAL_CODEX = install.PIN.install_dir(Path(REAL_HOME) if REAL_HOME else paths.home())  # read before the home is isolated
QUESTION = "How tall is Gannet Rock?"
USAGE = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}  # the same bill for every call, whatever the harness sent


@pytest.fixture
def codex(isolated_home):
    """The real Codex install, seen from the test's isolated SEARCHBOX_HOME."""
    if not (REAL_CODEX / ".searchbox-installed").is_file():
        pytest.skip(f"Codex is not installed at {REAL_CODEX}: run `python -m searchbox setup`")
    if not bwrap_works():
        pytest.skip("bubblewrap unavailable (apt-get install bubblewrap): Codex runs in the box")
    target = install.PIN.install_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(REAL_CODEX.resolve())
    return install.require_codex()


def codex_cfg(kind="codex", **harness):
    cfg = make_cfg(kind=kind, **harness)
    cfg.retrieval.retriever = "bm25"
    return cfg


def billed(script):
    return [{**step, "usage": USAGE} for step in script]


SERVER = {"n_ctx": 65536}  # Codex's own prompt is ~5K tokens at the scripted server's 4 characters a token


def test_check_refuses_in_one_line_when_codex_is_not_installed(isolated_home):
    from searchbox.harness.codex import CodexHarness

    with pytest.raises(SetupError) as info:
        CodexHarness().check(codex_cfg())
    said = str(info.value)
    assert "\n" not in said and "python -m searchbox setup" in said and install.pinned_version() in said
    cfg = codex_cfg()
    cfg.model.policy = "oracle"
    with pytest.raises(Exception, match="runs under harness=native"):
        CodexHarness().check(cfg)
    cfg = codex_cfg()
    cfg.model.protocol = "json"
    with pytest.raises(Exception, match="protocol='json'"):
        CodexHarness().check(cfg)


def test_the_config_is_toml_with_codexs_own_tools_telemetry_and_retries_off():
    cfg = codex_cfg()
    data = tomllib.loads(launch.toml(launch.settings(cfg, 8192, 'task\n"quoted"', "/sock", "/usr/bin/node")))
    assert data["developer_instructions"] == 'task\n"quoted"' and data["model_provider"] == "searchbox"
    provider = data["model_providers"]["searchbox"]
    assert provider["wire_api"] == "responses" and provider["base_url"].startswith("http://127.0.0.1:")
    assert provider["request_max_retries"] == 0 and provider["stream_max_retries"] == 0
    assert not any(data["features"].values()) and {"shell_tool", "unified_exec", "view_image"} <= set(data["features"])
    assert data["web_search"] == "disabled" and data["check_for_update_on_startup"] is False
    assert data["analytics"]["enabled"] is False and data["otel"]["exporter"] == "none" and data["agents"]["enabled"] is False
    assert data["mcp_servers"]["searchbox"]["env"] == {"SEARCHBOX_CHANNEL": "/sock"}


def test_the_translation_keeps_the_conversation_and_drops_what_a_chat_server_cannot_take():
    body = {"model": "gpt-x", "temperature": 2, "instructions": "base", "max_output_tokens": 10**9, "tool_choice": "auto",
            "input": [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "task"}]},
                      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n<current_date>2031-05-05</current_date>"}]},
                      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "question"}]},
                      {"type": "reasoning", "summary": [], "encrypted_content": "xx"},
                      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "looking"}]},
                      {"type": "function_call", "call_id": "c1", "name": "bash", "namespace": wire.NAMESPACE, "arguments": "{\"command\": \"ls\"}"},
                      {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]}],
            "tools": [{"type": "function", "name": "request_user_input", "parameters": {}},
                      {"type": "namespace", "name": wire.NAMESPACE, "tools": [{"type": "function", "name": "bash", "description": "d", "parameters": {"type": "object"}}]},
                      {"type": "web_search"}]}
    got = wire.upstream(body, 512, "2026-01-01")
    p = got.payload
    assert set(p) == {"messages", "tools", "tool_choice", "max_tokens"} and p["max_tokens"] == 512  # no model, no sampling
    assert [m["role"] for m in p["messages"]] == ["system", "user", "user", "assistant", "tool"]
    assert p["messages"][0]["content"] == "base\n\ntask" and "2026-01-01" in p["messages"][1]["content"]
    assert p["messages"][3]["tool_calls"][0]["function"] == {"name": "bash", "arguments": "{\"command\": \"ls\"}"}
    assert p["messages"][4] == {"role": "tool", "tool_call_id": "c1", "content": "a\nb"}
    assert [t["function"]["name"] for t in p["tools"]] == ["bash"]
    assert got.dropped_tools == ["request_user_input", "web_search"] and got.dropped_items == {"reasoning": 1}


def _native_and_codex(tmp_path, script, tools="high"):
    out = {}
    for kind in ("native", "codex"):
        cfg = codex_cfg(kind=kind, budget=1)
        cfg.tools = tools
        with ScriptedServer(billed(script), **SERVER) as srv:
            meta = execute(cfg, QUESTION, None, tmp_path / kind, srv.url)
        out[kind] = (meta, srv, tmp_path / kind)
    return out


def test_parity_the_same_script_gives_the_native_loops_rows_tokens_and_answer(tmp_path, codex, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the harness's own home: Codex must leave it alone
    (tmp_path / "home").mkdir()
    script = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "ls dataroom | head -3; grep -ril gannet dataroom | head -2"}}]},
        {"tool_calls": [{"name": "search_dataroom", "arguments": {"query": "Gannet Rock height"}}]},
        {"content": "Gannet Rock is 38.4 metres tall."},
    ]
    runs = _native_and_codex(tmp_path, script)
    (native, _, native_dir), (meta, srv, run_dir) = runs["native"], runs["codex"]
    assert meta["stop_reason"] == native["stop_reason"] and meta["turns"] == 1, meta["stop_detail"]
    rows = lambda d: [(r.tool, json.loads(r.arguments), r.ok, r.step) for r in tables(d)[1].itertuples()]
    assert rows(run_dir) == rows(native_dir) and len(rows(run_dir)) == 2
    assert meta["llm_calls"] == native["llm_calls"] == len(srv.requests) == 3
    assert meta["tokens"]["prompt"] == native["tokens"]["prompt"] == 3 * USAGE["prompt_tokens"]  # each call billed once
    assert meta["tokens"]["completion"] == native["tokens"]["completion"]
    assert meta["answer"].strip() == native["answer"].strip() == "Gannet Rock is 38.4 metres tall."
    # The model was offered exactly the run's tools, under the catalog's names, and no model/sampling came from Codex.
    names = lambda r: sorted(t["function"]["name"] for t in r.get("tools") or [])
    assert all(names(r) == sorted(s.name for s in select("high")) for r in srv.requests)
    assert all(r["max_tokens"] <= codex_cfg().model.max_tokens and "id_slot" not in r for r in srv.requests)
    h = meta["harness"]
    assert h["kind"] == "codex" and h["codex_version"] == install.pinned_version() and h["thread"] and h["exits"] == [0]
    assert h["unmatched_calls"] == 0 and h["channel_strangers"] == 0 and h["box_killed"] == [] and "request_user_input" in h["dropped_tools"]
    # The trace: Codex's prompt with the task joined and the run's date; tool results as Codex sent them, with data.
    events = trace(run_dir)
    messages = [e["message"] for e in events if e["type"] == "message"]
    system = next(m["content"] for m in messages if m["role"] == "system")
    assert "Codex" in system and "ANSWER.md" in system
    assert any("<current_date>2026-01-01</current_date>" in (m.get("content") or "") for m in srv.requests[0]["messages"])
    results = [m for m in messages if m["role"] == "tool"]
    assert [m["name"] for m in results] == ["bash", "search_dataroom"] and results[1]["data"]["results"]
    # Nothing written outside the run: the host home untouched, Codex's cwd empty, its files in its private CODEX_HOME.
    assert not any((tmp_path / "home").iterdir())
    left = list((run_dir / "codex" / "box" / "cwd").iterdir())  # only the hidden folders' mount points, empty
    assert {p.name for p in left} <= set(launch.HIDDEN) and not any(any(p.iterdir()) for p in left)
    assert (run_dir / "codex" / "box" / "home" / "config.toml").is_file() and list((run_dir / "codex" / "box" / "home" / "sessions").rglob("*.jsonl"))
    # Nothing else was asked of the channel: the model calls, the bridge's tool list (once) and its two calls. Codex lists
    # no models and fetches nothing more (the box has no other way out: see the kill test's network namespace).
    assert h["channel_requests"] == len(srv.requests) + 1 + 2


def test_budget_forcing_continues_codexs_session_and_resume_goes_on_from_the_checkpoint(tmp_path, codex):
    cfg = codex_cfg(budget=2)
    script = [{"content": "First: 38 metres."}, {"content": "It is 38.4 metres tall."}]
    run_dir = tmp_path / "run"
    with ScriptedServer(billed(script), **SERVER) as srv:
        meta = execute(cfg, QUESTION, None, run_dir, srv.url)
    assert meta["stop_reason"] == "budget_spent" and meta["turns"] == 2 and meta["continues_sent"] == 1, meta["stop_detail"]
    last = srv.requests[-1]["messages"]
    assert [m["content"] for m in last if m["role"] == "user"][-1] == "Continue."
    assert any(m["role"] == "assistant" and m["content"] == "First: 38 metres." for m in last)  # the same session, continued
    assert meta["answer"].strip() == "It is 38.4 metres tall."
    with ScriptedServer(billed([{"content": "Final: 38.4 metres."}]), **SERVER) as srv2:
        again = resume(run_dir, srv2.url, budget=3)
    assert again["stop_reason"] == "budget_spent" and again["turns"] == 3 and again["resumes"] == 1, again["stop_detail"]
    said = [m["content"] for m in srv2.requests[0]["messages"] if m["role"] == "user"]
    assert said.count("Continue.") == 2 and any(QUESTION in s for s in said)
    assert again["tokens"]["prompt"] == meta["tokens"]["prompt"] + USAGE["prompt_tokens"] * len(srv2.requests)


def test_hostile_the_models_bash_cannot_reach_outside_and_nothing_codex_says_makes_a_row(tmp_path, codex):
    probe = ("cat /proc/1/cmdline | tr '\\0' ' '; echo; ls /searchbox /root 2>&1 | head; "
             "(exec 3<>/dev/tcp/127.0.0.1/%d && echo REACHED) 2>&1 | tail -1; env | grep -c CODEX_HOME" % launch.PORT)
    script = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": probe}}]},
        {"tool_calls": [{"name": "shell", "arguments": {"command": ["bash", "-lc", "touch /tmp/pwned"]}}]},  # Codex's own: not there
        {"tool_calls": [{"name": "bash", "arguments": "{not json"}]},
        {"content": "done"},
    ]
    cfg = codex_cfg(budget=1)
    cfg.tools = "high"
    run_dir = tmp_path / "run"
    with ScriptedServer(billed(script), **SERVER) as srv:
        meta = execute(cfg, QUESTION, None, run_dir, srv.url)
    assert meta["stop_reason"] in ("first_turn_done", "budget_spent"), meta["stop_detail"]
    _, calls = tables(run_dir)
    assert list(calls["tool"]) == ["bash", "shell", "bash"]
    first = calls.iloc[0]
    assert first["ok"]
    out = next(m for m in (e["message"] for e in trace(run_dir) if e["type"] == "message") if m["role"] == "tool")["content"]
    lines = out.splitlines()
    assert "REACHED" not in lines and any("/dev/tcp/127.0.0.1" in line and "refused" in line for line in lines)  # no forwarder here
    assert "ls: cannot access '/searchbox': No such file or directory" in lines  # not Codex's box: no install, bridge or channel
    assert str(run_dir) not in out and "0" in lines  # no host path; no CODEX_HOME in the command's environment
    # The calls Codex refused (a tool it lacks, arguments that are no JSON) are rows from the model's call, never run.
    assert not calls.iloc[1]["ok"] and calls.iloc[1]["malformed"] and not calls.iloc[2]["ok"]
    assert not Path("/tmp/pwned").exists()
    assert meta["harness"]["unmatched_calls"] == 0 and meta["harness"]["channel_strangers"] == 0


def _ask_channel_from_outside(since: float) -> list:
    """The run's channel, asked by this test's process (not in Codex's box): every answer it got (b"" when closed unanswered)."""
    import glob
    import socket
    import tempfile

    said = []
    for path in glob.glob(os.path.join(tempfile.gettempdir(), "sb-pi-*", "channel.sock")):
        if os.stat(path).st_mtime < since:
            continue
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(10)
            try:
                sock.connect(path)
                sock.sendall(b"GET /searchbox/tools HTTP/1.1\r\nHost: x\r\n\r\n")
                said.append(sock.recv(4096))
            except OSError as exc:
                said.append(str(exc).encode())
    return said


def test_kill_codex_mid_turn_leaves_a_stop_reason_and_complete_rows(tmp_path, codex):
    script = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo one"}}]},
        {"sleep": 20.0, "content": "never delivered"},  # long enough for the kill to land mid-call on a loaded machine
    ]
    cfg = codex_cfg(budget=1)
    cfg.tools = "high"
    run_dir = tmp_path / "run"
    result = {}
    since = time.time()

    def killer():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(0.2)
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    exe = os.readlink(f"/proc/{pid}/exe")
                except OSError:
                    continue
                if not exe.endswith("/bin/codex") or not srv.requests:
                    continue
                if "outside" not in result:  # while Codex runs its first call's tool, before the call the kill cuts
                    result["outside"] = _ask_channel_from_outside(since)
                if len(srv.requests) >= 2:
                    result["netns"] = os.stat(f"/proc/{pid}/ns/net").st_ino  # before the kill: Codex's network namespace
                    result["cmdline"] = Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace")
                    os.kill(int(pid), signal.SIGKILL)
                    result["killed"] = int(pid)
                    return

    with ScriptedServer(billed(script), **SERVER) as srv:
        t = threading.Thread(target=killer, daemon=True)
        t.start()
        meta = execute(cfg, QUESTION, None, run_dir, srv.url)
        t.join(5)
    assert result.get("killed"), "codex was not found to kill"
    assert result["netns"] != os.stat("/proc/self/ns/net").st_ino  # Codex had a network of its own: its loopback, nothing else
    assert str(tmp_path) not in result["cmdline"] and "/root" not in result["cmdline"] and "/searchbox/codex/" in result["cmdline"]
    # A process outside the box (this test) asked the channel: closed unanswered (no byte, or a broken pipe), and counted.
    assert result["outside"] and not any(said.startswith(b"HTTP") for said in result["outside"])
    assert meta["harness"]["channel_strangers"] >= 1
    assert meta["stop_reason"] == "tool_error" and "Codex exited" in meta["stop_detail"], meta["stop_detail"]
    turns, calls = tables(run_dir)
    assert list(calls["tool"]) == ["bash"] and calls.iloc[0]["ok"] and list(turns["turn"]) == [1]
    assert meta["llm_calls"] == 2  # the call in flight when Codex died was waited for and billed
    # --resume redoes the cut turn honestly from the last checkpoint (before turn 1): a new session, the question again.
    with ScriptedServer(billed([{"content": "It is 38.4 metres tall."}]), **SERVER) as srv2:
        again = resume(run_dir, srv2.url)
    assert again["stop_reason"] in ("first_turn_done", "budget_spent") and again["turns"] == 1 and again["resumes"] == 1, again["stop_detail"]
    assert [m["content"] for m in srv2.requests[0]["messages"] if m["role"] == "user"][-1] == QUESTION
    assert tables(run_dir)[1].empty and again["answer"].strip() == "It is 38.4 metres tall."  # the cut turn's rows went with it


def test_a_damaged_checkpoint_is_refused_in_one_line():
    from searchbox.errors import SearchboxError
    from searchbox.harness.codex import loop

    for bad in ({"version": 99, "state": {}}, {"version": loop.STATE_VERSION}, {"version": loop.STATE_VERSION, "state": {"turn": "x"}}):
        with pytest.raises(SearchboxError) as info:
            loop.restore(bad)
        assert "\n" not in str(info.value) and "cannot resume" in str(info.value)


def test_a_resume_without_codexs_saved_session_is_refused_in_one_line(tmp_path):
    from searchbox.errors import SearchboxError
    from searchbox.harness.codex import loop

    with pytest.raises(SearchboxError, match="Codex's session as of turn 2"):
        loop.restore_home(tmp_path, loop.CodexState(turn=2, thread="t"))


def test_codex_compacts_near_the_window_with_a_model_call_that_is_billed_and_counted(tmp_path, codex):
    """Codex 0.171 compacts locally (a Responses request without tools, its summary prompt); never /responses/compact."""
    cfg = codex_cfg(budget=1)
    cfg.tools = "high"
    script = [{"tool_calls": [{"name": "bash", "arguments": {"command": f"seq 1 {700 + i}"}}]} for i in range(4)]
    script += [{"content": "## Summary\nCounted."}, {"content": "It is 38.4 metres tall."}]
    with ScriptedServer(script, n_ctx=9000) as srv:
        meta = execute(cfg, QUESTION, None, tmp_path / "run", srv.url)
    assert meta["stop_reason"] == "budget_spent", meta["stop_detail"]
    summary = [r for r in srv.requests if not r.get("tools")]
    assert len(summary) == 1 and "COMPACTION" in summary[0]["messages"][-1]["content"]
    h = meta["harness"]
    assert h["compaction_calls"] == meta["compactions"] == 1 and meta["llm_calls"] == len(srv.requests) == 6
    assert meta["tokens"]["prompt"] == srv.usage_total["prompt"] and h["channel_requests"] == 6 + 1 + 4
    assert meta["answer"].strip() == "It is 38.4 metres tall."


def test_a_refusal_at_the_channel_ends_codexs_turn_and_the_step_limit_holds(tmp_path, codex):
    cfg = codex_cfg(budget=1, max_steps_per_turn=1)
    cfg.tools = "high"
    script = [{"tool_calls": [{"name": "bash", "arguments": {"command": "echo one"}}]}, {"content": "never asked"}]
    with ScriptedServer(billed(script), **SERVER) as srv:
        meta = execute(cfg, QUESTION, None, tmp_path / "run", srv.url)
    assert meta["stop_reason"] == "budget_spent" and len(srv.requests) == 1, meta["stop_detail"]  # the second call was refused
    turns, calls = tables(tmp_path / "run")
    assert list(turns["ended_by"]) == ["max_steps"] and list(calls["tool"]) == ["bash"] and calls.iloc[0]["ok"]
    exit = next(e for e in trace(tmp_path / "run") if e["type"] == "codex_exit")
    assert exit["killed"] and meta["harness"]["exits"] == [None]  # the harness ended the turn at its refusal: the box went with it


def test_a_codex_without_the_runs_tools_stops_the_run_in_one_line(tmp_path, codex, monkeypatch):
    """The MCP bridge does not start (here: its command is /bin/false): Codex would go on without the run's tools."""
    settings = launch.settings

    def broken(*args, **kw):
        data = settings(*args, **kw)
        data["mcp_servers"]["searchbox"]["command"] = "/bin/false"
        return data

    monkeypatch.setattr(launch, "settings", broken)
    cfg = codex_cfg(budget=1)
    cfg.tools = "high"
    with ScriptedServer(billed([{"content": "no tools"}]), **SERVER) as srv:
        meta = execute(cfg, QUESTION, None, tmp_path / "run", srv.url)
    assert meta["stop_reason"] == "tool_error" and "MCP bridge did not start" in meta["stop_detail"] and not srv.requests
    assert "\n" not in meta["stop_detail"]


@pytest.mark.parametrize("quota_mb", [1024, 0])  # work/ a tmpfs in the box, or the run's folder bound as it is
def test_the_model_may_rewrite_an_answer_the_backstop_wrote_in_an_earlier_turn(tmp_path, codex, quota_mb):
    # Codex's backstop does not hand its ANSWER.md to the box's user as Pi's and Claude Code's do (CliRun.hand_over):
    # the model's bash must still be able to rewrite it in a later turn, whether work/ is a tmpfs in the box or bound.
    cfg = codex_cfg(budget=2, work_quota_mb=quota_mb)
    script = [{"content": "First: 38 metres."},
              {"tool_calls": [{"name": "bash", "arguments": {"command": "printf '38.4 metres\\n' > ANSWER.md && cat ANSWER.md"}}]},
              {"content": "Done."}]
    run_dir = tmp_path / "run"
    with ScriptedServer(billed(script), **SERVER) as srv:
        meta = execute(cfg, QUESTION, None, run_dir, srv.url)
    assert meta["stop_reason"] == "budget_spent" and meta["turns"] == 2, meta["stop_detail"]
    assert (run_dir / "snapshots" / "ANSWER-t1.md").read_text().strip() == "First: 38 metres."  # the backstop's
    _, calls = tables(run_dir)
    assert list(calls["ok"]) == [True], calls[["tool", "error"]].to_dict("records")
    assert meta["answer_source"] == "model" and meta["answer"] == "38.4 metres\n"

