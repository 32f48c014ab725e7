"""Pause and resume continue the same run: same turn rows and token sums as a run straight through."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from searchbox.errors import SearchboxError
from searchbox.run.runner import execute, resume
from tests.conftest import kill_during_call, make_cfg, tables, trace
from tests.fakes.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]
READ = {"tool_calls": [{"name": "read", "arguments": {"path": "dataroom/reports/gannet-rock-survey.md"}}]}
GREP = {"tool_calls": [{"name": "grep", "arguments": {"pattern": "metres"}}]}
SCRIPT = [READ, {"content": "one"}, GREP, {"content": "two"}, READ, GREP, {"content": "three"}, {"content": "four"}]
SAME = ["turn", "prompt_tokens", "completion_tokens", "cached_tokens", "prompt_tokens_cum", "completion_tokens_cum",
        "cached_tokens_cum", "tool_calls", "llm_calls", "ended_by", "answer_chars"]


def _turns_done(run_dir: Path, n: int):
    def pause() -> bool:
        path = run_dir / "turns.parquet"
        return path.exists() and len(pd.read_parquet(path)) >= n
    return pause


def _straight(tmp_path):
    with ScriptedServer(list(SCRIPT)) as srv:
        meta = execute(make_cfg(budget=4), "How tall?", None, tmp_path / "straight", srv.url)
    return meta, tables(tmp_path / "straight")


def test_paused_after_turn_two_and_resumed_to_four_equals_straight_run(tmp_path):
    straight, (s_turns, s_calls) = _straight(tmp_path)
    run_dir = tmp_path / "paused"
    with ScriptedServer(list(SCRIPT)) as srv:
        paused = execute(make_cfg(budget=4), "How tall?", None, run_dir, srv.url, should_pause=_turns_done(run_dir, 2))
        assert paused["stop_reason"] == "paused" and paused["turns"] == 2
        resumed = resume(run_dir, srv.url, budget=4)
    turns, calls = tables(run_dir)
    assert resumed["stop_reason"] == "budget_spent" and resumed["run_id"] == paused["run_id"] and resumed["resumes"] == 1
    pd.testing.assert_frame_equal(turns[SAME], s_turns[SAME])
    assert list(calls["tool"]) == list(s_calls["tool"])
    assert resumed["tokens"] == straight["tokens"] and resumed["turns"] == straight["turns"] == 4
    assert [e["type"] for e in trace(run_dir)].count("resume") == 1


def test_budget_extension_continues_a_finished_run(tmp_path):
    straight, (s_turns, _) = _straight(tmp_path)
    run_dir = tmp_path / "short"
    with ScriptedServer(list(SCRIPT)) as srv:
        first = execute(make_cfg(budget=2), "How tall?", None, run_dir, srv.url)
        assert first["stop_reason"] == "budget_spent"
        with pytest.raises(SearchboxError, match="budget above 2"):
            resume(run_dir, srv.url)
        resumed = resume(run_dir, srv.url, budget=4)
    turns, _ = tables(run_dir)
    pd.testing.assert_frame_equal(turns[SAME], s_turns[SAME])
    assert resumed["tokens"] == straight["tokens"]


def test_pause_mid_turn_resumes_the_same_turn(tmp_path):
    straight, (s_turns, _) = _straight(tmp_path)
    run_dir = tmp_path / "mid"
    calls_seen = []

    def pause_after_third_call() -> bool:
        path = run_dir / "trace.jsonl"
        n = sum(1 for line in path.read_text().splitlines() if '"role": "tool"' in line) if path.exists() else 0
        calls_seen.append(n)
        return n >= 3  # inside turn 3: after its READ, before its GREP

    with ScriptedServer(list(SCRIPT)) as srv:
        paused = execute(make_cfg(budget=4), "How tall?", None, run_dir, srv.url, should_pause=pause_after_third_call)
        assert paused["stop_reason"] == "paused" and paused["turns"] == 3
        assert len(tables(run_dir)[0]) == 2  # the unfinished turn has no row yet
        resumed = resume(run_dir, srv.url)
    turns, _ = tables(run_dir)
    pd.testing.assert_frame_equal(turns[SAME], s_turns[SAME])
    assert resumed["tokens"] == straight["tokens"]


def test_interrupted_run_resumes_from_its_last_step(tmp_path):
    run_dir = tmp_path / "int"
    state = {"n": 0}

    def interrupt() -> bool:
        state["n"] += 1
        if state["n"] == 4:
            raise KeyboardInterrupt
        return False

    straight, (s_turns, _) = _straight(tmp_path)
    with ScriptedServer(list(SCRIPT)) as srv:
        cut = execute(make_cfg(budget=4), "How tall?", None, run_dir, srv.url, should_pause=interrupt)
        assert cut["stop_reason"] == "interrupted"
        resumed = resume(run_dir, srv.url)
    turns, _ = tables(run_dir)
    pd.testing.assert_frame_equal(turns[SAME], s_turns[SAME])
    assert resumed["stop_reason"] == "budget_spent"


def _cli(*args, url):
    env = {**os.environ, "LLAMA_URL": url}
    return subprocess.run([sys.executable, "-m", "searchbox.run", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_cli_out_must_be_new_unless_resume_or_overwrite(tmp_path):
    out = tmp_path / "out"
    with ScriptedServer([{"content": "a"}, {"content": "b"}, {"content": "c"}]) as srv:
        first = _cli("How tall?", "--out", str(out), "--budget", "1", url=srv.url)
        assert first.returncode == 0, first.stderr
        again = _cli("How tall?", "--out", str(out), url=srv.url)
        assert again.returncode == 2 and again.stderr.count("\n") == 1 and "not empty" in again.stderr
        more = _cli("--resume", str(out), "--budget", "2", url=srv.url)
        assert more.returncode == 0, more.stderr
        assert json.loads((out / "run_meta.json").read_text())["turns"] == 2
        fresh = _cli("How tall?", "--out", str(out), "--overwrite", url=srv.url)
        assert fresh.returncode == 0, fresh.stderr
        assert json.loads((out / "run_meta.json").read_text())["turns"] == 1


# ---- the loop's state: one object, checkpointed whole ---------------------------------------------
def _filled(cls, counter):
    """An instance of a state dataclass with every field set to a value unlike its default (introspected, so new fields count)."""
    import dataclasses
    import typing

    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        if f.metadata.get("transient"):
            continue
        counter[0] += 1
        n, tp = counter[0], hints[f.name]
        if typing.get_origin(tp) is typing.Union:
            tp = next(a for a in typing.get_args(tp) if a is not type(None))
        if dataclasses.is_dataclass(tp):
            values[f.name] = _filled(tp, counter)
        elif tp is bool:
            values[f.name] = True
        elif tp is int:
            values[f.name] = 1000 + n
        elif tp is float:
            values[f.name] = 0.5 + n
        elif tp is str:
            values[f.name] = f"value-{n}"
        elif tp is list:
            values[f.name] = [{"role": "user", "content": f"m{n}", "data": {"k": [n, "\ud83d"]}}, n]
        else:
            values[f.name] = {"any": [n, f"v{n}"]}
    return cls(**values)


def test_every_field_of_the_loop_state_survives_a_checkpoint(monkeypatch):
    import dataclasses

    from searchbox.harness.agent import LoopState
    from searchbox.harness import accounting
    from searchbox.harness.state import dump, load

    monkeypatch.setattr(accounting.time, "monotonic", lambda: 1000.0)  # clocks read the same before and after
    state = _filled(LoopState, [0])
    defaults = dump(LoopState())
    dumped = dump(state)

    def leaves(d, prefix=""):
        for k, v in d.items():
            if isinstance(v, dict) and k not in ("last_call",) and not prefix.endswith("last_call"):
                yield from leaves(v, f"{prefix}{k}.")
            else:
                yield f"{prefix}{k}", v

    filled, empty = dict(leaves(dumped)), dict(leaves({k: v for k, v in defaults.items()}))
    assert all(filled[k] != empty.get(k) for k in filled), [k for k in filled if filled[k] == empty.get(k)]
    restored = load(LoopState, json.loads(json.dumps(dumped)))
    assert dump(restored) == dumped
    assert restored.ledger.turn is not None and restored.ledger.turn.clock.elapsed() == state.ledger.turn.clock.elapsed()
    assert dataclasses.fields(restored) == dataclasses.fields(state)


def test_a_checkpoint_of_another_shape_is_refused():
    from searchbox.harness.agent import LoopState, restore
    from searchbox.harness.state import dump

    good = {"harness": "native", "version": 2, "loop": dump(LoopState())}
    assert restore(good).turn == 0
    with pytest.raises(SearchboxError, match="unknown fields"):
        restore({**good, "loop": {**good["loop"], "surprise": 1}})
    with pytest.raises(SearchboxError, match="lacks"):
        restore({**good, "loop": {k: v for k, v in good["loop"].items() if k != "continues"}})
    with pytest.raises(SearchboxError, match="version 7"):
        restore({**good, "version": 7})


def test_a_version_1_checkpoint_is_upgraded():
    from searchbox.harness.agent import restore

    v1 = {"version": 1, "protocol": "json", "turn": 2, "step": 3, "repeats": 1, "last_call": [["ls", "{}"]],
          "messages": [{"role": "system", "content": "s"}], "turn_starts": [1, 4],
          "stats": {"usage": {"prompt": 5, "completion": 1, "cached": 0, "estimated": False}, "llm_calls": 2, "llm_s": 0.1,
                    "tool_s": 0.2, "setup_s": 0.0, "tool_calls": 1, "malformed": 0, "estimated_calls": 0, "compactions": 0,
                    "context_tokens": 6, "elapsed_before": 3.5, "ended_by": ""},
          "total": {"prompt": 50, "completion": 9, "cached": 4, "estimated": False},
          "cum": {"usage": {}, "llm_calls": 4, "llm_s": 1.0, "tool_s": 0.5, "setup_s": 0.1, "tool_calls": 3, "malformed": 1,
                  "estimated_calls": 0, "compactions": 0, "context_tokens": 0, "elapsed_before": 0.0, "ended_by": ""},
          "elapsed_s": 12.0, "tokens_per_char": 0.3, "continues": 1, "compactions": 0, "backstop_text": None,
          "last_snapshot": "a", "answer_source": "backstop", "turns_recorded": 1, "calls_recorded": 3, "delivered": 2}
    state = restore(v1)
    assert (state.protocol, state.turn, state.step, state.tools.delivered, state.ledger.total.prompt) == ("json", 2, 3, 2, 50)
    assert state.ledger.turn.llm_calls == 2 and state.ledger.cum.malformed == 1 and state.ledger.clock.before == 12.0


def test_resume_with_file_delivery_and_a_token_budget_equals_a_straight_run(tmp_path):
    """More of the state in play (delivered-result numbering, estimated usage, the token budget) across a pause."""
    grep = {"tool_calls": [{"name": "grep", "arguments": {"pattern": "metres", "path": "dataroom"}}]}
    script = [grep, {"content": "one", "no_usage": True}, grep, {"content": "two"}, grep, {"content": "three"}] + [{"content": "x"}] * 10
    cfg = lambda: make_cfg(budget=6000, budget_unit="tokens", delivery="file", max_turns=8)  # noqa: E731
    with ScriptedServer(list(script)) as srv:
        straight = execute(cfg(), "How tall?", None, tmp_path / "straight", srv.url)
    run_dir = tmp_path / "paused"
    with ScriptedServer(list(script)) as srv:
        paused = execute(cfg(), "How tall?", None, run_dir, srv.url, should_pause=_turns_done(run_dir, 2))
        assert paused["stop_reason"] == "paused"
        resumed = resume(run_dir, srv.url)
    assert resumed["stop_reason"] == straight["stop_reason"] == "token_budget_spent"
    assert resumed["tokens"] == straight["tokens"] and resumed["tokens"]["estimated_calls"] == 1
    assert sorted(p.name for p in (run_dir / "work" / "results").iterdir()) == \
        sorted(p.name for p in (tmp_path / "straight" / "work" / "results").iterdir())
    pd.testing.assert_frame_equal(tables(run_dir)[0][SAME], tables(tmp_path / "straight")[0][SAME])


def test_a_native_run_killed_mid_turn_keeps_the_rows_of_the_steps_before(tmp_path):
    """SIGKILL while a model call is in flight (no stop handler runs): the rows of the turn's earlier steps were only in
    memory, so a resume had a record saying tool_calls=1 over an empty tool_calls.parquet. A checkpoint now writes the
    tables before the state, so what the state counts is on disk."""
    run_dir = tmp_path / "run"
    with ScriptedServer([GREP, {"sleep": 60.0, "content": "late"}]) as srv:
        kill_during_call("from tests.conftest import make_cfg; from searchbox.run.runner import execute; "
                         f"execute(make_cfg(budget=1), 'How tall?', None, {str(run_dir)!r}, {srv.url!r})", srv)
    _, calls = tables(run_dir)
    assert list(calls["tool"]) == ["grep"]  # on disk at the kill: the step before the call in flight
    with ScriptedServer([{"content": "38.4 metres."}]) as srv2:
        meta = resume(run_dir, srv2.url)
    turns, calls = tables(run_dir)
    assert meta["stop_reason"] == "budget_spent" and meta["tool_calls"] == 1 == len(calls) and list(calls["tool"]) == ["grep"]
    assert list(turns["tool_calls"]) == [1]
