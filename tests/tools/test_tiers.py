"""Isolated retrieval tiers: grep_only and vector_only expose exactly their tools to the model, end to end."""

from __future__ import annotations

import json

import pytest

from searchbox.errors import ConfigError
from searchbox.tools.catalog import BUILTINS, CATALOG, NAMED_TIERS, describe, select, tier_members
from tests.conftest import make_cfg, run_script, tables

DENSE = {"search_dataroom", "answer_question", "embed_texts", "rerank", "similarity", "classify", "cluster", "select_diverse"}


def names(selection) -> set[str]:
    return {s.name for s in select(selection)}


def test_tier_table_members():
    assert names("grep_only") == {"grep", "read", "ls", "write", "edit"}
    assert names("vector_only") == {"search_dataroom", "read", "ls", "write", "edit"}
    # today's meanings stay: built-ins + tier
    assert names("none") == set(BUILTINS)
    assert names("high") == set(BUILTINS) | {"search_dataroom", "answer_question"}
    assert names("all") == {s.name for s in CATALOG}


def test_builtins_are_implicit_only_when_no_builtin_is_chosen():
    assert names(["rerank"]) == set(BUILTINS) | {"rerank"}
    assert names("grep,read,write") == {"grep", "read", "write"}  # naming a built-in makes the list exact
    assert names("grep_only,rerank") == {"grep", "read", "ls", "write", "edit", "rerank"}
    assert names("grep_only,vector_only") == {"grep", "search_dataroom", "read", "ls", "write", "edit"}
    assert [s.name for s in select("vector_only")] == ["read", "ls", "write", "edit", "search_dataroom"]  # catalog order
    with pytest.raises(ConfigError, match="unknown tool 'grep_olny'"):
        select("grep_olny")


def test_one_table_drives_docs_and_members():
    table = describe()
    for tier in NAMED_TIERS:
        assert f"| `{tier.name}` | {', '.join(tier_members(tier.name))} |" in table
    with pytest.raises(ConfigError, match="unknown tier"):
        tier_members("vector")


def _offered(request: dict) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools", [])}


def test_grep_only_run_exposes_no_dense_tool_and_no_bash(tmp_path):
    cfg = make_cfg()
    cfg.tools = "grep_only"
    script = [{"tool_calls": [{"name": "grep", "arguments": {"pattern": "Gannet", "path": "dataroom"}}]},
              {"tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]},
              {"content": "38.4 metres"}]
    meta, srv, run_dir = run_script(tmp_path, script, cfg)
    assert set(meta["tools"]) == {"grep", "read", "ls", "write", "edit"}
    for request in srv.requests:
        offered = _offered(request)
        assert offered == {"grep", "read", "ls", "write", "edit"}
        assert not offered & (DENSE | {"bash", "find"})
    _, calls = tables(run_dir)
    assert list(calls["tool"]) == ["grep", "bash"]
    assert calls["ok"].tolist() == [True, False]  # a model that calls bash anyway reads an error, nothing runs
    assert "unknown tool 'bash'" in calls["error"].iloc[1]


def test_vector_only_json_protocol_prompt_has_no_grep(tmp_path):
    """A model without native tool calls reads the tools in the system prompt: no grep, no bash there."""
    cfg = make_cfg()
    cfg.tools = "vector_only"
    cfg.retrieval.retriever = "bm25"  # tools= composes with retriever=; BM25 needs no embedding model
    script = [{"tool_calls": [{"name": "search_dataroom", "arguments": {"query": "Gannet Rock height", "k": 2}}]},
              {"content": "38.4 metres"}]
    meta, srv, run_dir = run_script(tmp_path, script, cfg, server_kw={"supports_tools": False})
    assert meta["protocol"] == "json"
    system = srv.requests[0]["messages"][0]["content"]
    listed = {line[2:].split("(")[0] for line in system.splitlines() if line.startswith("- ")}
    assert listed == {"search_dataroom", "read", "ls", "write", "edit"}
    schema = json.dumps(srv.requests[0]["response_format"])
    assert '"grep"' not in schema and '"bash"' not in schema and '"search_dataroom"' in schema
    _, calls = tables(run_dir)
    assert calls["tool"].tolist() == ["search_dataroom"] and calls["ok"].all()
    result = next(m for m in srv.requests[1]["messages"] if m["content"].startswith("Result of search_dataroom"))
    assert "gannet-rock-survey.md" in result["content"]  # BM25 found the gold file
