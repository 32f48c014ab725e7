"""harness=mini-swe-agent against the scripted server: mini-swe-agent's own DefaultAgent loop and templates, the run's
accounting at its Model, its commands in the run's boxed bash, budget forcing, deadlines, resume, and nothing of it
written outside the run.

The scripted server stands in for the model: mini-swe-agent's requests carry no tools, so a step's `content` is the
reply's text, in which mini-swe-agent looks for its one ```mswea_bash_command block.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from searchbox.errors import ConfigError, SearchboxError
from searchbox.harness import miniswe
from searchbox.run.runner import execute, resume
from searchbox.tools.sandbox import bwrap_works
from tests.conftest import make_cfg, tables, trace
from tests.fakes.scripted_server import ScriptedServer

QUESTION = "How tall is Gannet Rock?"
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
GREP = "grep -rn Gannet dataroom | head -5"

needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap unavailable (apt-get install bubblewrap)")


def act(command: str, thought: str = "THOUGHT: I look in the dataroom.") -> dict:
    """A scripted reply in mini-swe-agent's format: a thought, then exactly one action block."""
    return {"content": f"{thought}\n\n```mswea_bash_command\n{command}\n```"}


def mini_cfg(**harness):
    return make_cfg(kind="mini-swe-agent", **harness)


def messages(run_dir: Path) -> list[dict]:
    return [e["message"] for e in trace(run_dir) if e["type"] == "message"]


def test_parity_with_the_native_loop_rows_tokens_and_answer(tmp_path):
    """The same script shape under both harnesses: one grep over the dataroom, then the end of the turn (native: a
    final message; mini-swe-agent: its submit sentinel, after it wrote ANSWER.md). The grep's tool row is the same row,
    every billed token is counted once and the turns sum to the run, and the answer is the model's file in both.
    What differs by protocol: mini-swe-agent's submit is a command it runs (a second row, `echo`), and its prompt is
    its own templates (so other token counts)."""
    answer = "38.4 metres\nSources: dataroom\n"
    write = f"printf '{answer.replace(chr(10), chr(92) + 'n')}' > ANSWER.md"
    native_script = [{"tool_calls": [{"name": "bash", "arguments": {"command": GREP}}]},
                     {"tool_calls": [{"name": "bash", "arguments": {"command": write}}]},
                     {"content": "Gannet Rock is 38.4 metres tall."}]
    mini_script = [act(GREP), act(write, "THOUGHT: I write the answer."), act(SUBMIT, "Gannet Rock is 38.4 metres tall.")]
    runs = {}
    for kind, script in (("native", native_script), ("mini-swe-agent", mini_script)):
        cfg = make_cfg(kind=kind, budget=1)
        cfg.model.protocol = "native"
        with ScriptedServer(script) as srv:
            meta = execute(cfg, QUESTION, None, tmp_path / kind, srv.url)
        turns, calls = tables(tmp_path / kind)
        assert meta["stop_reason"] == "budget_spent" and meta["turns"] == 1, (kind, meta["stop_detail"])
        assert meta["llm_calls"] == len(srv.requests) == 3
        assert meta["tokens"]["prompt"] == srv.usage_total["prompt"] and meta["tokens"]["completion"] == srv.usage_total["completion"]
        assert turns["prompt_tokens"].sum() == meta["tokens"]["prompt"] and turns["llm_calls"].sum() == 3
        assert meta["answer_source"] == "model" and meta["answer"] == answer
        runs[kind] = (meta, turns, calls, srv)
    (nm, nt, nc, _), (mm, mt, mc, msrv) = runs["native"], runs["mini-swe-agent"]
    same = ["turn", "step", "tool", "arguments", "programs", "paths", "ok", "error", "output_chars", "delivered", "malformed"]
    as_rows = lambda df: [{k: (list(v) if hasattr(v, "tolist") else v) for k, v in r.items()} for r in df[same].to_dict("records")]
    assert as_rows(mc)[:2] == as_rows(nc)[:2]  # the grep and the write: the same rows, the same box's output
    assert list(mc["tool"]) == ["bash", "bash", "bash"] and list(mc["programs"].iloc[2]) == ["echo"] and mc["ok"].all()
    assert list(mt["ended_by"]) == ["submitted"] and list(nt["ended_by"]) == ["no_tool_calls"]
    assert mm["harness"]["kind"] == "mini-swe-agent" and mm["harness"]["mini_swe_agent"] == miniswe.PIN
    assert mm["harness"]["submissions"] == 1 and mm["protocol"] == "text"
    # The tool outputs in the trace are the native loop's (the same tool ran), in the canonical shape.
    native_out = [m["content"] for m in messages(tmp_path / "native") if m["role"] == "tool"]
    mini_out = [m["content"] for m in messages(tmp_path / "mini-swe-agent") if m["role"] == "tool"]
    assert mini_out[:2] == native_out[:2] and "Gannet" in mini_out[0]
    # What mini-swe-agent sent: no tools, its own system template with the task appended, its instance template with
    # the question, and its observation of the grep (return code and output) as the next user message.
    first, second = msrv.requests[0], msrv.requests[1]
    assert "tools" not in first and [m["role"] for m in first["messages"]] == ["system", "user"]
    system, instance = first["messages"][0]["content"], first["messages"][1]["content"]
    assert system.startswith("You are a helpful assistant that can interact with a computer.") and "ANSWER.md" in system
    assert "2026-01-01" in system and f"Please solve this issue: {QUESTION}" in instance
    observation = second["messages"][-1]["content"]
    assert second["messages"][-1]["role"] == "user" and "<returncode>0</returncode>" in observation and mini_out[0].strip() in observation


def test_budget_forcing_sends_continue_until_the_budget(tmp_path):
    cfg = mini_cfg(budget=3)
    script = [act(GREP), act(SUBMIT, "It is 38.4 metres tall."), act(SUBMIT, "Still 38.4 metres."), act(SUBMIT, "Final: 38.4 metres.")]
    with ScriptedServer(script) as srv:
        meta = execute(cfg, QUESTION, None, tmp_path / "run", srv.url)
    assert meta["stop_reason"] == "budget_spent" and meta["turns"] == 3 and meta["continues_sent"] == 2, meta["stop_detail"]
    assert srv.user_messages("Continue.") == 2  # each new turn starts with a bare Continue. on the same history
    last = srv.requests[-1]["messages"]
    assert last[0]["role"] == "system" and QUESTION in last[1]["content"] and sum(m["content"] == "Continue." for m in last) == 2
    turns, calls = tables(tmp_path / "run")
    assert list(turns["turn"]) == [1, 2, 3] and list(turns["ended_by"]) == ["submitted"] * 3
    assert list(turns["llm_calls"]) == [2, 1, 1] and turns["prompt_tokens"].sum() == meta["tokens"]["prompt"] == srv.usage_total["prompt"]
    assert list(calls["turn"]) == [1, 1, 2, 3] and list(calls["step"]) == [1, 2, 1, 1]
    # No ANSWER.md from the model: the backstop writes its last own words (not the action block).
    assert meta["answer_source"] == "backstop" and meta["answer"].strip() == "Final: 38.4 metres."


def test_a_reply_without_one_action_is_a_format_error_and_the_step_limit_ends_the_turn(tmp_path):
    cfg = mini_cfg(budget=1, max_steps_per_turn=3)
    script = [{"content": "The answer is 38.4 metres."}, act("ls dataroom"), act("ls dataroom | wc -l"), act("ls")]
    with ScriptedServer(script) as srv:
        meta = execute(cfg, QUESTION, None, tmp_path / "run", srv.url)
    assert meta["stop_reason"] == "budget_spent" and len(srv.requests) == 3
    turns, calls = tables(tmp_path / "run")
    assert list(turns["ended_by"]) == ["max_steps"] and meta["malformed_replies"] == 1 and list(calls["step"]) == [2, 3]
    feedback = srv.requests[1]["messages"][-1]
    assert feedback["role"] == "user" and "Format error" in feedback["content"]  # mini-swe-agent's own format-error template
    assert any(e["type"] == "malformed" for e in trace(tmp_path / "run"))


def test_tools_it_cannot_offer_are_a_config_error_naming_the_tiers_it_supports(tmp_path):
    for tools in ("high", "grep_only", "vector_only", "all"):
        cfg = mini_cfg()
        cfg.tools = tools
        with pytest.raises(ConfigError, match="bash-only: it runs tools=none"):
            execute(cfg, QUESTION, None, tmp_path / tools, "http://127.0.0.1:9")
        assert not (tmp_path / tools / "run_meta.json").exists()
    cfg = mini_cfg()
    cfg.model.policy = "keyword"
    with pytest.raises(ConfigError, match="control policy"):
        miniswe.MiniSweHarness().check(cfg)


def test_identity_keys_the_pin_and_the_templates_without_importing_it():
    code = ("import sys; from tests.conftest import make_cfg; from searchbox.harness import miniswe; "
            "i = miniswe.identity(make_cfg(kind='mini-swe-agent')); "
            "print(i['mini_swe_agent'], len(i['templates']), 'minisweagent' in sys.modules, i['action_regex'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2], timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    version, length, imported, regex = out.stdout.split(" ", 3)
    assert version == miniswe.PIN and length == "16" and imported == "False" and "mswea_bash_command" in regex
