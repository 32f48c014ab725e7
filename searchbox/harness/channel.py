"""The harness-owned channel: the one way out of an agent's box (Pi's, and any agent with an HTTP client of its own),
a unix socket bound into it, speaking plain HTTP/1.1.

It serves the routes its harness gives and nothing else: `POST /v1/chat/completions` (Pi's model calls, which the
harness forwards to the run's endpoint only, through its accounting), `GET /searchbox/tools` (the dataroom tools the
run selected, from the catalog), `POST /searchbox/call` (one call of such a tool), and any other POST path the
harness names (`Routes.more`: an agent's own wire API, answered by the same accounting). It never proxies: no
route takes a URL, a Host header or an absolute request target to mean anywhere else, so anything in the box
(Pi, or a command the model runs) reaches the run's model and the run's tools, accounted, and nothing more.

Everything that arrives is the model's: bodies are capped, a connection that does not send its request in time
is closed, at most MAX_CONNECTIONS are served at once, and every answer closes its connection.

Only the run's box reaches it: the socket lives in a folder only the harness can enter (0700, the system temp
directory's `sb-pi-*`); the box gets the socket itself bound in, never the folder. Every connection's peer
(SO_PEERCRED: its pid, uid and gid as the kernel saw them at connect) is put to `admit` (the run's: a process of
the box's pid namespace) before a byte of it is read; any other is closed unanswered and counted (`strangers`).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import socketserver
import struct
import tempfile
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

MAX_BODY = 32 * 1024**2  # bytes of one request body
MAX_CONNECTIONS = 16  # served at once; more are closed unanswered
READ_TIMEOUT_S = 30.0  # to send a request line, headers and body
SOCKET_NAME = "channel.sock"


@dataclass
class Reply:
    """What a route answers: a JSON body, or a stream of server-sent events (a chat completion as Pi reads it)."""

    status: int = 200
    body: Any = None
    # data: lines; an item (name, data) also names its event (`event: name`, as Anthropic's and the Responses API's do)
    events: Optional[Iterable[dict | tuple[str, dict]]] = None
    done: bool = True  # end the stream with `data: [DONE]` (OpenAI's chat completions do; the named-event APIs do not)


def error(status: int, message: str, kind: str = "searchbox_error") -> Reply:
    """An OpenAI-style error body (Pi's SDK shows its message; x-should-retry: false keeps it from retrying)."""
    return Reply(status, {"error": {"message": message, "type": kind, "code": status}})


@dataclass
class Routes:
    """The channel's routes, each a function of the parsed JSON body."""

    chat: Callable[[Any], Reply]
    tools: Callable[[], Reply]
    call: Callable[[Any], Reply]
    more: dict[str, Callable[[Any], Reply]] = field(default_factory=dict)  # POST path -> route


@dataclass(frozen=True)
class Peer:
    """Who connected, as the kernel says (SO_PEERCRED), in the harness's own pid and user namespaces."""

    pid: int
    uid: int
    gid: int


def peer_of(sock: socket.socket) -> Peer:
    pid, uid, gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return Peer(pid, uid, gid)


@dataclass
class Channel:
    """A unix-socket server on its own thread; `path` is the socket the box binds; `admit` says which peers it serves."""

    routes: Routes
    admit: Callable[[Peer], bool]
    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="sb-pi-")))  # mode 0700
    refused: int = 0  # connections closed unanswered (over MAX_CONNECTIONS)
    strangers: int = 0  # connections closed unanswered (a peer `admit` refused)
    requests: int = 0
    _server: Optional[socketserver.BaseServer] = None
    _thread: Optional[threading.Thread] = None

    @property
    def path(self) -> Path:
        return self.folder / SOCKET_NAME

    def start(self) -> "Channel":
        os.chmod(self.folder, 0o700)  # only the harness enters it: the box gets the socket bound in, not the folder
        self._server = _Server(str(self.path), _handler(self))
        self._server.channel = self
        os.chmod(self.path, 0o666)  # the box's uid (65534) connects through its bind; the folder keeps everyone else out
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):
            os.rmdir(self.folder)

    def __enter__(self) -> "Channel":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, path: str, handler: type):
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.channel: Optional[Channel] = None
        super().__init__(path, handler)

    def verify_request(self, request, client_address) -> bool:
        channel = self.channel
        try:
            ok = channel is not None and bool(channel.admit(peer_of(request)))
        except Exception:  # a peer gone meanwhile, a /proc entry unreadable: not the run's box
            ok = False
        if not ok and channel is not None:
            channel.strangers += 1
        return ok

    def process_request(self, request, client_address):
        if not self.slots.acquire(blocking=False):
            if self.channel is not None:
                self.channel.refused += 1
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def _handler(channel: Channel) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = READ_TIMEOUT_S
        server_version = "searchbox-channel"
        sys_version = ""

        def setup(self) -> None:
            self.server.channel = channel
            super().setup()

        def address_string(self) -> str:
            return "box"

        def log_message(self, format: str, *args: Any) -> None:  # the run's trace says what matters
            pass

        def _json_reply(self, reply: Reply) -> None:
            data = json.dumps(reply.body, ensure_ascii=False).encode("utf-8", "replace")
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            if reply.status >= 400:
                self.send_header("x-should-retry", "false")
            self.end_headers()
            self.wfile.write(data)

        def _send(self, reply: Reply) -> None:
            self.close_connection = True
            if reply.events is None:
                self._json_reply(reply)
                return
            self.send_response(reply.status)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for event in reply.events:
                name, data = event if isinstance(event, tuple) else (None, event)
                head = b"event: " + name.encode("ascii", "replace") + b"\n" if name else b""
                self.wfile.write(head + b"data: " + json.dumps(data, ensure_ascii=False).encode("utf-8", "replace") + b"\n\n")
                self.wfile.flush()  # each event as it comes: a streaming client reads the reply as it grows
            if reply.done:
                self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _body(self) -> tuple[Any, Optional[Reply]]:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                return None, error(411, "send a Content-Length")
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                return None, error(400, "bad Content-Length")
            if length < 0 or length > MAX_BODY:
                return None, error(413, f"request body over {MAX_BODY} bytes")
            raw = self.rfile.read(length) if length else b""
            if len(raw) != length:
                return None, error(400, "request body cut short")
            try:
                return json.loads(raw.decode("utf-8", "replace")) if raw else {}, None
            except (ValueError, RecursionError):
                return None, error(400, "the body is not JSON")

        def _route(self, method: str) -> None:
            channel.requests += 1
            path = self.path.split("?", 1)[0]
            try:
                if method == "GET" and path == "/searchbox/tools":
                    reply = channel.routes.tools()
                elif method == "POST" and path in ("/v1/chat/completions", "/searchbox/call", *channel.routes.more):
                    body, refused = self._body()
                    route = {"/v1/chat/completions": channel.routes.chat, "/searchbox/call": channel.routes.call,
                             **channel.routes.more}[path]
                    reply = refused or route(body)
                else:
                    reply = error(404, f"{method} {path[:200]}: the channel serves the run's model and tools only")
            except OSError:  # the client stopped sending (or went away) before its request was whole: no answer
                self.close_connection = True
                return
            except Exception as exc:  # the harness's own failure: Pi reads an error, the harness's record says what
                reply = error(500, f"searchbox channel error: {type(exc).__name__}")
            with contextlib.suppress(OSError):
                self._send(reply)

        def do_GET(self) -> None:
            self._route("GET")

        def do_POST(self) -> None:
            self._route("POST")

        def do_PUT(self) -> None:
            self._route("PUT")

        def do_DELETE(self) -> None:
            self._route("DELETE")

        def do_CONNECT(self) -> None:
            self._route("CONNECT")

        def handle(self) -> None:
            with contextlib.suppress(OSError, socket.timeout, ValueError):
                super().handle()

    return Handler
