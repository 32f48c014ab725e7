"""The channel out of Pi's box and what crosses it (harness/channel.py, wire.py): no Pi needed."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import socket
import threading
import time

import pytest

from searchbox.harness import channel as ch
from searchbox.harness.pi import wire
from searchbox.model.llm import Response, Usage


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path: str):
        super().__init__("searchbox.channel", timeout=30)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def _channel(seen: list, admit=None) -> ch.Channel:
    def chat(body):
        seen.append(body)
        return ch.Reply(200, events=[{"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}])

    return ch.Channel(ch.Routes(chat, lambda: ch.Reply(200, [{"name": "search_dataroom"}]),
                                lambda body: ch.Reply(200, {"ok": True, "text": json.dumps(body)})), admit or (lambda peer: peer.pid == os.getpid()))


def _ask(path, method, target, body=None, headers=None):
    conn = UnixHTTP(str(path))
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, target, body=data, headers={"Content-Type": "application/json", **(headers or {})})
    resp = conn.getresponse()
    out = resp.status, dict(resp.getheaders()), resp.read().decode()
    conn.close()
    return out


def test_the_channel_serves_its_three_routes_and_nothing_else():
    seen = []
    with _channel(seen) as channel:
        status, headers, text = _ask(channel.path, "POST", "/v1/chat/completions", {"messages": []})
        assert status == 200 and headers["Content-Type"] == "text/event-stream" and text.endswith("data: [DONE]\n\n")
        assert _ask(channel.path, "GET", "/searchbox/tools")[0] == 200
        assert json.loads(_ask(channel.path, "POST", "/searchbox/call", {"name": "x"})[2])["ok"]
        # No route names another place: an absolute target, a Host header or CONNECT all land on the same 404.
        for method, target, extra in (("GET", "http://169.254.169.254/latest/meta-data", {}), ("POST", "http://10.0.0.1/v1/chat/completions", {}),
                                      ("GET", "/v1/models", {"Host": "api.openai.com"}), ("CONNECT", "example.com:443", {}),
                                      ("DELETE", "/v1/chat/completions", {})):
            status, headers, text = _ask(channel.path, method, target, {} if method == "POST" else None, extra)
            assert status == 404 and headers.get("x-should-retry") == "false", (method, target, text)
        assert len(seen) == 1
        assert oct(channel.path.stat().st_mode & 0o777) == "0o666"  # the box's uid connects, through its bind
        assert oct(channel.folder.stat().st_mode & 0o777) == "0o700"  # and nobody else reaches the socket
    assert not channel.path.exists() and not channel.folder.exists()


def test_the_channel_caps_what_it_reads(monkeypatch):
    monkeypatch.setattr(ch, "MAX_BODY", 1000)
    monkeypatch.setattr(ch, "READ_TIMEOUT_S", 1.0)
    with _channel([]) as channel:
        big = socket.socket(socket.AF_UNIX)
        big.connect(str(channel.path))
        big.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 5000\r\n\r\n")  # over the cap: not read
        big.settimeout(10)
        assert big.recv(100).startswith(b"HTTP/1.1 413")
        big.close()
        assert _ask(channel.path, "POST", "/searchbox/call", None, {"Transfer-Encoding": "chunked"})[0] in (400, 411)
        idle = socket.socket(socket.AF_UNIX)
        idle.connect(str(channel.path))
        idle.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 10\r\n\r\n")  # and never the body
        idle.settimeout(10)
        start = time.monotonic()
        assert idle.recv(100) == b""  # closed unanswered once the read deadline passed
        assert time.monotonic() - start < 9
        idle.close()


def test_the_channel_serves_a_bounded_number_of_connections_at_once(monkeypatch):
    monkeypatch.setattr(ch, "MAX_CONNECTIONS", 3)
    release = threading.Event()

    def slow_chat(body):
        release.wait(20)
        return ch.Reply(200, {"ok": True})

    channel = ch.Channel(ch.Routes(slow_chat, lambda: ch.Reply(200, []), lambda body: ch.Reply(200, {})), lambda peer: True).start()
    try:
        held = []
        for _ in range(3):
            s = socket.socket(socket.AF_UNIX)
            s.connect(str(channel.path))
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
            held.append(s)
        time.sleep(0.5)
        extra = socket.socket(socket.AF_UNIX)
        extra.connect(str(channel.path))
        extra.settimeout(10)
        assert extra.recv(100) == b""  # closed unanswered
        assert channel.refused == 1
        release.set()
        for s in held:
            s.settimeout(10)
            assert s.recv(100).startswith(b"HTTP/1.1 200")
            s.close()
        extra.close()
    finally:
        release.set()
        channel.close()


def test_upstream_keeps_only_what_a_chat_request_may_carry():
    body = {"messages": [{"role": "user", "content": "q"}], "tools": [{"type": "function"}], "tool_choice": "auto", "model": "evil",
            "id_slot": 3, "temperature": 2.0, "seed": 7, "grammar": "root ::= x", "n_probs": 5, "stream": True,
            "stream_options": {"include_usage": True}, "max_completion_tokens": 100000, "cache_prompt": False}
    assert wire.upstream(body, 512) == {"messages": body["messages"], "tools": body["tools"], "tool_choice": "auto", "max_tokens": 512}
    assert wire.upstream({"messages": [], "max_tokens": 64}, 512) == {"messages": [], "max_tokens": 64}
    assert wire.upstream({"messages": [], "tools": [], "tool_choice": "auto", "max_tokens": True}, 512) == {"messages": [], "max_tokens": 512}
    assert wire.is_agent_call(body) and not wire.is_agent_call({"messages": [], "tools": []})


def test_the_servers_message_reaches_pi_and_the_trace_in_one_shape():
    raw = {"role": "assistant", "content": [{"type": "text", "text": "Looking."}],
           "tool_calls": [{"id": "a", "function": {"name": "grep", "arguments": {"pattern": "Gannet"}}},
                          {"id": "a", "function": {"name": "read", "arguments": "{\"path\": \"x\"}"}},
                          {"function": {"name": 5}}, "junk"]}
    message = wire.assistant(raw, "call_1_1")
    assert message["content"] == "Looking."
    assert [c["id"] for c in message["tool_calls"]] == ["a", "call_1_1_1", "call_1_1_2"]  # unique ids, made when missing
    assert message["tool_calls"][0]["function"]["arguments"] == '{"pattern": "Gannet"}' and message["tool_calls"][2]["function"]["name"] == "5"
    billed = Response(raw, Usage(100, 20, 40), 0.1, "tool_calls")
    chunks = wire.stream(message, billed, "smollm2")
    assert chunks[0]["choices"][0]["delta"]["tool_calls"][1]["index"] == 1 and chunks[1]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[2]["usage"] == {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120, "prompt_tokens_details": {"cached_tokens": 40}}
    unbilled = Response({"content": "x"}, Usage(estimated=True), 0.1)
    assert len(wire.stream(wire.assistant({"content": "x"}, "c"), unbilled, "m")) == 2  # no usage the server did not give
    request = {"messages": [{"role": "system", "content": "sys"}, {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "out"}]}]}
    assert wire.system_of(request) == "sys" and wire.tool_messages(request) == [{"role": "tool", "tool_call_id": "a", "content": "out"}]


@pytest.mark.parametrize("bad", [None, [], "x", {"messages": "no"}])
def test_a_chat_request_that_is_no_request_is_refused_by_the_harness(bad):
    from searchbox.harness.pi.loop import PiRun

    reply = PiRun._chat(object.__new__(PiRun), bad)
    assert reply.status == 400


def test_the_run_key_holds_pis_version_our_extension_and_the_task(monkeypatch):
    """What searchbox adds to Pi is part of the key: its pin, the extension's code, the task, the settings."""
    from searchbox.config import RunConfig
    from searchbox.harness.pi import install, launch
    from searchbox.run.identity import describe_key, run_key
    from searchbox.record.record import Served

    served = Served(model_id="m", llama_cpp="b1")
    cfg = RunConfig(tools="high")
    cfg.harness.kind, cfg.harness.today = "pi", "2026-01-01"

    def key(c):
        return run_key(c, "q1", "How tall?", "data", served, protocol="native")

    described = json.loads(describe_key(cfg, "q1", "How tall?", "data", served, protocol="native"))
    pi = described["harness"]
    assert pi["pi"] == install.pinned_version() and "ANSWER.md" in pi["task"] and "2026-01-01" in pi["task"]
    assert pi["tools"] == ["read", "bash", "grep", "find", "ls", "write", "edit", "search_dataroom", "answer_question"]
    assert "harness" not in json.loads(describe_key(RunConfig(tools="high"), "q1", "How tall?", "data", served, protocol="native"))
    base = key(cfg)
    for patch in (("EXTENSION_CODE", "// changed"), ("SETTINGS", {**launch.SETTINGS, "quietStartup": False})):
        with monkeypatch.context() as m:
            if patch[0] == "EXTENSION_CODE":
                m.setattr(launch, "identity", lambda c, _f=launch.identity: {**_f(c), "extension": "changed"})
            else:
                m.setattr(launch, "SETTINGS", patch[1])
            assert key(cfg) != base
    with monkeypatch.context() as m:
        m.setattr(launch, "pinned_version", lambda: "0.74.0")
        assert key(cfg) != base
    other = RunConfig(tools="none")
    other.harness.kind, other.harness.today = "pi", "2026-01-01"
    assert key(other) != base


def test_the_channel_serves_only_the_peers_it_admits():
    """Issue 36: the run's channel socket (mode 0666 in a world-enterable sb-pi-* folder) took a chat request from a
    host process of another user, outside the box, during a turn. The peer is now checked before anything is read."""
    seen, peers = [], []

    def admit(peer):
        peers.append(peer)
        return False

    with _channel(seen, admit) as channel:
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(str(channel.path))
        sock.settimeout(10)
        try:  # the channel may close the connection before the request is even sent (EPIPE) or read (reset)
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 15\r\n\r\n{\"messages\": []}")
            answer = sock.recv(100)
        except (BrokenPipeError, ConnectionResetError):  # closed with the request unread
            answer = b""
        assert answer == b""  # closed unanswered
        sock.close()
        deadline = time.monotonic() + 5
        while not channel.strangers and time.monotonic() < deadline:
            time.sleep(0.01)
        assert channel.strangers == 1 and not seen and channel.requests == 0
        assert peers == [ch.Peer(os.getpid(), os.getuid(), os.getgid())]  # what the kernel says, not what the peer says


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a process as another user")
def test_another_user_cannot_reach_the_channel_folder():
    """As root, the harness's socket is out of reach of any other uid of the host (the folder is 0700)."""
    with _channel([]) as channel:
        probe = ("import socket, sys\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect(sys.argv[1])\n    print('CONNECTED')\n"
                 "except OSError as exc:\n    print(type(exc).__name__)")
        out = subprocess.run(["setpriv", "--reuid=65533", "--regid=65533", "--clear-groups", sys.executable, "-I", "-c", probe,
                              str(channel.path)], capture_output=True, text=True, timeout=60)
        assert out.stdout.strip() == "PermissionError", out
        assert channel.requests == 0
