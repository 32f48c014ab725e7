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
from tests.conftest import kill_during_call, make_cfg, tables, trace
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


@needs_bwrap
def test_hostile_commands_are_contained_by_the_box_exactly_as_the_native_bash(tmp_path):
    """The model makes mini-swe-agent's own tool (its bash) reach outside the run: the host's secrets, a write beside
    work/, the network. Each command runs in the native loop's box: the same output, nothing outside touched."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET\n")
    with ScriptedServer([]) as probe:
        port = int(probe.url.rsplit(":", 1)[1].split("/")[0])
    commands = [
        f"cat /etc/shadow 2>&1 | head -2; cat {secret} 2>&1; ls /root 2>&1 | head -2; echo END",
        "echo pwned > ../pwned.txt 2>&1; echo pwned > /tmp/pwned-mini 2>&1; ls .. 2>&1 | head -3; echo WROTE",
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)\" 2>/dev/null && echo CONNECTED "
        "|| echo REFUSED; getent hosts pypi.org || echo NORESOLVE",
    ]
    outputs = {}
    for kind in ("native", "mini-swe-agent"):
        cfg = make_cfg(kind=kind, budget=1, sandbox="bwrap")
        cfg.model.protocol = "native"
        script = ([{"tool_calls": [{"name": "bash", "arguments": {"command": c}}]} for c in commands] if kind == "native"
                  else [act(c) for c in commands] + [act(SUBMIT)])
        run_dir = tmp_path / kind
        with ScriptedServer(script) as srv:
            meta = execute(cfg, QUESTION, None, run_dir, srv.url)
        assert meta["stop_reason"] == "budget_spent", meta["stop_detail"]
        assert meta["sandbox"] == "bwrap" and not (run_dir / "pwned.txt").exists() and not (tmp_path / "pwned.txt").exists()
        outputs[kind] = [m["content"] for m in messages(run_dir) if m["role"] == "tool"][: len(commands)]
    assert outputs["mini-swe-agent"] == outputs["native"]
    host, write, net = outputs["mini-swe-agent"]
    assert "root:" not in host and "TOP-SECRET" not in host and "END" in host
    assert "WROTE" in write and not Path("/tmp/pwned-mini").exists()  # the box's /tmp is its own
    assert "REFUSED" in net and "NORESOLVE" in net


def test_a_run_ceiling_mid_turn_leaves_a_stop_reason_and_complete_rows(tmp_path):
    cfg = mini_cfg(budget=2, run_ceiling_s=3.0)
    script = [act(GREP), {"sleep": 5.0, **act("ls dataroom")}, act(SUBMIT)]
    with ScriptedServer(script) as srv:
        meta = execute(cfg, QUESTION, None, tmp_path / "run", srv.url)
    assert meta["stop_reason"] == "ceiling_seconds" and meta["status"] == "complete", meta["stop_detail"]
    turns, calls = tables(tmp_path / "run")
    assert list(turns["turn"]) == [1] and list(turns["ended_by"]) == ["stop"]  # the turn cut short has its row
    assert list(calls["tool"]) == ["bash"] and calls["ok"].all() and meta["tool_calls"] == 1
    assert meta["llm_calls"] == 1 and turns["llm_calls"].sum() == 1 and meta["elapsed_s"] < 10
    assert trace(tmp_path / "run")[-1]["type"] == "stop"


def test_a_turn_ceiling_ends_its_loop_mid_turn_and_budget_forcing_goes_on(tmp_path):
    cfg = mini_cfg(budget=2, turn_ceiling_s=2.0)
    script = [act(GREP), {"sleep": 4.0, **act("ls dataroom")}, act(SUBMIT, "38.4 metres.")]
    with ScriptedServer(script) as srv:
        meta = execute(cfg, QUESTION, None, tmp_path / "run", srv.url)
    assert meta["stop_reason"] == "budget_spent" and meta["turns"] == 2, meta["stop_detail"]
    turns, calls = tables(tmp_path / "run")
    assert list(turns["ended_by"]) == ["turn_ceiling", "submitted"] and list(calls["turn"]) == [1, 2]
    assert srv.user_messages("Continue.") == 1 and meta["answer"].strip() == "38.4 metres."
    assert [e["status"] for e in trace(tmp_path / "run") if e["type"] == "exit"] == ["EndTurn", "Submitted"]


def test_a_token_budget_spent_mid_turn_stops_before_the_next_command(tmp_path):
    cfg = mini_cfg(budget=2500, budget_unit="tokens")
    script = [act(GREP), act("ls dataroom"), act("ls"), act("pwd"), act("date")] * 4
    with ScriptedServer(script) as srv:
        meta = execute(cfg, QUESTION, None, tmp_path / "run", srv.url)
    assert meta["stop_reason"] == "token_budget_spent" and meta["tokens"]["total"] >= 2500, meta["stop_detail"]
    turns, calls = tables(tmp_path / "run")
    assert meta["llm_calls"] == len(srv.requests) == turns["llm_calls"].sum() and meta["tokens"]["prompt"] == srv.usage_total["prompt"]
    assert len(calls) == meta["llm_calls"] - 1  # the reply that spent the budget was billed, its command never ran
    assert list(turns["ended_by"])[-1] == "stop"


def test_a_paused_run_resumes_mid_turn_from_its_checkpoint_with_the_accounting_continuous(tmp_path):
    cfg = mini_cfg(budget=2)
    run_dir = tmp_path / "run"
    asked = []

    def pause():  # polled before each model call: pause before the third
        asked.append(1)
        return len(asked) > 2

    with ScriptedServer([act(GREP), act("ls dataroom")]) as srv:
        meta = execute(cfg, QUESTION, None, run_dir, srv.url, should_pause=pause)
    assert meta["stop_reason"] == "paused" and meta["llm_calls"] == 2, meta["stop_detail"]
    state = json.loads((run_dir / "state.json").read_text())
    assert state["harness"] == "mini-swe-agent" and state["state"]["step"] == 2 and state["state"]["turn"] == 1
    with ScriptedServer([act(SUBMIT, "It is 38.4 metres."), act(SUBMIT, "38.4 metres.")]) as srv2:
        again = resume(run_dir, srv2.url)
    assert again["stop_reason"] == "budget_spent" and again["turns"] == 2 and again["resumes"] == 1, again["stop_detail"]
    first = srv2.requests[0]["messages"]
    assert QUESTION in first[1]["content"] and first[-1]["role"] == "user" and "<returncode>0</returncode>" in first[-1]["content"]
    assert again["tokens"]["prompt"] == meta["tokens"]["prompt"] + srv2.usage_total["prompt"] and again["llm_calls"] == 4
    turns, calls = tables(run_dir)
    assert list(turns["turn"]) == [1, 2] and list(turns["llm_calls"]) == [3, 1] and list(calls["step"]) == [1, 2, 3, 1]
    assert turns["prompt_tokens"].sum() == again["tokens"]["prompt"] and again["answer"].strip() == "38.4 metres."


@pytest.mark.parametrize("damage", ["messages", "version", "counter"])
def test_a_damaged_checkpoint_refuses_to_resume_in_one_line(tmp_path, damage):
    cfg = mini_cfg(budget=1)
    run_dir = tmp_path / "run"
    with ScriptedServer([act(GREP), act(SUBMIT, "38.4 metres.")]) as srv:
        execute(cfg, QUESTION, None, run_dir, srv.url)
    path = run_dir / "state.json"
    state = json.loads(path.read_text())
    if damage == "messages":
        state["state"]["messages"][1] = {"role": "tool", "content": 7}
    elif damage == "version":
        state["version"] = 99
    else:
        state["state"]["step"] = "two"
    path.write_text(json.dumps(state))
    before = (run_dir / "run_meta.json").read_text()
    with pytest.raises(SearchboxError) as err:
        resume(run_dir, "http://127.0.0.1:9", budget=2)
    assert "cannot resume" in str(err.value) and "\n" not in str(err.value)
    assert (run_dir / "run_meta.json").read_text() == before  # the run is left as it was


def test_nothing_is_written_outside_the_run_and_litellm_is_never_imported(tmp_path):
    """mini-swe-agent creates its global config folder (~/.config/mini-swe-agent) and loads a .env from it when it is
    imported, and its models call litellm: in a fresh process with its own HOME, a run leaves HOME empty, points that
    folder into the run, prints no banner and never imports litellm."""
    home = tmp_path / "home"
    home.mkdir()
    code = f"""
import json, sys
from tests.conftest import make_cfg
from tests.fakes.scripted_server import ScriptedServer
from searchbox.run.runner import execute
cfg = make_cfg(kind="mini-swe-agent", budget=1)
script = [{{"content": "```mswea_bash_command\\nls dataroom\\n```"}}, {{"content": "```mswea_bash_command\\n{SUBMIT}\\n```"}}]
with ScriptedServer(script) as srv:
    meta = execute(cfg, "How tall is Gannet Rock?", None, {str(tmp_path / 'run')!r}, srv.url)
import minisweagent
print(json.dumps({{"stop": meta["stop_reason"], "litellm": "litellm" in sys.modules, "openai": "openai" in sys.modules,
                  "config_dir": str(minisweagent.global_config_dir)}}))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "MSWEA_"))}
    env.update(HOME=str(home), PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=Path(__file__).resolve().parents[2], timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["stop"] == "budget_spent" and not result["litellm"] and not result["openai"]
    assert Path(result["config_dir"]) == tmp_path / "run" / "miniswe" / "config"
    assert list(Path(result["config_dir"]).iterdir()) == []  # an empty folder: no .env to load, nothing written there
    assert list(home.rglob("*")) == []  # no ~/.config/mini-swe-agent, no cache, no history
    assert "mini-swe-agent" not in out.stdout and "mini-swe-agent" not in out.stderr  # no banner


def test_the_sweep_axis_composes_harness_mini_swe_agent():
    """`harness=mini-swe-agent` is a config group option (conf/harness/mini-swe-agent.yaml) that the sweep composes."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from searchbox.sweep.job import CONF_DIR, register_schema

    register_schema()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        swept = OmegaConf.to_object(compose(config_name="config", overrides=["harness=mini-swe-agent", "tools=none"]))
    cfg = swept.run_config()
    assert cfg.harness.kind == "mini-swe-agent" and cfg.harness.max_steps_per_turn == 24
    miniswe.MiniSweHarness().check(cfg)  # tools=none: the bash-only tier it runs


def test_a_run_killed_mid_turn_resumes_from_its_last_step(tmp_path):
    """The process running mini-swe-agent is killed (SIGKILL) while a model call is in flight: `--resume` picks the turn
    up at its last step boundary, with the rows and tokens of the steps before it."""
    run_dir = tmp_path / "run"
    with ScriptedServer([act(GREP), {"sleep": 60.0, **act("ls")}]) as srv:
        kill_during_call("from tests.conftest import make_cfg; from searchbox.run.runner import execute; "
                         f"execute(make_cfg(kind='mini-swe-agent', budget=1), {QUESTION!r}, None, {str(run_dir)!r}, {srv.url!r})", srv)
    state = json.loads((run_dir / "state.json").read_text())
    assert state["state"]["turn"] == 1 and state["state"]["step"] == 1  # the boundary before the call that was in flight
    with ScriptedServer([act(SUBMIT, "38.4 metres.")]) as srv2:
        meta = resume(run_dir, srv2.url)
    assert meta["stop_reason"] == "budget_spent" and meta["turns"] == 1 and meta["resumes"] == 1, meta["stop_detail"]
    turns, calls = tables(run_dir)
    assert list(calls["step"]) == [1, 2] and list(calls["programs"].iloc[0])[:1] == ["grep"] and list(turns["llm_calls"]) == [2]
    assert meta["llm_calls"] == 2 and meta["answer"].strip() == "38.4 metres."
