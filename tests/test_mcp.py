"""The MCP server over stdio, driven by the SDK's own client: list the tools, call each, errors as MCP errors."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest

from searchbox.dataroom import builtin_dataroom
from searchbox.tools.catalog import BY_NAME
from tests.fakes.scout_repo import make_repo
from tests.fakes.scripted_server import ScriptedServer

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def params(*args: str) -> StdioServerParameters:
    env = {"SEARCHBOX_HOME": os.environ["SEARCHBOX_HOME"], "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return StdioServerParameters(command=sys.executable, args=["-m", "searchbox.mcp", *args], env=env, cwd=str(ROOT))


async def session_calls(server: StdioServerParameters, calls: list[tuple[str, dict]]):
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            results = []
            for name, args in calls:
                try:
                    results.append(await session.call_tool(name, args))
                except MCPError as exc:
                    results.append(exc)
            return tools, results


def test_stdio_server_lists_and_calls_every_tool(tmp_path):
    repos, _ = make_repo(tmp_path)
    script = [{"tool_calls": [{"name": "read", "arguments": {"path": "calc.py", "start": 9, "end": 12}},
                              {"name": "finish", "arguments": {"path": "calc.py", "start": 9, "end": 12}}]}]
    calls = [
        ("search_dataroom", {"query": "Gannet Rock lighthouse height", "k": 2}),
        ("answer_question", {"question": "How tall is the Gannet Rock lighthouse?", "k": 1}),
        ("scout", {"query": "Where are two numbers multiplied?", "budget": 2}),
        ("scout", {"query": "Where are two numbers multiplied?", "policy": "keyword"}),
        ("search_dataroom", {"query": "x", "k": 0}),  # schema violation
        ("search_dataroom", {"query": "x", "paths": ["no/such/folder"]}),  # refused by retrieval
        ("no_such_tool", {}),
    ]
    with ScriptedServer(script) as srv:
        server = params("--dataroom", str(builtin_dataroom()), "--repo", str(repos / "tiny"), "--endpoint", srv.url,
                        "--retriever", "bm25", "--runs", str(tmp_path / "runs"))
        tools, results = anyio.run(session_calls, server, calls)
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {"search_dataroom", "answer_question", "scout"}
    assert by_name["search_dataroom"].input_schema == BY_NAME["search_dataroom"].parameters  # schemas straight from the catalog
    assert by_name["scout"].input_schema["required"] == ["query"]

    search, answer, scout, keyword, bad_k, bad_scope, unknown = results
    assert not search.is_error and len(search.structured_content["results"]) == 2
    assert search.structured_content["results"][0]["path"].startswith("dataroom/")
    assert not answer.is_error and len(answer.structured_content["results"]) == 1
    assert not scout.is_error and scout.structured_content["status"] == "completed"
    assert scout.structured_content["references"][0] | {"sha256": ""} == {"path": "calc.py", "start_line": 9, "end_line": 12, "sha256": ""}
    assert json.loads(scout.content[0].text)["rounds"] == 1
    assert (Path(scout.structured_content["run_dir"]) / "tool_calls.parquet").exists()
    assert not keyword.is_error and keyword.structured_content["tokens"]["total"] == 0
    assert bad_k.is_error and "invalid arguments for search_dataroom: k:" in bad_k.content[0].text
    assert bad_scope.is_error and "no file or folder 'no/such/folder'" in bad_scope.content[0].text
    assert isinstance(unknown, MCPError) and "unknown tool 'no_such_tool'" in str(unknown)


def test_scout_without_repo_is_a_tool_error(tmp_path):
    server = params("--dataroom", str(builtin_dataroom()), "--retriever", "bm25")
    _, (result,) = anyio.run(session_calls, server, [("scout", {"query": "anything", "policy": "keyword"})])
    assert result.is_error and "start the server with --repo DIR" in result.content[0].text


def test_bad_dataroom_is_one_line_exit_2(tmp_path, capsys):
    from searchbox.mcp import main

    assert main(["--dataroom", str(tmp_path / "missing.zip")]) == 2
    assert capsys.readouterr().err.strip().startswith("searchbox: dataroom not found")
