"""The harness seam: the kinds registry, harness.kind in config and key, and the accounting a second harness reuses."""

from __future__ import annotations

import subprocess
import sys

import pytest

from searchbox import harness as harnesses
from searchbox.config import RunConfig
from searchbox.errors import ConfigError
from searchbox.harness.accounting import Accountant, Ledger
from searchbox.harness.base import EndTurn, Harness, RunContext, Stop
from searchbox.model.llm import DeadlineExceeded, Response, Usage
from tests.conftest import make_cfg, run_script
from tests.fakes.scripted_server import ScriptedServer


def test_kinds_are_registered_and_validated():
    assert "native" in harnesses.kinds()
    native = harnesses.load("native")
    assert isinstance(native, Harness) and native.kind == "native" and native.identity(RunConfig()) == {}
    with pytest.raises(ConfigError, match="harness.kind='telepathy'"):
        harnesses.load("telepathy")
    cfg = RunConfig()
    cfg.harness.kind = "telepathy"
    with pytest.raises(ConfigError, match="harness.kind='telepathy': expected one of native"):
        cfg.validate()


def test_the_kind_is_part_of_what_names_a_run():
    assert RunConfig().semantic()["harness"]["kind"] == "native"


@pytest.mark.parametrize("kind", ["pi", "claude-code", "codex"])
def test_every_agent_refuses_the_json_protocol_it_would_never_send(kind):
    """An agent calls tools the server's own way: model.protocol=json would key its runs by a prompt and a grammar it
    never sends. Pi once took it silently; the refusal is one rule for every agent, before the install is looked at."""
    cfg = RunConfig()
    cfg.harness.kind, cfg.model.protocol = kind, "json"
    with pytest.raises(ConfigError, match=f"harness={kind} .*model.protocol='json' runs under harness=native") as info:
        harnesses.load(kind).check(cfg)
    assert "\n" not in str(info.value)


def test_a_second_harness_plugs_in_through_the_registry(tmp_path, monkeypatch):
    """A harness running its own loop gets the same RunContext and leaves the same record: here, one that answers at once."""
    calls = []

    class Instant(Harness):
        kind = "instant"

        def run(self, ctx: RunContext) -> None:
            calls.append(ctx)
            (ctx.workspace.work / "ANSWER.md").write_text("38.4 metres\n")
            ctx.record.stop_reason, ctx.record.turns = "budget_spent", 1

        def resume(self, ctx: RunContext, checkpoint: dict) -> None:
            raise AssertionError("not resumed here")

    monkeypatch.setitem(harnesses.KINDS, "instant", f"{__name__}:Instant")
    globals()["Instant"] = Instant
    cfg = make_cfg()
    cfg.harness.kind = "instant"
    meta, srv, run_dir = run_script(tmp_path, [], cfg)
    assert meta["stop_reason"] == "budget_spent" and meta["answer"].strip() == "38.4 metres" and meta["status"] == "complete"
    ctx = calls[0]
    assert ctx.question == "How tall is Gannet Rock?" and ctx.context_window == 8192 and ctx.config.harness.kind == "instant"
    assert meta["config"]["harness"]["kind"] == "instant" and not srv.requests


class _Client:
    """A chat client stand-in for a forwarder's view: returns canned responses, or misses its deadline."""

    def __init__(self, responses):
        self.responses = list(responses)
        self.deadlines = []

    def chat(self, payload, deadline=None):
        self.deadlines.append(deadline)
        item = self.responses.pop(0)
        if isinstance(item, Exception):
            raise item
        return item


def test_accounting_serves_a_forwarder_exactly_as_the_loop():
    """What a Pi channel would do per forwarded request: deadlines, usage (estimated and marked), budget, stop reasons."""
    h = make_cfg(budget=80, budget_unit="tokens", turn_ceiling_s=60.0, run_ceiling_s=600.0).harness
    acct = Accountant(h, Ledger())
    acct.begin_turn()
    payload = {"messages": [{"role": "user", "content": "x" * 300}]}
    billed = Response({"role": "assistant", "content": "hi"}, Usage(40, 5, 10), 0.2)
    unbilled = Response({"role": "assistant", "content": "y" * 90}, Usage(estimated=True), 0.1)
    client = _Client([billed, unbilled, DeadlineExceeded("turn deadline")])
    acct.account(acct.chat(client, payload), payload)
    assert client.deadlines[0] is not None  # every forwarded call carries the run's or the turn's deadline
    acct.check_token_budget()  # 45 < 80
    usage = acct.account(acct.chat(client, payload), payload)
    assert usage.estimated and usage.prompt > 0 and usage.completion >= 1
    ledger = acct.ledger
    assert ledger.turn.llm_calls == 2 and ledger.turn.estimated_calls == 1 and ledger.total.prompt == 40 + usage.prompt
    with pytest.raises(EndTurn):  # the turn's deadline is the binding one: the turn ends, the run goes on
        acct.chat(client, payload)
    with pytest.raises(Stop) as stop:
        acct.check_token_budget()
    assert stop.value.reason == "token_budget_spent"
    stats = acct.end_turn()
    assert ledger.turn is None and ledger.cum.llm_calls == 2 and stats.usage.prompt == ledger.total.prompt
    with pytest.raises(Stop) as stop:
        acct.check_budget_after_turn(1)
    assert stop.value.reason == "token_budget_spent"


def test_run_cli_takes_a_harness(tmp_path):
    with ScriptedServer([{"content": "x"}]) as srv:
        ok = subprocess.run([sys.executable, "-m", "searchbox.run", "q?", "--harness", "native", "--out", str(tmp_path / "r"),
                             "--endpoint", srv.url], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([sys.executable, "-m", "searchbox.run", "q?", "--harness", "telepathy", "--out", str(tmp_path / "s"),
                          "--endpoint", "http://127.0.0.1:9"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--harness" in bad.stderr and not (tmp_path / "s").exists()


def test_a_tool_results_data_is_not_counted_as_sent():
    """`data` rides on the trace for programs and is never sent: the context estimate must not count it (a 12 KB
    listing's data once made an 8K window look full, and runs stopped as context_exhausted)."""
    from searchbox.harness.accounting import sent_chars

    text = {"role": "tool", "tool_call_id": "c1", "name": "ls", "content": "a.md\t10"}
    with_data = {**text, "data": {"entries": [{"name": f"f{i}.md", "size": i} for i in range(2000)]}}
    assert sent_chars({"messages": [with_data]}) == sent_chars({"messages": [text]})


def test_one_stop_rule_for_every_harness_a_model_error_past_the_ceiling_is_the_ceiling_only_once_it_answered():
    # Accountant.stop_of: the native loop and mini-swe-agent read it so, the agent CLIs (their run and their channel)
    # called a run past its ceiling ceiling_seconds (a result, counted) even when the model never answered in it.
    from searchbox.errors import ModelError
    from searchbox.harness.accounting import Clock

    h = make_cfg(budget=2, run_ceiling_s=1.0).harness
    acct = Accountant(h, Ledger(clock=Clock(before=5.0)))  # five seconds into a one-second ceiling
    acct.begin_turn()
    assert acct.run_over() and acct.stop_of(ModelError("HTTP 500: boom"))[0] == "model_error"
    acct.ledger.turn.llm_calls = 1  # the model answered in this turn
    assert acct.stop_of(ModelError("HTTP 500: boom")) == ("ceiling_seconds", "HTTP 500: boom")
    within = Accountant(make_cfg(budget=2, run_ceiling_s=600.0).harness, Ledger())
    assert within.stop_of(ModelError("HTTP 500: boom"))[0] == "model_error"
    assert within.stop_of(Stop("paused")) == ("paused", "")


def test_a_reply_after_the_turn_closed_is_never_the_backstops_answer_under_any_agent():
    """The backstop writes the model's last own words; a reply that came after the turn closed (a stop first, the agent
    killed or gone) is billed but never read, as under the native loop, where a call past its deadline gives no reply.
    Pi and Claude Code once took such a reply as the answer, Codex not: now one rule, which no agent overrides."""
    from types import SimpleNamespace

    from searchbox.harness.claudecode.loop import ClaudeCodeRun
    from searchbox.harness.cli_channel import ChannelSide
    from searchbox.harness.codex.loop import CodexRun
    from searchbox.harness.pi.loop import PiRun

    assert PiRun._note_words is ClaudeCodeRun._note_words is CodexRun._note_words is ChannelSide._note_words
    run = SimpleNamespace(open=True, s=SimpleNamespace(last_text=""))
    ChannelSide._note_words(run, "It is 38.4 metres tall.")
    run.open = False
    ChannelSide._note_words(run, "A late reply nobody received.")
    assert run.s.last_text == "It is 38.4 metres tall."
