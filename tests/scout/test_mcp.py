"""The MCP server over stdio, driven by the SDK's own client: list the tools, call each, errors as MCP errors."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest

from searchbox.corpus.dataroom import builtin_dataroom
from searchbox.tools.catalog import BY_NAME
from tests.fakes.scout_repo import make_repo
from tests.fakes.scripted_server import ScriptedServer

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


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
    ref = scout.structured_content["references"][0]
    assert ref | {"sha256": "", "content": ""} == {"path": "calc.py", "start_line": 9, "end_line": 12, "sha256": "", "content": ""}
    assert ref["content"].startswith("def multiply_numbers(a, b):") and ref["content"].endswith("return result")
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


# ---- hostile clients (issue 20): every request gets a response, and the server logs it ---------------------------------
def raw_exchange(lines: list[bytes], timeout: float = 300.0) -> tuple[list[dict], str]:
    """Write raw lines to a server's stdin (after initialize), read one response per request; (responses, stderr)."""
    import subprocess

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
    body = b"\n".join([json.dumps(init).encode(), b'{"jsonrpc": "2.0", "method": "notifications/initialized"}', *lines]) + b"\n"
    proc = subprocess.run([sys.executable, "-m", "searchbox.mcp", "--dataroom", str(builtin_dataroom()), "--retriever", "bm25",
                           "--policy", "keyword"], input=body, capture_output=True, timeout=timeout, cwd=str(ROOT), env=env)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()], proc.stderr.decode("utf-8", errors="replace")


def test_raw_jsonrpc_lines_each_get_a_response_and_a_log_line():
    call = '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "search_dataroom", "arguments": %s}}'
    lines = [
        (call % (1, '{"query": "gannet \\ud83d rock"}')).encode(),  # a lone surrogate, as a JSON escape
        (call % (2, '{"query": "gannet rock", "k": 1e999}')).encode(),
        b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": 5}',
        b"not json",
        b"[1, 2]",
        (call % (6, '{"query": "gannet \xff rock"}')).encode("latin-1"),  # not UTF-8
        (call % (7, '{"query": ' + "[" * 5000 + "]" * 5000 + "}")).encode(),
        b'{"jsonrpc": "2.0", "id": 8, "method": "no/such/method"}',
        (call % (9, '{"query": "gannet rock", "k": 1}')).encode(),  # still serving after all that
    ]
    responses, err = raw_exchange(lines)
    by_id = {r.get("id"): r for r in responses}
    assert set(by_id) >= {0, 1, 2, 3, 6, 7, 8, 9, None}, responses
    assert by_id[1]["error"]["code"] == -32602 and "lone surrogate" in by_id[1]["error"]["message"]
    assert by_id[2]["result"]["isError"] and "k:" in by_id[2]["result"]["content"][0]["text"]
    assert by_id[3]["error"]["code"] == -32600
    assert sorted(r["error"]["code"] for r in responses if r.get("id") is None) == [-32700, -32600]  # not JSON, a batch
    assert by_id[6]["error"]["code"] == -32700 and "UTF-8" in by_id[6]["error"]["message"]
    assert "error" in by_id[7]
    assert by_id[8]["error"]["code"] == -32601
    assert not by_id[9]["result"].get("isError") and "gannet" in by_id[9]["result"]["content"][0]["text"].lower()
    for rid in (1, 2, 3, 6, 7, 8, 9):
        assert f"searchbox.mcp: response {rid}:" in err, err
    assert "Traceback" not in err


def test_sdk_session_gets_an_error_for_a_lone_surrogate():
    """The official client session over a transport that escapes what it sends (as JSON.stringify does): the SDK's own
    stdio_client refuses to encode a lone surrogate at all, so a client in another language is the one that sends it."""
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    async def run():
        cmd = [sys.executable, "-m", "searchbox.mcp", "--dataroom", str(builtin_dataroom()), "--retriever", "bm25"]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        async with await anyio.open_process(cmd, env=env, cwd=str(ROOT)) as proc:
            to_session, from_server = anyio.create_memory_object_stream(0)
            to_server, from_session = anyio.create_memory_object_stream(0)

            async def pump_out():
                async for msg in from_session:
                    data = msg.message.model_dump(by_alias=True, exclude_unset=True)
                    await proc.stdin.send((json.dumps(data) + "\n").encode())

            async def pump_in():
                buf = b""
                async for chunk in proc.stdout:
                    buf += chunk
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        await to_session.send(SessionMessage(types.jsonrpc_message_adapter.validate_json(line)))

            async with anyio.create_task_group() as tg:
                tg.start_soon(pump_out)
                tg.start_soon(pump_in)
                out = []
                with anyio.fail_after(300):
                    async with ClientSession(from_server, to_server) as session:
                        await session.initialize()
                        for query in ("gannet \ud83d rock", "gannet rock"):
                            try:
                                out.append(await session.call_tool("search_dataroom", {"query": query, "k": 1}))
                            except MCPError as exc:
                                out.append(exc)
                tg.cancel_scope.cancel()
            proc.kill()
            return out

    bad, good = anyio.run(run)
    assert isinstance(bad, MCPError) and "lone surrogate" in str(bad)
    assert not good.is_error and good.structured_content["results"]
