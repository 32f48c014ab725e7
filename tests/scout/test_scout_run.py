"""Scout runs against the scripted server: both protocols, up to three actions per response, statuses and artifacts."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from searchbox.scout.__main__ import main
from searchbox.scout.config import ScoutConfig
from searchbox.scout.loop import run_scout
from tests.fakes.scout_repo import make_repo
from tests.fakes.scripted_server import ScriptedServer


@pytest.fixture
def repo(tmp_path):
    repos, _ = make_repo(tmp_path)
    return repos / "tiny"


def cfg(budget=3, **model):
    c = ScoutConfig(budget=budget)
    c.model.retries = 0
    c.model.backoff_s = 0.01
    for k, v in model.items():
        setattr(c.model, k, v)
    return c


def call(name, **args):
    return {"name": name, "arguments": args}


def trace(run_dir):
    return [json.loads(line) for line in (run_dir / "trace.jsonl").read_text().splitlines()]


def test_native_parallel_calls_complete_with_artifacts(tmp_path, repo):
    script = [{"tool_calls": [call("grep", pattern="def push"), call("read", path="calc.py", start=15, end=21),
                              call("finish", path="calc.py", start=19, end=21)]}]
    with ScriptedServer(script) as srv:
        result = run_scout(cfg(), "Where does the accumulator push?", repo, tmp_path / "run", srv.url)
        request = srv.requests[0]
    assert result.status == "completed" and result.rounds == 1
    assert [r.to_dict()["path"] for r in result.references] == ["calc.py"]
    assert (result.references[0].start_line, result.references[0].end_line) == (19, 21)
    assert request["parallel_tool_calls"] is True and {t["function"]["name"] for t in request["tools"]} == {"files", "grep", "read", "finish", "not_found"}
    run = tmp_path / "run"
    for name in ("run_meta.json", "turns.parquet", "tool_calls.parquet", "trace.jsonl", "scout.json"):
        assert (run / name).exists(), name
    turns, calls = pd.read_parquet(run / "turns.parquet"), pd.read_parquet(run / "tool_calls.parquet")
    assert len(turns) == 1 and turns["ended_by"][0] == "finish" and turns["prompt_tokens"][0] > 0
    assert list(calls["tool"]) == ["grep", "read", "finish"] and calls["ok"].all()
    meta = json.loads((run / "run_meta.json").read_text())
    assert meta["stop_reason"] == "completed" and meta["turns"] == 1 and meta["tokens"]["total"] == result.tokens["total"] > 0
    assert meta["budget_unit"] == "rounds" and meta["protocol"] == "native"
    assert json.loads(meta["answer"])[0]["sha256"] == result.references[0].sha256
    assert trace(run)[-1]["type"] == "stop" and trace(run)[-1]["reason"] == "completed"
    assert json.loads((run / "scout.json").read_text())["status"] == "completed"


def test_json_protocol_array_of_actions(tmp_path, repo):
    script = [{"raw": json.dumps([{"action": "files", "glob": "*.py"}, {"action": "grep", "pattern": "def push"}])},
              {"raw": json.dumps([{"action": "read", "path": "calc.py", "start": 15, "end": 21},
                                  {"action": "finish", "path": "calc.py", "start": 19, "end": 21}])}]
    with ScriptedServer(script, supports_tools=False) as srv:
        result = run_scout(cfg(), "push", repo, tmp_path / "run", srv.url)
        first, second = srv.requests
    assert result.status == "completed" and result.rounds == 2
    schema = first["response_format"]["json_schema"]["schema"]
    assert schema["type"] == "array" and schema["minItems"] == 1 and schema["maxItems"] == 3
    assert {v["properties"]["action"]["const"] for v in schema["items"]["anyOf"]} == {"files", "grep", "read", "finish", "not_found"}
    last_user = second["messages"][-1]
    assert last_user["role"] == "user" and "Result of grep:\ncalc.py:19: " in last_user["content"]
    assert "[round 1 of 3 done; 2 left]" in last_user["content"]
    assert second["messages"][-2] == {"role": "assistant", "content": script[0]["raw"]}


def test_more_than_three_actions_are_ignored(tmp_path, repo):
    script = [{"tool_calls": [call("files"), call("files"), call("files"), call("not_found")]}]
    with ScriptedServer(script) as srv:
        result = run_scout(cfg(budget=1), "q", repo, tmp_path / "run", srv.url)
    calls = pd.read_parquet(tmp_path / "run" / "tool_calls.parquet")
    assert result.status == "budget_exhausted"  # the 4th action (not_found) never ran
    assert list(calls["ok"]) == [True, True, True, False] and "at most 3 actions" in calls["error"][3]


def test_refused_finish_then_budget_exhausted(tmp_path, repo):
    script = [{"tool_calls": [call("finish", path="calc.py", start=1, end=3)]},
              {"tool_calls": [call("read", path="calc.py", start=1, end=5), call("finish", path="calc.py", start=1, end=9)]}]
    with ScriptedServer(script) as srv:
        result = run_scout(cfg(budget=2), "q", repo, tmp_path / "run", srv.url)
        tool_messages = [m for m in srv.requests[1]["messages"] if m["role"] == "tool"]
    assert result.status == "budget_exhausted" and result.references == [] and result.rounds == 2
    assert "you have not read calc.py" in tool_messages[0]["content"]
    assert "[1 round left: finish now" in tool_messages[-1]["content"]
    calls = pd.read_parquet(tmp_path / "run" / "tool_calls.parquet")
    assert "outside the lines you read (1-5)" in calls["error"].iloc[-1]


def test_not_found_abstains(tmp_path, repo):
    with ScriptedServer([{"tool_calls": [call("grep", pattern="divide"), call("not_found")]}]) as srv:
        result = run_scout(cfg(), "divide", repo, tmp_path / "run", srv.url)
    assert result.status == "abstained" and result.rounds == 1 and result.references == []


def test_malformed_reply_gets_feedback(tmp_path, repo):
    script = [{"raw": "I think it is in calc.py"}, {"raw": json.dumps([{"action": "not_found"}])}]
    with ScriptedServer(script, supports_tools=False) as srv:
        result = run_scout(cfg(), "q", repo, tmp_path / "run", srv.url)
        feedback = srv.requests[1]["messages"][-1]["content"]
    assert result.status == "abstained" and result.rounds == 2
    assert feedback.startswith("Error: response is not valid JSON")
    turns = pd.read_parquet(tmp_path / "run" / "turns.parquet")
    assert list(turns["ended_by"]) == ["malformed", "not_found"] and list(turns["malformed"]) == [1, 0]


def test_server_failure_is_model_error_with_logs(tmp_path, repo):
    with ScriptedServer([{"status": 500, "message": "boom"}]) as srv:
        result = run_scout(cfg(), "q", repo, tmp_path / "run", srv.url)
    assert result.status == "model_error" and "boom" in result.detail
    meta = json.loads((tmp_path / "run" / "run_meta.json").read_text())
    assert meta["stop_reason"] == "model_error" and (tmp_path / "run" / "turns.parquet").exists()


def test_cli_json_output(tmp_path, repo, capsys):
    script = [{"tool_calls": [call("read", path="calc.py", start=9, end=12), call("finish", path="calc.py", start=9, end=12)]}]
    with ScriptedServer(script) as srv:
        code = main(["Where are numbers multiplied?", str(repo), "--endpoint", srv.url, "--json", "--out", str(tmp_path / "cli")])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["status"] == "completed" and out["rounds"] == 1 and out["tokens"]["total"] > 0
    assert out["references"] == [{"path": "calc.py", "start_line": 9, "end_line": 12, "sha256": out["references"][0]["sha256"],
                                  "content": "\n".join((repo / "calc.py").read_text().split("\n")[8:12])}]


def test_cli_refuses_bad_input(tmp_path, capsys):
    assert main(["q", str(tmp_path / "missing"), "--policy", "keyword"]) == 2
    assert capsys.readouterr().err.strip() == f"searchbox: repository not found or not a directory: {tmp_path / 'missing'}"
    assert main(["q", str(tmp_path), "--policy", "keyword", "--budget", "0"]) == 2
    assert "budget=0" in capsys.readouterr().err


def test_keyword_policy_needs_no_server(tmp_path, repo):
    result = run_scout(ScoutConfig(policy="keyword"), "Where are two numbers multiplied?", repo, tmp_path / "kw")
    assert result.status == "completed" and result.tokens["total"] == 0
    assert (result.references[0].start_line, result.references[0].end_line) == (9, 12)


def test_long_reads_are_compacted_to_fit_the_context(tmp_path, repo):
    (repo / "long.py").write_text("".join(f"value_{n} = '{'x' * 50}'\n" for n in range(1, 400)))
    reads = [{"tool_calls": [call("read", path="long.py", start=a, end=a + 119)]} for a in (1, 121, 241)]
    script = reads + [{"tool_calls": [call("finish", path="long.py", start=250, end=260)]}]
    with ScriptedServer(script, n_ctx=4000) as srv:  # the fake refuses any prompt over 4000 tokens, as llama-server would
        result = run_scout(cfg(budget=4, context_window=4000), "q", repo, tmp_path / "run", srv.url)
        last = srv.requests[-1]["messages"]
    assert result.status == "completed" and result.references[0].start_line == 250
    assert any(m["role"] == "tool" and m["content"].startswith("[removed to save context") for m in last)
    assert json.loads((tmp_path / "run" / "run_meta.json").read_text())["compactions"] >= 1


@pytest.mark.e2e
def test_real_llama_server_speaks_the_action_array(tmp_path, real_home):
    """llama-server compiles the 1-3 action array schema to a grammar and the bundled model's reply decodes."""
    from searchbox.model import llama
    from searchbox.run.runner import endpoint_for

    if llama.find_server() is None or llama.find_model() is None:
        pytest.skip("embedded default not installed: run `python -m searchbox setup` (.ci/run does)")
    repos, _ = make_repo(tmp_path)
    c = ScoutConfig(budget=1)
    with endpoint_for(c) as url:
        result = run_scout(c, "Where are two numbers multiplied?", repos / "tiny", tmp_path / "run", url)
    turns = pd.read_parquet(tmp_path / "run" / "turns.parquet")
    assert result.status != "model_error", result.detail
    assert list(turns["malformed"]) == [0] and turns["completion_tokens"][0] > 0  # the grammar held
    meta = json.loads((tmp_path / "run" / "run_meta.json").read_text())
    assert meta["protocol"] == "json" and 1 <= meta["tool_calls"] <= 3


# ---- hostile model output (issue 20): every malformed action value is a refused action the model reads -----------------
HOSTILE_ACTIONS = {
    "infinite start": '{"path": "calc.py", "start": 1e999}',
    "infinite end": '{"path": "calc.py", "start": 1, "end": -1e999}',
    "nan start": '{"path": "calc.py", "start": NaN}',
    "huge start": '{"path": "calc.py", "start": ' + "9" * 400 + "}",
    "fractional start": '{"path": "calc.py", "start": 2.5}',
    "lone surrogate path": '{"path": "calc\\ud83d.py"}',
    "nul path": '{"path": "calc\\u0000.py"}',
    "list path": '{"path": ["calc.py"]}',
    "deep path": '{"path": ' + "[" * 50_000 + "]" * 50_000 + "}",
    "long path": '{"path": "' + "a" * 100_000 + '"}',
}


@pytest.mark.parametrize("arguments", HOSTILE_ACTIONS.values(), ids=HOSTILE_ACTIONS.keys())
def test_malformed_action_values_are_refused_actions(tmp_path, repo, arguments, capsys):
    script = [{"tool_calls": [{"name": "read", "arguments": arguments}]}, {"tool_calls": [call("not_found")]}]
    with ScriptedServer(script) as srv:
        code = main(["Where is the accumulator?", str(repo), "--endpoint", srv.url, "--protocol", "native", "--budget", "2",
                     "--out", str(tmp_path / "run")])
        resent = json.dumps(srv.requests[1]["messages"])
    assert code == 0, capsys.readouterr().err
    meta = json.loads((tmp_path / "run" / "run_meta.json").read_text())
    assert meta["stop_reason"] == "abstained" and meta["tool_errors"] == 1 and meta["tool_calls"] == 2
    calls = pd.read_parquet(tmp_path / "run" / "tool_calls.parquet")
    assert list(calls["ok"]) == [False, True] and calls["error"][0]
    assert "Error:" in resent and len(resent) < 60_000  # the model read the refusal; its huge call was not resent whole


@pytest.mark.parametrize("name", [5, "re\ud83dad", None, {"x": 1}], ids=["number", "lone surrogate", "null", "object"])
def test_malformed_action_names_are_refused_actions(tmp_path, repo, name):
    script = [{"tool_calls": [{"name": name, "arguments": "{}"}]}, {"tool_calls": [call("not_found")]}]
    with ScriptedServer(script) as srv:
        result = run_scout(cfg(budget=2, protocol="native"), "Where is the accumulator?", repo, tmp_path / "run", srv.url)
    assert result.status == "abstained"
    meta = json.loads((tmp_path / "run" / "run_meta.json").read_text())
    assert meta["tool_errors"] + meta["malformed_replies"] == 1  # a refused call, or a reply that holds no call
    calls = pd.read_parquet(tmp_path / "run" / "tool_calls.parquet")
    assert calls["ok"].iloc[-1] and all(isinstance(t, str) for t in calls["tool"])


@pytest.mark.parametrize("raw", ['[{"action": "read", "path": "calc.py", "start": 1e999}]', "[" * 100_000, '[{"action": "read", "path": "\\ud83d"}]'],
                         ids=["infinite", "deep", "lone surrogate"])
def test_json_protocol_malformed_values(tmp_path, repo, raw):
    with ScriptedServer([{"raw": raw}, {"raw": '[{"action": "not_found"}]'}]) as srv:
        result = run_scout(cfg(budget=2, protocol="json"), "Where is the accumulator?", repo, tmp_path / "run", srv.url)
    assert result.status == "abstained"
    meta = json.loads((tmp_path / "run" / "run_meta.json").read_text())
    assert meta["tool_errors"] + meta["malformed_replies"] == 1
