"""Scout against micro-scout's measured settings and interface (issue 32 part 5): the defaults, ignore rules,
trailing-slash globs and src/ lib/ first, the read and source caps, the deadline, loopback endpoints, --trace."""

from __future__ import annotations

import json
import subprocess

import pytest

from searchbox.errors import ConfigError
from searchbox.scout.__main__ import main
from searchbox.scout.config import ExecutorLimits, ScoutConfig, loopback_only
from searchbox.scout.executor import Executor
from searchbox.scout.loop import STATUSES, repo_identity, run_scout
from tests.fakes.scout_repo import make_repo
from tests.fakes.scripted_server import ScriptedServer


@pytest.fixture
def tiny(tmp_path):
    repos, _ = make_repo(tmp_path)
    return repos / "tiny"


def call(name, **args):
    return {"name": name, "arguments": args}


def test_defaults_are_micro_scouts_measured_settings():
    cfg = ScoutConfig()
    lim = cfg.limits
    assert (lim.files_max, lim.grep_max_lines, lim.grep_max_per_file) == (100, 30, 8)
    assert (lim.read_max_lines, lim.read_max_chars, lim.grep_timeout_s, lim.grep_case) == (120, 8000, 3.0, "insensitive")
    assert (cfg.model.max_tokens, cfg.model.seed, cfg.budget, cfg.max_chars, cfg.timeout_s) == (512, 42, 6, 6000, 90.0)
    assert lim.ignore_rules is True and lim.priority_dirs == ["src/", "lib/"]
    # every one of them is in the config a run records (and so in its key)
    recorded = cfg.to_dict()
    assert recorded["limits"]["read_max_chars"] == 8000 and recorded["model"]["seed"] == 42 and recorded["max_chars"] == 6000


def test_each_setting_is_configurable_and_checked():
    ScoutConfig(budget=2, max_chars=100, timeout_s=None, limits=ExecutorLimits(grep_case="smart", files_max=5)).validate()
    for bad, message in [(ScoutConfig(limits=ExecutorLimits(grep_case="loud")), "limits.grep_case='loud'"),
                         (ScoutConfig(limits=ExecutorLimits(read_max_chars=0)), "limits.read_max_chars=0"),
                         (ScoutConfig(max_chars=0), "max_chars=0"), (ScoutConfig(timeout_s=-1), "timeout_s=-1")]:
        with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
            bad.validate()


def _layout(root):
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "lib").mkdir()
    (root / "aaa").mkdir()
    (root / "build").mkdir()
    (root / "aaa" / "first.py").write_text("def needle():\n    pass\n")
    (root / "src" / "pkg" / "core.py").write_text("def needle():\n    return 1\n")
    (root / "lib" / "helpers.py").write_text("NEEDLE = 2\n")
    (root / "build" / "generated.py").write_text("def needle_generated():\n    pass\n")
    (root / "secret.log").write_text("needle in the log\n")
    (root / ".gitignore").write_text("build/\n*.log\n")
    return root


def test_ignore_rules_govern_discovery_but_named_files_still_read(tmp_path):
    root = _layout(tmp_path / "repo")  # no .git: the repository's own .gitignore still applies
    ex = Executor(root)
    listed = ex.execute("files").data
    assert "build/generated.py" not in listed and "secret.log" not in listed and "aaa/first.py" in listed
    # a positive glob overrides ignore rules inside ripgrep; discovery must not show them all the same
    assert ex.execute("files", {"glob": "*.py"}).data == ["src/pkg/core.py", "lib/helpers.py", "aaa/first.py"]
    assert ex.execute("files", {"glob": "build/"}).data == []
    grep = ex.execute("grep", {"pattern": "needle", "glob": "*"}).data
    assert {m.path for m in grep} == {"src/pkg/core.py", "lib/helpers.py", "aaa/first.py"}
    assert {m.path for m in ex.execute("grep", {"pattern": "needle", "glob": "*.log"}).data} == set()
    # an explicitly named ignored file may still be read and cited: ignore rules are not access control
    read = ex.execute("read", {"path": "build/generated.py"})
    assert read.ok and "needle_generated" in read.text
    assert ex.execute("finish", {"path": "build/generated.py", "start": 1, "end": 2}).ok
    # with the rules off (an explicit choice) discovery sees everything again
    assert "build/generated.py" in Executor(root, ExecutorLimits(ignore_rules=False)).execute("files").data


def test_the_inventory_a_glob_is_checked_against_is_not_cut_by_the_output_cap(tmp_path):
    root = tmp_path / "repo"
    (root / "a").mkdir(parents=True)
    for i in range(50):
        (root / "a" / f"m{i:03d}.py").write_text("x = 1\n")
    (root / "z.py").write_text("needle = 1\n")
    ex = Executor(root, ExecutorLimits(grep_output_bytes=64))  # far less than the 50 paths listed before z.py
    assert ex.execute("files", {"glob": "z.py"}).data == ["z.py"]
    assert [m.path for m in ex.execute("grep", {"pattern": "needle", "glob": "z.py"}).data] == ["z.py"]


def test_ignore_rules_of_a_parent_folder_do_not_apply(tmp_path):
    (tmp_path / ".gitignore").write_text("repo/\n")
    root = _layout(tmp_path / "repo")
    assert "src/pkg/core.py" in Executor(root).execute("files").data


def test_ignore_file_is_part_of_the_repository_identity(tmp_path):
    root = _layout(tmp_path / "repo")
    before = repo_identity(root)["sha256"]
    (root / ".gitignore").write_text("build/\n")
    assert repo_identity(root)["sha256"] != before


def test_trailing_slash_glob_matches_everything_under_the_folder(tmp_path):
    root = _layout(tmp_path / "repo")
    ex = Executor(root)
    assert ex.execute("files", {"glob": "src/"}).data == ["src/pkg/core.py"]
    assert [m.path for m in ex.execute("grep", {"pattern": "needle", "glob": "src/"}).data] == ["src/pkg/core.py"]


def test_src_and_lib_come_first_and_files_are_capped_at_100(tmp_path):
    root = tmp_path / "repo"
    (root / "a").mkdir(parents=True)
    (root / "src").mkdir()
    for i in range(120):
        (root / "a" / f"m{i:03d}.py").write_text("x = 1\n")
    (root / "src" / "z.py").write_text("x = 1\n")
    res = Executor(root).execute("files")
    assert res.paths[0] == "src/z.py" and len(res.paths) == 100 and "[21 more files" in res.text


def test_grep_is_case_insensitive_30_in_all_8_per_file(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    for i in range(6):
        (root / f"f{i}.py").write_text("".join(f"TOKEN {n}\n" for n in range(20)))
    res = Executor(root).execute("grep", {"pattern": "token"})
    per_file = {p: sum(m.path == p for m in res.data) for p in {m.path for m in res.data}}
    assert len(res.data) == 48 and set(per_file.values()) == {8}  # ripgrep stops at 8 per file
    assert len([ln for ln in res.text.splitlines() if ": TOKEN" in ln]) == 30 and "[18 more matching lines" in res.text
    assert Executor(root, ExecutorLimits(grep_case="sensitive")).execute("grep", {"pattern": "token"}).data == []


def test_read_stops_near_8000_characters_and_only_shown_lines_count(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    (root / "wide.py").write_text("".join(f"# {n:03d} " + "x" * 190 + "\n" for n in range(1, 101)))
    ex = Executor(root)
    res = ex.execute("read", {"path": "wide.py", "start": 1, "end": 100})
    shown = [ln for ln in res.text.splitlines() if ln.lstrip()[:1].isdigit()]
    assert sum(len(ln) + 1 for ln in shown) <= 8000 < sum(len(ln) + 1 for ln in shown) + 210
    last = res.data[2]
    assert last == len(shown) < 100 and f"read on with start={last + 1}" in res.text
    assert not ex.execute("finish", {"path": "wide.py", "start": 1, "end": last + 1}).ok
    assert ex.execute("finish", {"path": "wide.py", "start": 1, "end": last}).ok


def test_max_chars_bounds_the_cited_source_and_references_carry_it(tiny):
    ex = Executor(tiny, max_chars=60)
    ex.execute("read", {"path": "calc.py", "start": 1, "end": 21})
    refused = ex.execute("finish", {"path": "calc.py", "start": 9, "end": 12})
    assert not refused.ok and "max_chars" in refused.error and "cite a shorter range" in refused.error
    ok = ex.execute("finish", {"path": "calc.py", "start": 9, "end": 9})
    assert ok.ok and ok.data.content == "def multiply_numbers(a, b):" and ok.data.to_dict()["content"] == ok.data.content


def test_deadline_ends_the_search_as_budget_exhausted(tmp_path, tiny):
    cfg = ScoutConfig(budget=5, timeout_s=1.0)
    cfg.model.retries = 0
    script = [{"sleep": 3.0, "tool_calls": [call("files", glob="*.py")]}]
    with ScriptedServer(script * 5) as srv:
        result = run_scout(cfg, "Where are numbers multiplied?", tiny, tmp_path / "run", srv.url)
    assert result.status == "budget_exhausted" and "deadline of 1 s" in result.detail
    meta = json.loads((tmp_path / "run" / "run_meta.json").read_text())
    assert meta["stop_reason"] == "budget_exhausted" and meta["config"]["timeout_s"] == 1.0


@pytest.mark.parametrize("script,status", [
    ([{"tool_calls": [call("read", path="calc.py", start=9, end=12), call("finish", path="calc.py", start=9, end=12)]}], "completed"),
    ([{"tool_calls": [call("not_found")]}], "abstained"),
    ([{"tool_calls": [call("files", glob="src/")]}] * 2, "budget_exhausted"),
    ([{"status": 500, "body": "boom"}] * 3, "model_error"),
])
def test_statuses_are_micro_scouts_four(tmp_path, tiny, script, status):
    cfg = ScoutConfig(budget=2)
    cfg.model.retries = 0
    with ScriptedServer(script) as srv:
        result = run_scout(cfg, "Where are numbers multiplied?", tiny, tmp_path / "run", srv.url)
    assert result.status == status and result.status in STATUSES == ("completed", "abstained", "budget_exhausted", "model_error")


@pytest.mark.parametrize("url", ["http://10.1.2.3:8080", "https://api.example.com/v1", "http://0.0.0.0:8080", "ftp://127.0.0.1/"])
def test_endpoint_must_be_loopback(tmp_path, tiny, url, capsys):
    assert main(["q", str(tiny), "--endpoint", url, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--endpoint" in err and "Traceback" not in err
    for ok in ("http://127.0.0.1:8080", "http://localhost:1/v1", "http://[::1]:8080", "http://127.3.4.5"):
        assert loopback_only(ok) == ok


def test_llama_url_elsewhere_is_refused_too(tmp_path, tiny, capsys, monkeypatch):
    monkeypatch.setenv("LLAMA_URL", "http://192.168.1.20:8080")
    assert main(["q", str(tiny), "--out", str(tmp_path / "r")]) == 2
    assert "$LLAMA_URL http://192.168.1.20:8080: scout only talks to a model on this machine" in capsys.readouterr().err


def test_cli_flags_trace_timeout_context_max_chars(tmp_path, tiny, capsys):
    script = [{"tool_calls": [call("read", path="calc.py", start=9, end=12), call("finish", path="calc.py", start=9, end=12)]}]
    with ScriptedServer(script) as srv:
        code = main(["Where are numbers multiplied?", str(tiny), "--endpoint", srv.url, "--json", "--out", str(tmp_path / "run"),
                     "--trace", str(tmp_path / "t" / "trace.json"), "--timeout", "30", "--context", "4096", "--max-chars", "500",
                     "--max-rounds", "3"])
        request = srv.requests[0]
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["status"] == "completed" and out["references"][0]["content"].startswith("def multiply_numbers")
    assert request["max_tokens"] == 512 and request["seed"] == 42
    meta = json.loads((tmp_path / "run" / "run_meta.json").read_text())
    assert meta["context_window"] == 4096 and meta["budget"] == 3
    assert meta["config"]["max_chars"] == 500 and meta["config"]["timeout_s"] == 30.0
    doc = json.loads((tmp_path / "t" / "trace.json").read_text())
    assert doc["query"] == "Where are numbers multiplied?" and doc["result"]["status"] == "completed"
    assert doc["settings"]["max_chars"] == 500 and doc["events"][-1]["type"] == "stop"
    assert any(e.get("type") == "tool_call" or "tool" in json.dumps(e) for e in doc["events"])
    # no --trace, no trace file anywhere but the run's own trace.jsonl
    assert main(["q", str(tiny), "--policy", "keyword", "--out", str(tmp_path / "k")]) == 0
    assert not (tmp_path / "k" / "trace.json").exists()


def test_mcp_scout_takes_max_chars(tmp_path, tiny):
    from searchbox.config import RetrievalConfig
    from searchbox.mcp import Backend, ToolFailure, tool_specs

    spec = next(s for s in tool_specs() if s.name == "scout")
    assert spec.parameters["properties"]["max_chars"]["type"] == "integer"
    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "a.md").write_text("hello\n")
    backend = Backend(str(corpus), tiny, RetrievalConfig(retriever="bm25"), ScoutConfig(policy="keyword"), None, tmp_path / "runs")
    try:
        wide = backend.call("scout", {"query": "Where are numbers multiplied? multiply_numbers"})
        narrow = backend.call("scout", {"query": "Where are numbers multiplied? multiply_numbers", "max_chars": 10})
        with pytest.raises(ToolFailure, match="max_chars"):
            backend.call("scout", {"query": "x", "max_chars": 0})
    finally:
        backend.close()
    assert wide["status"] == "completed" and sum(len(r["content"]) for r in wide["references"]) > 10
    assert narrow["status"] != "completed" and not narrow["references"]


def test_mcp_refuses_an_endpoint_elsewhere(tmp_path, tiny):
    from searchbox.config import RetrievalConfig
    from searchbox.mcp import Backend

    with pytest.raises(ConfigError, match="only talks to a model on this machine"):
        Backend(None, tiny, RetrievalConfig(), ScoutConfig(), "http://203.0.113.5:8080", tmp_path / "runs")


def test_rg_is_available():
    assert subprocess.run(["rg", "--version"], capture_output=True).returncode == 0


def test_sweep_schema_starts_from_the_same_defaults_and_bad_flags_are_one_line(tmp_path, tiny, capsys):
    from searchbox.scout.sweep import ScoutSweepConfig

    swept, plain = ScoutSweepConfig().scout_config().to_dict(), ScoutConfig().to_dict()
    for key in ("budget", "max_chars", "timeout_s", "limits"):
        assert swept[key] == plain[key], key
    assert swept["model"]["seed"] == 42 and swept["model"]["max_tokens"] == 512
    for flags, message in [(["--timeout", "0"], "timeout_s=0"), (["--max-chars", "0"], "max_chars=0"), (["--context", "10"], "context_window=10")]:
        assert main(["q", str(tiny), "--policy", "keyword", "--out", str(tmp_path / "r"), *flags]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err
