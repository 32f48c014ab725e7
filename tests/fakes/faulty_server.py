"""The scripted server with wire faults: a script step may stall, drip, truncate, garble, or kill the server.

Steps as in ScriptedServer, plus {"fault": KIND} steps:
  stall      read the request, never answer (until the server closes)
  drip       send headers announcing a long body, then one byte every `every` seconds (default 2)
  truncate   announce a body, send part of it, close the connection
  garbage    200 with a body that is not JSON
  die        stop listening and drop this connection: every later request is refused
A fault step with "repeat": true stays at the head of the script (every request gets it).
no_usage=True strips `usage` and llama.cpp `timings` from every normal answer.
"""

from __future__ import annotations

import json
import threading

from tests.fakes.scripted_server import ScriptedServer


class FaultyServer(ScriptedServer):
    def __init__(self, script=None, no_usage: bool = False, **kw):
        super().__init__(script, **kw)
        self.no_usage = no_usage
        self.closing = threading.Event()
        self.faults: list[str] = []
        base = self._httpd.RequestHandlerClass
        server = self

        class Handler(base):
            def do_POST(self):
                with server._lock:
                    step = server.script[0] if server.script else {}
                    if step.get("fault") and not step.get("repeat"):
                        server.script.pop(0)
                if not step.get("fault"):
                    return base.do_POST(self)
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.faults.append(step["fault"])
                try:
                    server._fault(self, step)
                except OSError:
                    pass  # the client gave up: that is the point of most faults

        self._httpd.RequestHandlerClass = Handler  # the server builds one per request from this attribute

    def __exit__(self, *exc):
        self.closing.set()
        super().__exit__(*exc)

    def _respond(self, body):
        code, payload = super()._respond(body)
        if self.no_usage and isinstance(payload, dict):
            payload = {k: v for k, v in payload.items() if k not in ("usage", "timings")}
        return code, payload

    def _fault(self, handler, step) -> None:
        kind = step["fault"]
        wfile = handler.wfile
        if kind == "stall":
            self.closing.wait(600)
        elif kind == "drip":
            wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n")
            wfile.flush()
            while not self.closing.wait(step.get("every", 2.0)):
                wfile.write(b" ")
                wfile.flush()
        elif kind == "truncate":
            body = json.dumps({"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": "cut"}}]}).encode()
            wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (len(body) + 500))
            wfile.write(body[: len(body) // 2])
            wfile.flush()
        elif kind == "garbage":
            handler._send(200, "<html>502 Bad Gateway</html>", "application/json")
            return
        elif kind == "die":
            threading.Thread(target=self._die, daemon=True).start()
        handler.close_connection = True
        handler.connection.close()

    def _die(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
