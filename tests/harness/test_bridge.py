"""The MCP bridge (harness/bridge/mcp.mjs): the channel's tools as an MCP stdio server, read by the official MCP SDK's
client, and the channel's extra routes (Routes.more) with named server-sent events. No agent needed, only node."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from searchbox.harness import channel as ch

BRIDGE = Path(ch.__file__).parent / "bridge" / "mcp.mjs"
TOOLS = [{"name": "bash", "description": "run a command", "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                                                                          "required": ["command"]}}]

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def _channel(calls: list) -> ch.Channel:
    def call(body):
        calls.append(body)
        ok = body.get("name") == "bash"
        return ch.Reply(200, {"ok": ok, "text": f"ran {json.dumps(body.get('arguments'))}" if ok else "Error: no such tool"})

    return ch.Channel(ch.Routes(lambda body: ch.Reply(500, {}), lambda: ch.Reply(200, TOOLS), call,
                                more={"/v1/messages": lambda body: ch.Reply(200, events=[("message_start", {"n": 1}), ("message_stop", {})], done=False)}),
                      lambda peer: True)


def test_the_bridge_serves_the_channels_tools_to_an_mcp_client():
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    calls: list = []

    async def session(path: Path):
        params = StdioServerParameters(command="node", args=[str(BRIDGE)], env={"SEARCHBOX_CHANNEL": str(path), "PATH": os.environ["PATH"]})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            listed = await client.list_tools()
            good = await client.call_tool("bash", {"command": "ls dataroom"})
            bad = await client.call_tool("rm_everything", {})
            return listed, good, bad

    with _channel(calls) as channel:
        listed, good, bad = asyncio.run(asyncio.wait_for(session(channel.path), 60))
    assert [(t.name, t.input_schema["required"]) for t in listed.tools] == [("bash", ["command"])]
    assert not good.is_error and good.content[0].text == 'ran {"command": "ls dataroom"}'
    assert bad.is_error and "no such tool" in bad.content[0].text  # the channel says no; the bridge only passes it on
    assert [c["name"] for c in calls] == ["bash", "rm_everything"]  # every call reached searchbox, none ran in the bridge


def test_the_bridge_answers_garbage_with_errors_and_exits_when_stdin_closes():
    calls: list = []
    with _channel(calls) as channel:
        lines = "\n".join(["not json", "[1, 2]", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "resources/list"}),
                           json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                           json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "bash", "arguments": {"command": "x"}}})])
        out = subprocess.run(["node", str(BRIDGE)], input=lines + "\n", capture_output=True, text=True, timeout=60,
                             env={"SEARCHBOX_CHANNEL": str(channel.path), "PATH": os.environ["PATH"]})
    replies = [json.loads(line) for line in out.stdout.splitlines()]
    assert out.returncode == 0
    assert [r.get("error", {}).get("code") for r in replies[:3]] == [-32700, -32600, -32601]
    assert replies[3]["id"] == 2 and replies[3]["result"]["content"][0]["text"] == 'ran {"command": "x"}'  # answered before exit
    assert len(replies) == 4  # the notification got no answer


def test_a_bridge_without_its_channel_says_so():
    out = subprocess.run(["node", str(BRIDGE)], input="", capture_output=True, text=True, timeout=60, env={"PATH": os.environ["PATH"]})
    assert out.returncode == 2 and "SEARCHBOX_CHANNEL is not set" in out.stderr


def test_a_harness_route_streams_named_events_without_done():
    from tests.harness.test_pi_channel import _ask

    with _channel([]) as channel:
        status, headers, text = _ask(channel.path, "POST", "/v1/messages", {"model": "m"})
        assert _ask(channel.path, "POST", "/v1/responses", {})[0] == 404  # only the routes the harness named
    assert status == 200 and headers["Content-Type"] == "text/event-stream"
    assert text == 'event: message_start\ndata: {"n": 1}\n\nevent: message_stop\ndata: {}\n\n'


FORWARD = Path(ch.__file__).parent / "bridge" / "forward.mjs"


def test_the_forwarder_leads_a_loopback_port_to_the_channel_and_stops_with_its_harness():
    import http.client
    import socket

    with socket.socket() as probe:  # a free port on this host's loopback (the box has its own)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with _channel([]) as channel:
        proc = subprocess.Popen(["node", str(FORWARD)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                env={"SEARCHBOX_CHANNEL": str(channel.path), "SEARCHBOX_PORT": str(port), "PATH": os.environ["PATH"]})
        try:
            assert json.loads(proc.stdout.readline()) == {"listening": port}
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", "/searchbox/tools")
            assert json.loads(conn.getresponse().read()) == TOOLS  # the channel answered, through the forwarder
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", "http://169.254.169.254/latest/meta-data")
            assert conn.getresponse().status == 404  # it leads to the channel's routes and nowhere else
            proc.stdin.close()  # the harness went away
            assert proc.wait(30) == 0
        finally:
            proc.kill()
